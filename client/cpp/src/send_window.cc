#include "breakerd/internal/send_window.h"

namespace breakerd::client::internal {

SendWindow::SendWindow(int limit) : limit_(limit) {}

SendWindow::Entry SendWindow::Enter(Lane lane) {
  const bool kept = lane == Lane::kLatePermit;
  absl::MutexLock lock(&mu_);
  if (closed_ && !kept) return Entry::kClosed;
  if (active_ < limit_ && reports_.empty() && decisions_.empty()) {
    ++active_;
    return Entry::kEntered;
  }
  Waiter waiter;
  waiter.kept = kept;
  (lane == Lane::kDecision ? decisions_ : reports_).push_back(&waiter);
  while (!waiter.answered) waiter.answered_cv.Wait(&mu_);
  return waiter.entry;
}

void SendWindow::Leave() {
  absl::MutexLock lock(&mu_);
  --active_;
  Grant();
}

void SendWindow::Flush() {
  absl::MutexLock lock(&mu_);
  AnswerAll(Entry::kFlushed);
}

void SendWindow::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  AnswerAll(Entry::kClosed);
}

int SendWindow::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

int SendWindow::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(reports_.size() + decisions_.size());
}

void SendWindow::Grant() {
  while (active_ < limit_ && !(reports_.empty() && decisions_.empty())) {
    std::deque<Waiter*>& lane = reports_.empty() ? decisions_ : reports_;
    Waiter* next = lane.front();
    lane.pop_front();
    ++active_;
    next->entry = Entry::kEntered;
    next->answered = true;
    next->answered_cv.Signal();
  }
}

void SendWindow::AnswerAll(Entry entry) {
  for (std::deque<Waiter*>* lane : {&reports_, &decisions_}) {
    std::deque<Waiter*> kept;
    for (Waiter* waiter : *lane) {
      if (waiter->kept) {
        kept.push_back(waiter);
        continue;
      }
      waiter->entry = entry;
      waiter->answered = true;
      waiter->answered_cv.Signal();
    }
    lane->swap(kept);
  }
}

}  // namespace breakerd::client::internal
