// Runs N Acquire+Report pairs on one closed breaker and exits: a fixed
// workload for `valgrind --tool=callgrind`, whose instruction counts are
// repeatable on a noisy machine. Instructions per pair =
// (Ir(2N) - Ir(N)) / N, which cancels start-up costs.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "server/engine/clock.h"
#include "server/engine/registry.h"

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000;
  breakerd::Registry registry(std::make_shared<const breakerd::PolicySet>(),
                              breakerd::MonotonicClock::Get());
  breakerd::ReportRequestFacts success;
  success.outcome.http_status = 200;
  unsigned long effects = 0;
  for (long i = 0; i < n; ++i) {
    auto a = registry.Acquire("openai/key-prod-1", 0);
    auto r = registry.Report("openai/key-prod-1", a->permit, success);
    effects += static_cast<unsigned long>(r->effect);
  }
  std::printf("%ld pairs, effect sum %lu\n", n, effects);
  return 0;
}
