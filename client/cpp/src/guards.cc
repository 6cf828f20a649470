// The guards: Do, Retry and First run the caller's function under a permit
// and report how it went, exactly once (client/README.md, "Guard", "Retry
// helper", "Fallback chain").
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "breakerd/client.h"
#include "breakerd/internal/names.h"
#include "breakerd/internal/statuses.h"
#include "client_impl.h"

namespace breakerd::client {

using internal::RefusedStatus;

absl::Status Client::RunGranted(absl::FunctionRef<absl::Status()> fn,
                                absl::FunctionRef<void(const Outcome&)> report,
                                Outcome* outcome) {
  absl::Status result;
  try {
    result = fn();
  } catch (...) {
    // Anything raised by the call is a server error (client/README.md,
    // "Outcome helpers").
    report(Outcome::Of(OutcomeKind::kServerError));
    throw;
  }
  try {
    *outcome = impl_->Classify(result);
  } catch (...) {
    report(Outcome::FromStatus(result));
    throw;
  }
  report(*outcome);
  return result;
}

absl::Status Client::Do(absl::string_view dependency,
                        absl::FunctionRef<absl::Status()> fn,
                        uint32_t attempt) {
  if (impl_->closed()) return internal::ClosedError();
  Impl::CacheDecision local = impl_->DecideInCache(dependency, attempt);
  if (local.grant != nullptr) {
    // The fast path: no Decision, no Permit; the outcome goes to the batch.
    // The latency on steady_clock, as a Permit's.
    const auto start = std::chrono::steady_clock::now();
    Outcome outcome;
    return RunGranted(
        fn,
        [&](const Outcome& o) {
          const auto latency = std::chrono::steady_clock::now() - start;
          impl_
              ->ReportLocal(std::move(local.grant), o,
                            absl::FromChrono(latency), /*chain=*/"",
                            /*tier=*/0)
              .IgnoreError();
        },
        &outcome);
  }
  if (local.refusal.has_value()) return RefusedStatus(*local.refusal);
  absl::StatusOr<Permit> permit = AcquireFromSidecar(dependency, attempt);
  if (!permit.ok()) return permit.status();
  if (!permit->allowed()) return RefusedStatus(permit->decision());
  Outcome outcome;
  return RunGranted(
      fn, [&](const Outcome& o) { permit->Report(o).IgnoreError(); }, &outcome);
}

absl::Status Client::Retry(absl::string_view dependency,
                           absl::FunctionRef<absl::Status()> fn,
                           const RetryOptions& options) {
  absl::Status last = absl::InvalidArgumentError(
      "max_attempts: must be at least 1 (default 3)");
  absl::Duration ceiling = options.base;
  for (int attempt = 0; attempt < options.max_attempts; ++attempt) {
    if (attempt > 0) {
      absl::SleepFor(impl_->Jitter(std::min(ceiling, options.max_backoff)));
      ceiling *= 2;
    }
    absl::StatusOr<Permit> permit =
        Acquire(dependency, static_cast<uint32_t>(attempt));
    if (!permit.ok()) return permit.status();
    if (!permit->allowed()) {
      return RefusedStatus(
          permit->decision(),
          attempt > 0 ? absl::StrCat("attempt ", attempt + 1,
                                     " not made; last error: ", last.ToString())
                      : "");
    }
    Outcome outcome;
    last = RunGranted(
        fn, [&](const Outcome& o) { permit->Report(o).IgnoreError(); },
        &outcome);
    if (last.ok() || !outcome.Retryable()) return last;
  }
  return last;
}

absl::Status Client::First(
    const std::vector<std::string>& dependencies,
    absl::FunctionRef<absl::Status(absl::string_view)> fn,
    const FirstOptions& options) {
  if (absl::Status s = internal::ValidateChain(options, dependencies.size());
      !s.ok()) {
    return s;
  }
  std::vector<std::string> remaining = dependencies;
  // The chain's name, and the tier of remaining[0].
  FirstOptions step = options;
  absl::Status last_failure;
  while (!remaining.empty()) {
    absl::StatusOr<Permit> permit = AcquireFirst(remaining, 0, step);
    if (!permit.ok()) return permit.status();
    if (!permit->allowed()) {
      return RefusedStatus(
          permit->decision(),
          last_failure.ok()
              ? ""
              : absl::StrCat("last error: ", last_failure.ToString()));
    }
    const std::string granted = permit->decision().dependency;
    Outcome outcome;
    absl::Status result = RunGranted(
        [&] { return fn(granted); },
        [&](const Outcome& o) { permit->Report(o).IgnoreError(); }, &outcome);
    // Only an outcome worth retrying is worth trying elsewhere: a bad
    // request would be as bad for the next dependency.
    if (result.ok() || !outcome.Retryable()) return result;
    last_failure = std::move(result);
    const auto it = std::find(remaining.begin(), remaining.end(), granted);
    const auto next = it == remaining.end() ? remaining.end() : it + 1;
    step.first_tier += static_cast<uint32_t>(next - remaining.begin());
    remaining.erase(remaining.begin(), next);
  }
  return last_failure;
}

}  // namespace breakerd::client
