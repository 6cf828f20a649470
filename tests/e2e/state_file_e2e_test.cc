// End-to-end: what the real binary does with the file --state-file names
// when that file is not a state file.
#include <signal.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd {
namespace {

constexpr absl::Duration kWait = absl::Seconds(15);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// --state-file naming the Admin token file by a typo: breakerd serves, says
// (as an error naming the path) that it will not save state there, and the
// token survives the start, an override (which saves state before it
// answers) and the shutdown, so Admin still works with it.
TEST(StateFileE2eTest, TheTokenFileNamedAsTheStateFileSurvives) {
  constexpr char kToken[] = "Qz7x-9Vbw-4Kpm-2Rjc-8Lhd-81c4";
  BreakerdProcess proc;
  const std::string token_file =
      proc.WriteFile("admin-token", absl::StrCat(kToken, "\n"));
  ASSERT_TRUE(proc.Start(
      {"--admin-token-file=" + token_file, "--state-file=" + token_file}));
  ASSERT_TRUE(
      proc.WaitForLog("\"event\":\"state_file_skipped\"", absl::Seconds(5)));
  EXPECT_EQ(ReadFile(token_file), absl::StrCat(kToken, "\n"));

  auto admin = proc.AdminStub();
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", BearerToken(kToken));
  v1::ForceOpenRequest request;
  request.set_dependency("typo/dep");
  v1::AdminResponse response;
  grpc::Status s = admin->ForceOpen(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(ReadFile(token_file), absl::StrCat(kToken, "\n"));

  ASSERT_TRUE(proc.Signal(SIGTERM));
  EXPECT_EQ(proc.WaitExit(kWait), 0) << proc.Log();
  EXPECT_EQ(ReadFile(token_file), absl::StrCat(kToken, "\n"));

  const std::string log = proc.Log();
  EXPECT_EQ(proc.CountInLog("\"event\":\"state_file_skipped\""), 1) << log;
  EXPECT_TRUE(absl::StrContains(log, "will not save state there")) << log;
  EXPECT_TRUE(absl::StrContains(log, token_file)) << log;
  EXPECT_EQ(proc.CountInLog("\"event\":\"state_saved\""), 0) << log;
  EXPECT_EQ(proc.CountInLog("\"event\":\"state_save_failed\""), 0) << log;
  // Any 6 consecutive bytes of the token.
  const std::string token(kToken);
  for (size_t i = 0; i + 6 <= token.size(); ++i) {
    EXPECT_FALSE(absl::StrContains(log, token.substr(i, 6)))
        << "token bytes " << token.substr(i, 6) << " logged:\n"
        << log;
  }
}

}  // namespace
}  // namespace breakerd
