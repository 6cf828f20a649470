// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// SidecarPresence: whether breakerd is present or away (client/README.md,
// "Sidecar away"). An Acquire whose RPC timed out or found breakerd
// unavailable marks it away, so that the calls after it decide at once
// instead of each waiting out decision_timeout. While away, a background
// thread sends the standard grpc.health.v1.Health/Check (service "") every
// probe_interval, first resetting the channel's reconnect backoff if it is
// in TRANSIENT_FAILURE (so each probe is a connection attempt), and waiting
// for the connection within the check's deadline; the first SERVING answer,
// or any message on the Watch stream (MarkPresent), brings breakerd back (and
// calls on_back, which has the Reports held while away sent). While
// present the thread waits on a condition variable and sends nothing. The
// two changes are logged through a ChangeLog (rate limited), under the
// presence's lock so that the log follows the order of the changes.
//
// Thread-safety: thread-safe.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_SIDECAR_PRESENCE_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_SIDECAR_PRESENCE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "breakerd/internal/change_log.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace breakerd::client::internal {

class SidecarPresence {
 public:
  struct Options {
    // The channel to breakerd (shared with the Breaker stub).
    std::shared_ptr<grpc::Channel> channel;
    // Deadline of each health check (the client's decision_timeout).
    absl::Duration probe_timeout = absl::Milliseconds(20);
    // Wait before each health check while away.
    absl::Duration probe_interval = absl::Milliseconds(100);
    // Names breakerd in the log lines (its target).
    std::string target;
    // What the client does while away, for the log line ("failing open").
    std::string while_away;
    // Gets the "unreachable" line (wrong) and the "back" line (right).
    ChangeLog* log = nullptr;
    // Called (if set) each time breakerd is back, on the thread that heard
    // from it (the probe's or the Watch stream's), with no lock of the
    // presence held; must not block.
    std::function<void()> on_back;
  };

  // Starts the probe thread (idle until MarkAway).
  // REQUIRES: options.channel and options.log set, the log outliving the
  // presence; both intervals positive.
  explicit SidecarPresence(Options options);
  // Stop().
  ~SidecarPresence();

  SidecarPresence(const SidecarPresence&) = delete;
  SidecarPresence& operator=(const SidecarPresence&) = delete;

  // True from MarkAway until the probe succeeds or MarkPresent. Lock-free:
  // every decision reads it.
  bool away() const { return away_flag_.load(std::memory_order_acquire); }

  // An Acquire or AcquireFirst RPC failed with `status` (DEADLINE_EXCEEDED
  // or UNAVAILABLE). Logs and wakes the probe if breakerd was present.
  void MarkAway(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // breakerd was heard from (`how`, for the log line). If it was away:
  // logs, then calls on_back.
  void MarkPresent(absl::string_view how) ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels a health check in flight and joins the probe thread; away()
  // keeps its last answer and no probe runs again. Idempotent.
  // REQUIRES: not called from the log's sink.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void ProbeLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks while present, then one probe_interval more. Returns false when
  // the presence is stopped, true when a health check is due.
  bool WaitUntilProbeDue() ABSL_LOCKS_EXCLUDED(mu_);
  // One health check; true if breakerd answered SERVING.
  bool Probe() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const Options options_;

  mutable absl::Mutex mu_;
  // Signalled when away_ or stopping_ changes.
  absl::CondVar changed_;
  bool away_ ABSL_GUARDED_BY(mu_) = false;
  // away_, for readers that take no lock; written with it.
  std::atomic<bool> away_flag_{false};
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The health check in flight, for Stop to cancel.
  grpc::ClientContext* probe_context_ ABSL_GUARDED_BY(mu_) = nullptr;

  // Serializes Stop's join.
  absl::Mutex join_mu_;
  // Last: started once everything above is constructed.
  std::thread probe_thread_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_SIDECAR_PRESENCE_H_
