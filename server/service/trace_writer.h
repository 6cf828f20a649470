// Writes a trace of reported outcomes, one JSON object per line, in the
// format `breakerctl simulate --trace` replays (tools/breakerctl/README.md):
//   {"t":"2026-11-30T12:00:01.250Z","dependency":"llm/openai","outcome":"timeout","latency_ms":812}
// Only calls that were made are in it (Reports), each once; calls the
// breaker refused were never made and have no outcome, and a repeated
// Report of a permit (EFFECT_DUPLICATE) is not another call. The file is
// bounded: once it holds max_bytes, further records are dropped (and counted),
// never written.
//
// Thread-safety: thread-safe. Record() holds a mutex around one buffered
// write; the trace is off by default and costs nothing then.
#ifndef BREAKERD_SERVER_SERVICE_TRACE_WRITER_H_
#define BREAKERD_SERVER_SERVICE_TRACE_WRITER_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "breakerd/v1/breaker.pb.h"
#include "server/engine/mutex.h"

namespace breakerd {

class TraceWriter {
 public:
  // Opens `path` for appending, creating it owner-only (0600; an existing
  // file of ours loses its group and other bits). A symlink at `path` is not
  // followed, and anything but a regular file is refused. Returns an error
  // naming the path if it cannot be opened. REQUIRES: max_bytes > 0.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(
      const std::string& path, uint64_t max_bytes);
  ~TraceWriter();

  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends one line for a Report the engine accepted. REQUIRES: the
  // request's dependency was validated (no JSON escaping is needed).
  void Record(const v1::ReportRequest& report) ABSL_LOCKS_EXCLUDED(mu_);

  // Records dropped because the file reached max_bytes.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  TraceWriter(std::FILE* file, uint64_t size, uint64_t max_bytes);

  const uint64_t max_bytes_;
  Mutex mu_;
  std::FILE* const file_;
  uint64_t size_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_TRACE_WRITER_H_
