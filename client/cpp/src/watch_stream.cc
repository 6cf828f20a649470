#include "breakerd/internal/watch_stream.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace breakerd::client::internal {
namespace {

// breakerd's Watch marks the headers of a subscribed stream with this.
constexpr char kWatchSubscribedHeader[] = "breakerd-watch-subscribed";

}  // namespace

WatchStream::WatchStream(Options options) : options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

WatchStream::~WatchStream() { Stop(); }

void WatchStream::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

CacheVerdict WatchStream::Decide(absl::string_view dependency,
                                 bool may_grant) const {
  // Shared: every decision reads the cache.
  ShardedReaderLock lock(&cache_mu_);
  return cache_.Decide(dependency, may_grant,
                       [this] { return options_.clock->Now(); });
}

std::optional<State> WatchStream::CachedState(
    absl::string_view dependency) const {
  ShardedReaderLock lock(&cache_mu_);
  return cache_.StateOf(dependency);
}

bool WatchStream::connected() const {
  absl::MutexLock lock(&mu_);
  return connected_;
}

void WatchStream::Loop() {
  absl::Duration backoff = options_.backoff_initial;
  while (true) {
    grpc::ClientContext ctx;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      context_ = &ctx;
    }
    std::unique_ptr<grpc::ClientReader<v1::StateChange>> reader =
        options_.stub->Watch(&ctx, v1::WatchRequest());
    // breakerd sends its headers, marked, once the stream is subscribed.
    reader->WaitForInitialMetadata();
    bool live = false;
    {
      absl::MutexLock lock(&mu_);
      connected_ = live = !stopping_ && ctx.GetServerInitialMetadata().count(
                                            kWatchSubscribedHeader) > 0;
    }
    v1::StateChange change;
    while (reader->Read(&change)) {
      {
        absl::MutexLock lock(&mu_);
        connected_ = live = true;
      }
      {
        ShardedWriterLock lock(&cache_mu_);
        cache_.Apply(change, options_.clock->Now());
      }
      options_.on_message();
    }
    (void)reader->Finish();
    {
      ShardedWriterLock lock(&cache_mu_);
      cache_.Clear();
    }
    {
      absl::MutexLock lock(&mu_);
      context_ = nullptr;
      connected_ = false;
      if (stopping_) return;
    }
    if (live) backoff = options_.backoff_initial;
    reconnects_.fetch_add(1, std::memory_order_relaxed);
    const absl::Duration wait = options_.jitter(backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), wait);
    if (stopping_) return;
  }
}

}  // namespace breakerd::client::internal
