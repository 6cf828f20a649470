#include "server/cli/secret_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/log/json_log.h"

namespace breakerd {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

// SecretFileModeCheck: a token file re-read at every poll is warned about
// when it becomes readable by others, once per change, not once per poll.
class SecretFileModeCheckTest : public ::testing::Test {
 protected:
  SecretFileModeCheckTest() {
    std::string pattern =
        absl::StrCat(::testing::TempDir(), "/bd-secret-test-XXXXXX");
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/admin-token";
    WriteToken(path_, 0600);
    previous_ = SetLogWriterForTesting([this](absl::string_view line) {
      if (absl::StrContains(line, "\"secret_file_permissive\"")) {
        warnings_.emplace_back(line);
      }
    });
  }
  ~SecretFileModeCheckTest() override {
    SetLogWriterForTesting(std::move(previous_));
    ::unlink(path_.c_str());
    ::unlink((dir_ + "/next").c_str());
    ::rmdir(dir_.c_str());
  }

  static void WriteToken(const std::string& path, mode_t mode) {
    std::ofstream(path) << "tok-mode-check-5a1e\n";
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }

  std::string dir_;
  std::string path_;
  std::vector<std::string> warnings_;
  LogWriter previous_;
};

TEST_F(SecretFileModeCheckTest, AnOwnerOnlyFileIsNeverWarnedAbout) {
  SecretFileModeCheck check(path_, "admin-token-file");
  EXPECT_FALSE(check.Check());
  EXPECT_FALSE(check.Check());
  EXPECT_THAT(warnings_, SizeIs(0));
}

TEST_F(SecretFileModeCheckTest, BecomingWorldReadableIsWarnedAboutOnce) {
  SecretFileModeCheck check(path_, "admin-token-file");
  EXPECT_FALSE(check.Check());  // at start: 0600
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  EXPECT_TRUE(check.Check());
  for (int poll = 0; poll < 5; ++poll) EXPECT_FALSE(check.Check());
  ASSERT_THAT(warnings_, SizeIs(1));
  EXPECT_THAT(warnings_[0], HasSubstr("\"level\":\"warn\""));
  EXPECT_THAT(warnings_[0], HasSubstr("\"flag\":\"admin-token-file\""));
  EXPECT_THAT(warnings_[0], HasSubstr(path_));
  EXPECT_THAT(warnings_[0], HasSubstr("\"mode\":\"0644\""));
  EXPECT_THAT(warnings_[0], ::testing::Not(HasSubstr("tok-mode-check")));
}

TEST_F(SecretFileModeCheckTest, EachChangeWhileSharedIsWarnedAboutAgain) {
  SecretFileModeCheck check(path_, "admin-token-file");
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  EXPECT_TRUE(check.Check());  // shared at start: warned then
  ASSERT_EQ(::chmod(path_.c_str(), 0666), 0);
  EXPECT_TRUE(check.Check());  // another shared mode
  EXPECT_FALSE(check.Check());

  // A rotation replaces the file: the new one, still shared, is new.
  const std::string next = dir_ + "/next";
  WriteToken(next, 0644);
  ASSERT_EQ(::rename(next.c_str(), path_.c_str()), 0);
  EXPECT_TRUE(check.Check());
  EXPECT_FALSE(check.Check());

  // Fixed, then shared again.
  ASSERT_EQ(::chmod(path_.c_str(), 0600), 0);
  EXPECT_FALSE(check.Check());
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  EXPECT_TRUE(check.Check());
  EXPECT_THAT(warnings_, SizeIs(4));
}

TEST_F(SecretFileModeCheckTest, AFileThatIsGoneChangesNothing) {
  SecretFileModeCheck check(path_, "admin-token-file");
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  EXPECT_TRUE(check.Check());
  // Mid-rotation the path may briefly be missing: not a change of mode.
  const std::string aside = dir_ + "/next";
  ASSERT_EQ(::rename(path_.c_str(), aside.c_str()), 0);
  EXPECT_FALSE(check.Check());
  ASSERT_EQ(::rename(aside.c_str(), path_.c_str()), 0);
  EXPECT_FALSE(check.Check());
  EXPECT_THAT(warnings_, SizeIs(1));
}

}  // namespace
}  // namespace breakerd
