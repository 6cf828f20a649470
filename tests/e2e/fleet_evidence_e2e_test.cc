// Fleet mode's evidence end to end: real breakerd processes on a real
// redis-server. The fleet's clock is Redis's: a sidecar whose clock is a
// minute off (libfaketime, from Debian's faketime package) still ends a
// cooldown with the others.
#include <unistd.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/e2e/fleet_harness.h"

namespace breakerd {
namespace {

constexpr char kLibFaketime[] =
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

// Five timeouts open a breaker for 3 s, published at once (quorum 1).
constexpr char kSkewConfig[] = R"(
defaults:
  consecutive_failures: 5
  failure_rate: { threshold: 0 }
  cooldown: { base: 3s, max: 12s, jitter: 0 }
  probe: { lease: 1s }
  fleet: { quorum: 1 }
)";

bool Sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// Sidecars 1 and 2 run with their wall clocks 60 s ahead and 60 s behind
// (the monotonic clock, which the engine times cooldowns with, is left
// alone: only the wall clock differs between nodes). Sidecar 0 trips;
// each must leave OPEN within a second of sidecar 0, not a minute early
// (at once) or late.
TEST_F(FleetTest, ACooldownEndsTogetherOnNodesAMinuteAheadAndBehind) {
  if (Sanitized()) {
    GTEST_SKIP() << "libfaketime is preloaded, which the sanitizer runtimes "
                    "refuse; the release suite runs this test";
  }
  ASSERT_EQ(access(kLibFaketime, R_OK), 0)
      << kLibFaketime << " is missing: apt-get install faketime";
  const std::array<const char*, 3> offsets = {"", "+60s", "-60s"};
  for (const char* offset : offsets) {
    std::vector<std::string> env;
    if (*offset != '\0') {
      env = {absl::StrCat("LD_PRELOAD=", kLibFaketime),
             absl::StrCat("FAKETIME=", offset),
             "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_DONT_RESET=1"};
    }
    StartSidecar({"--fleet-sync-interval=50ms"}, kSkewConfig, env);
  }

  const std::string dep = "skew/dep";
  for (int i = 0; i < 3; ++i) Succeed(i, dep);
  Trip(0, dep);
  const absl::Time tripped = absl::Now();
  // Everyone holds the open period...
  for (int i = 1; i < 3; ++i) {
    EXPECT_TRUE(WaitUntil(
        [&] { return StateOf(stubs_[i].get(), dep) == v1::STATE_OPEN; },
        absl::Seconds(2)))
        << "sidecar " << i << " (" << offsets[i] << ") did not open";
  }
  // ...and leaves it when the origin does.
  std::array<std::optional<absl::Time>, 3> left;
  const absl::Time give_up = tripped + absl::Seconds(10);
  while (absl::Now() < give_up &&
         !(left[0].has_value() && left[1].has_value() && left[2].has_value())) {
    for (int i = 0; i < 3; ++i) {
      if (!left[i].has_value() &&
          StateOf(stubs_[i].get(), dep) == v1::STATE_HALF_OPEN) {
        left[i] = absl::Now();
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(left[0].has_value()) << "the origin never went half-open";
  EXPECT_GE(*left[0] - tripped, absl::Milliseconds(2500));
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(left[i].has_value())
        << "sidecar " << i << " (" << offsets[i]
        << ") was still open 10 s after a 3 s cooldown began";
    EXPECT_LT(absl::AbsDuration(*left[i] - *left[0]), absl::Seconds(1))
        << "sidecar " << i << " (" << offsets[i] << ") left OPEN "
        << absl::FormatDuration(*left[i] - *left[0]) << " after the origin";
  }
}

}  // namespace
}  // namespace breakerd
