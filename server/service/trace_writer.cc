#include "server/service/trace_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/engine/outcome.h"

namespace breakerd {

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(
    const std::string& path, uint64_t max_bytes) {
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace-file ", path,
                     ": cannot open for appending: ", std::strerror(errno)));
  }
  std::fseek(file, 0, SEEK_END);
  const long size = std::ftell(file);
  return std::unique_ptr<TraceWriter>(new TraceWriter(
      file, size > 0 ? static_cast<uint64_t>(size) : 0, max_bytes));
}

TraceWriter::TraceWriter(std::FILE* file, uint64_t size, uint64_t max_bytes)
    : max_bytes_(max_bytes), file_(file), size_(size) {}

TraceWriter::~TraceWriter() { std::fclose(file_); }

void TraceWriter::Record(const v1::ReportRequest& report) {
  std::string line =
      absl::StrCat("{\"t\":\"",
                   absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                    absl::UTCTimeZone()),
                   "\",\"dependency\":\"", report.dependency(), "\"");
  if (report.outcome() != v1::OUTCOME_UNSPECIFIED) {
    absl::StrAppend(
        &line, ",\"outcome\":\"",
        OutcomeClassName(static_cast<OutcomeClass>(report.outcome())), "\"");
  } else if (report.http_status() != 0) {
    absl::StrAppend(&line, ",\"http_status\":", report.http_status());
  } else if (report.has_grpc_code()) {
    absl::StrAppend(&line, ",\"grpc_code\":", report.grpc_code());
  }
  if (report.has_latency()) {
    const double ms =
        report.latency().seconds() * 1e3 + report.latency().nanos() / 1e6;
    absl::StrAppend(&line, ",\"latency_ms\":", ms);
  }
  line += "}\n";
  MutexLock lock(&mu_);
  if (size_ + line.size() > max_bytes_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);  // a trace is for after an incident: keep it on disk
  size_ += line.size();
}

}  // namespace breakerd
