// What the config tests share: parsing helpers, and a fixture for tests
// that write a config file and load or reload it (a fresh directory per
// test, the file's path, and a fake clock for the Registry the reload
// applies to).
#ifndef BREAKERD_TESTS_CONFIG_CONFIG_FILE_FIXTURE_H_
#define BREAKERD_TESTS_CONFIG_CONFIG_FILE_FIXTURE_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "server/config/config.h"
#include "server/engine/clock.h"

namespace breakerd {

// The name the parsing helpers give the config text in messages.
inline constexpr absl::string_view kSource = "test.yaml";

// Parses `yaml`, which must be valid (else a test failure and null).
inline std::shared_ptr<const PolicySet> MustParse(absl::string_view yaml) {
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      ParseConfig(yaml, kSource);
  EXPECT_TRUE(set.ok()) << set.status();
  return set.ok() ? *set : nullptr;
}

// The error lines of parsing `yaml`, which must be refused.
inline std::vector<std::string> ErrorLines(absl::string_view yaml) {
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      ParseConfig(yaml, kSource);
  EXPECT_FALSE(set.ok()) << yaml;
  if (set.ok()) return {};
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  return ConfigErrorLines(set.status());
}

// No jitter offset, for a Registry built on a reloaded config.
inline double HalfUniform() { return 0.5; }

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("breakerd_", info->test_suite_name(), "_", info->name(),
                        "_", getpid());
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(std::filesystem::create_directories(dir_));
    path_ = (dir_ / "config.yaml").string();
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void WriteConfig(absl::string_view content) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << content;
    ASSERT_TRUE(out.good()) << path_;
  }

  FakeClock clock_;
  std::filesystem::path dir_;
  std::string path_;
};

}  // namespace breakerd

#endif  // BREAKERD_TESTS_CONFIG_CONFIG_FILE_FIXTURE_H_
