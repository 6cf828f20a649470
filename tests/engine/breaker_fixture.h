// The fixture of the Breaker tests: one breaker on a fake clock with
// deterministic jitter, and helpers that drive it the way a client does.
#ifndef BREAKERD_TESTS_ENGINE_BREAKER_FIXTURE_H_
#define BREAKERD_TESTS_ENGINE_BREAKER_FIXTURE_H_

#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/breaker.h"
#include "server/engine/clock.h"

namespace breakerd {

inline constexpr uint64_t kSecret = 0x5eed5eed12345678ULL;

inline double g_uniform = 0.5;  // 0.5 = no jitter offset
inline double TestUniform() { return g_uniform; }

class BreakerTest : public ::testing::Test {
 protected:
  BreakerTest() { g_uniform = 0.5; }

  // A policy with deterministic cooldowns: 10 s base, 80 s max, no jitter.
  static Policy BasePolicy() {
    Policy p;
    p.cooldown.base = absl::Seconds(10);
    p.cooldown.max = absl::Seconds(80);
    p.cooldown.jitter = 0;
    p.failure_rate.threshold = 0;  // only the rule under test
    return p;
  }

  void Make(const Policy& p) {
    breaker_ = std::make_unique<Breaker>("dep/a", std::make_shared<Policy>(p),
                                         &context_);
  }

  AcquireResult Acquire(uint32_t attempt = 0) {
    std::optional<Transition> t;
    AcquireResult r = breaker_->Acquire(attempt, &t);
    if (t.has_value()) transitions_.push_back(*t);
    return r;
  }

  ReportResult Report(uint64_t permit, OutcomeClass c,
                      absl::Duration latency = absl::ZeroDuration(),
                      absl::Duration retry_after = absl::ZeroDuration()) {
    std::optional<Transition> t;
    auto r = breaker_->Report(permit, {c, latency, retry_after}, &t);
    EXPECT_TRUE(r.ok()) << r.status();
    if (t.has_value()) transitions_.push_back(*t);
    return r.ok() ? *r : ReportResult{};
  }

  // One full call: Acquire (must be allowed) then Report.
  ReportResult Call(OutcomeClass c,
                    absl::Duration latency = absl::ZeroDuration(),
                    absl::Duration retry_after = absl::ZeroDuration()) {
    AcquireResult a = Acquire();
    EXPECT_TRUE(a.allowed);
    return Report(a.permit, c, latency, retry_after);
  }

  void Trip() {
    for (int i = 0; i < 5; ++i) Call(OutcomeClass::kTimeout);
    ASSERT_EQ(Current(), State::kOpen);
  }

  State Current() { return breaker_->Snapshot().state; }

  FakeClock clock_;
  BreakerContext context_{&clock_, kSecret, &TestUniform};
  BreakerContext default_jitter_{&clock_, kSecret};
  std::unique_ptr<Breaker> breaker_;
  std::vector<Transition> transitions_;
};

}  // namespace breakerd

#endif  // BREAKERD_TESTS_ENGINE_BREAKER_FIXTURE_H_
