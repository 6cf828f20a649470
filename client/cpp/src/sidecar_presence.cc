#include "breakerd/internal/sidecar_presence.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace breakerd::client::internal {

SidecarPresence::SidecarPresence(Options options)
    : options_(std::move(options)), probe_thread_([this] { ProbeLoop(); }) {}

SidecarPresence::~SidecarPresence() { Stop(); }

void SidecarPresence::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (probe_context_ != nullptr) probe_context_->TryCancel();
    changed_.SignalAll();
  }
  // Joined once: the second Stop finds it not joinable.
  absl::MutexLock lock(&join_mu_);
  if (probe_thread_.joinable()) probe_thread_.join();
}

void SidecarPresence::MarkAway(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  if (away_) return;
  away_ = true;
  away_flag_.store(true, std::memory_order_release);
  changed_.SignalAll();
  options_.log->Wrong(absl::StrCat(
      "breakerd at ", options_.target, " unreachable (",
      absl::StatusCodeToString(
          static_cast<absl::StatusCode>(status.error_code())),
      ": ", status.error_message(), "); ", options_.while_away,
      " without asking it until a health check or the Watch stream answers"));
}

void SidecarPresence::MarkPresent(absl::string_view how) {
  // Every Watch message lands here: no lock while breakerd is present, the
  // common case.
  if (!away()) return;
  {
    absl::MutexLock lock(&mu_);
    if (!away_) return;
    away_ = false;
    away_flag_.store(false, std::memory_order_release);
    changed_.SignalAll();
    options_.log->Right(
        absl::StrCat("breakerd at ", options_.target, " back (", how, ")"));
  }
  if (options_.on_back) options_.on_back();
}

void SidecarPresence::ProbeLoop() {
  while (WaitUntilProbeDue()) {
    if (Probe()) MarkPresent("health check");
  }
}

bool SidecarPresence::WaitUntilProbeDue() {
  absl::MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && !away_) changed_.Wait(&mu_);
    if (stopping_) return false;
    const absl::Time due = absl::Now() + options_.probe_interval;
    bool due_now = false;
    while (!stopping_ && away_ && !due_now) {
      due_now = changed_.WaitWithDeadline(&mu_, due);
    }
    if (stopping_) return false;
    if (away_) return true;
    // Back during the wait (a Watch message): idle again.
  }
}

bool SidecarPresence::Probe() {
  // The probe is what brings the connection back. A Check on a channel in
  // TRANSIENT_FAILURE fails at once, with no connection attempt, until the
  // reconnect backoff ends: reset the backoff so that each probe makes an
  // attempt (an IDLE channel connects for the asking). And the Check waits
  // for the connection, within its deadline: in a synchronous client no
  // other thread polls a connection attempt, and gRPC's backup poller
  // notices its end only every 5 s. A sidecar restarted after a long outage
  // is found by the next probe, not the next backoff.
  if (options_.channel->GetState(/*try_to_connect=*/true) ==
      GRPC_CHANNEL_TRANSIENT_FAILURE) {
    grpc::experimental::ChannelResetConnectionBackoff(options_.channel.get());
  }
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() +
                   absl::ToChronoNanoseconds(options_.probe_timeout));
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    probe_context_ = &ctx;
  }
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status =
      grpc::health::v1::Health::NewStub(options_.channel)
          ->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &response);
  absl::MutexLock lock(&mu_);
  probe_context_ = nullptr;
  return status.ok() &&
         response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

}  // namespace breakerd::client::internal
