// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// SendWindow: how many Acquire, AcquireFirst and Report RPCs the client has
// on the wire at once (kLimit, 32, as the Node client's), and who waits.
// breakerd takes at most 256 streams per connection, and on a loaded
// machine a thousand blocking calls started together, each with a deadline
// of decision_timeout from its start, mostly expire queued in the client's
// own transport: they fail open, and the first timeout marks breakerd away
// for all the rest. Through the window each RPC is started only when it has
// a place, its deadline running from then, so decision_timeout measures
// breakerd, not the application's burst. Reports go first (they end work
// already begun and give permits back); callers beyond the window wait in
// FIFO order per lane. While breakerd is marked away, Flush() answers the
// queue at once (its decision callers decide from the fail mode, as every
// call made while away does, and its report callers hold their Report
// until breakerd is back), and Close() refuses everyone for good: everyone
// but a late permit going back to breakerd (lane kLatePermit, queued with
// the reports), which is neither flushed nor refused, so that the client can
// return a permit breakerd granted after its caller stopped waiting, even
// while away or closing.
//
// Thread-safety: thread-safe.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_SEND_WINDOW_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_SEND_WINDOW_H_

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace breakerd::client::internal {

class SendWindow {
 public:
  static constexpr int kLimit = 32;

  enum class Lane {
    kReport,
    kDecision,
    // A report of a permit that came after its caller stopped waiting: in
    // the report lane, never flushed or refused.
    kLatePermit,
  };

  // What Enter got.
  enum class Entry {
    kEntered,  // the caller holds a place: send, then Leave()
    kFlushed,  // breakerd was marked away while the caller waited
    kClosed,   // the client is closed
  };

  // REQUIRES: limit >= 1.
  explicit SendWindow(int limit = kLimit);

  SendWindow(const SendWindow&) = delete;
  SendWindow& operator=(const SendWindow&) = delete;

  // Takes a place, waiting for one (behind the callers already waiting in
  // `lane`, and in the decision lane behind every report) until one is
  // free, Flush() or Close().
  Entry Enter(Lane lane) ABSL_LOCKS_EXCLUDED(mu_);

  // Gives back the place of an Enter that returned kEntered: the next
  // caller waiting gets it (reports first).
  void Leave() ABSL_LOCKS_EXCLUDED(mu_);

  // Answers every caller waiting now with kFlushed (but kLatePermit).
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // Answers every caller waiting now, and every later Enter, with kClosed
  // (but kLatePermit, which still waits for a place and gets it).
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  // Places taken, and callers waiting (for tests).
  int active() const ABSL_LOCKS_EXCLUDED(mu_);
  int queued() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One caller waiting, woken alone when answered (not by every Leave).
  struct Waiter {
    absl::CondVar answered_cv;
    bool answered = false;
    Entry entry = Entry::kEntered;
    // Lane kLatePermit: not answered by Flush or Close.
    bool kept = false;
  };

  // Hands free places to waiters, reports first.
  void Grant() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers and removes every waiter not kept with `entry`.
  void AnswerAll(Entry entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const int limit_;

  mutable absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Waiters live on their caller's stack until answered.
  std::deque<Waiter*> reports_ ABSL_GUARDED_BY(mu_);
  std::deque<Waiter*> decisions_ ABSL_GUARDED_BY(mu_);
};

// Holds a place in a SendWindow and gives it back (Leave) when destroyed,
// however the RPC that used it ends.
// REQUIRES: made for an Enter that returned kEntered.
class WindowPlace {
 public:
  explicit WindowPlace(SendWindow* window) : window_(window) {}
  ~WindowPlace() { window_->Leave(); }

  WindowPlace(const WindowPlace&) = delete;
  WindowPlace& operator=(const WindowPlace&) = delete;

 private:
  SendWindow* const window_;
};

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_SEND_WINDOW_H_
