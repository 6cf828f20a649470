// Client's Reports: sent through the send window, held while breakerd is
// away and sent once it is back, and the late permits (granted after their
// caller stopped waiting) returned OUTCOME_CANCELLED, by the report thread.
#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "breakerd/internal/convert.h"
#include "breakerd/internal/proto_duration.h"
#include "breakerd/internal/statuses.h"
#include "client_impl.h"

namespace breakerd::client {
namespace {

using internal::ClosedError;
using internal::SendWindow;

// How many Reports the client holds while breakerd is away (past that the
// oldest is dropped, counted in report_errors).
constexpr size_t kMaxHeldReports = 1024;

}  // namespace

absl::StatusOr<ReportResult> Client::Impl::SendReport(const Decision& granted,
                                                      const Outcome& outcome,
                                                      absl::Duration latency,
                                                      bool late) {
  if (!late && closed()) {
    CountClosedReport();
    return ClosedError();
  }
  v1::ReportRequest request;
  request.set_dependency(granted.dependency);
  request.set_permit(granted.permit);
  if (!granted.chain.empty()) {
    request.set_chain(granted.chain);
    request.set_tier(granted.tier);
  }
  internal::SetOutcome(outcome, &request);
  internal::ToProto(std::max(latency, absl::ZeroDuration()),
                    request.mutable_latency());
  return Send(std::move(request),
              late ? ReportKind::kLatePermit : ReportKind::kCaller);
}

void Client::Impl::CountClosedReport() {
  report_errors_.fetch_add(1, std::memory_order_relaxed);
}

void Client::Impl::CountReport(const absl::Status& status) {
  if (status.ok()) {
    NoteAnswer();
    if (report_log_.wrong()) {
      report_log_.Right("Reports reach breakerd again");
    }
    return;
  }
  report_errors_.fetch_add(1, std::memory_order_relaxed);
  if (!report_log_.wrong()) {
    report_log_.Wrong(absl::StrCat("Report failed (",
                                   internal::Describe(status),
                                   "); counted in report_errors"));
  }
}

absl::StatusOr<ReportResult> Client::Impl::Send(v1::ReportRequest request,
                                                ReportKind kind) {
  const bool late = kind == ReportKind::kLatePermit;
  if (!late && presence_.away()) return Hold(std::move(request));
  switch (window_.Enter(late ? SendWindow::Lane::kLatePermit
                             : SendWindow::Lane::kReport)) {
    case SendWindow::Entry::kClosed:
      CountClosedReport();
      return ClosedError();
    case SendWindow::Entry::kFlushed:
      return Hold(std::move(request));
    case SendWindow::Entry::kEntered:
      break;
  }
  v1::ReportResponse response;
  absl::Status status;
  {
    internal::WindowPlace place(&window_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     absl::ToChronoNanoseconds(options_.decision_timeout +
                                               (kind == ReportKind::kCaller
                                                    ? absl::ZeroDuration()
                                                    : internal::kLateAnswer)));
    status = internal::FromGrpc(stub_->Report(&ctx, request, &response));
  }
  CountReport(status);
  if (!status.ok()) return status;
  return internal::ResultFrom(response);
}

absl::StatusOr<ReportResult> Client::Impl::Hold(v1::ReportRequest request) {
  bool closing = false;
  bool dropped_oldest = false;
  {
    absl::MutexLock lock(&late_mu_);
    closing = late_stopping_;
    if (!closing) {
      if (held_.size() >= kMaxHeldReports) {
        held_.pop_front();
        dropped_oldest = true;
      }
      held_.push_back(std::move(request));
      // Back since the caller found it away (its OnSidecarBack may have
      // run before this report was held): sent now.
      if (!presence_.away()) held_due_ = true;
      late_cv_.Signal();
      StartReportThread();
    }
  }
  if (closing) {
    CountClosedReport();
    return ClosedError();
  }
  if (dropped_oldest) {
    CountReport(absl::ResourceExhaustedError(
        absl::StrCat("breakerd away: more than ", kMaxHeldReports,
                     " Reports held, the oldest dropped")));
  }
  return ReportResult();
}

void Client::Impl::OnSidecarBack() {
  // The decisions counted while away go in the first batch.
  if (flusher_ != nullptr) flusher_->Back();
  absl::MutexLock lock(&late_mu_);
  if (held_.empty()) return;
  held_due_ = true;
  late_cv_.Signal();
}

void Client::Impl::StartReportThread() {
  if (!late_thread_.joinable()) {
    late_thread_ = std::thread([this] { ReportLoop(); });
  }
}

void Client::Impl::ReturnLatePermit(Decision granted) {
  absl::MutexLock lock(&late_mu_);
  if (late_stopping_) {
    // Close is past waiting for the RPCs (an Acquire started after it):
    // too late to report.
    report_errors_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  late_permits_.push_back(std::move(granted));
  late_cv_.Signal();
  StartReportThread();
}

void Client::Impl::ReportLoop() {
  while (true) {
    std::optional<Decision> late;
    std::deque<v1::ReportRequest> held;
    {
      absl::MutexLock lock(&late_mu_);
      while (late_permits_.empty() && !late_stopping_ &&
             !(held_due_ && !held_.empty())) {
        late_cv_.Wait(&late_mu_);
      }
      if (!late_permits_.empty()) {
        late = std::move(late_permits_.front());
        late_permits_.pop_front();
      } else if (late_stopping_) {
        // The held ones are StopLatePermits' to count.
        return;
      } else {
        held.swap(held_);
        held_due_ = false;
      }
    }
    if (late.has_value()) {
      // The call was never made: no latency.
      SendReport(*late, Outcome::Of(OutcomeKind::kCancelled),
                 absl::ZeroDuration(), /*late=*/true)
          .IgnoreError();
    }
    for (v1::ReportRequest& request : held) {
      Send(std::move(request), ReportKind::kHeld).IgnoreError();
    }
  }
}

void Client::Impl::StopLatePermits() {
  std::thread thread;
  {
    absl::MutexLock lock(&late_mu_);
    late_stopping_ = true;
    late_cv_.SignalAll();
    thread = std::move(late_thread_);
  }
  if (thread.joinable()) thread.join();
  absl::MutexLock lock(&late_mu_);
  report_errors_.fetch_add(held_.size(), std::memory_order_relaxed);
  held_.clear();
}

}  // namespace breakerd::client
