#include "server/service/trace_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
  // O_NOFOLLOW: a symlink planted at the path must not redirect breakerd's
  // writes; 0600: the trace names every dependency. O_NONBLOCK only so a
  // FIFO found there cannot hang the start (it is then refused).
  const int fd = ::open(
      path.c_str(),
      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
      0600);
  if (fd < 0) {
    const int error = errno;
    return absl::InvalidArgumentError(
        absl::StrCat("trace-file ", path, ": cannot open for appending: ",
                     error == ELOOP ? "it is a symlink (not followed)"
                                    : std::strerror(error)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("trace-file ", path, ": not a regular file"));
  }
  ::fcntl(fd, F_SETFL, O_WRONLY | O_APPEND);
  // A file left by an older breakerd (0644) is made owner-only too.
  if (st.st_uid == ::geteuid() && (st.st_mode & 077) != 0) {
    ::fchmod(fd, st.st_mode & 0700);
  }
  std::FILE* file = ::fdopen(fd, "a");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("trace-file ", path,
                     ": cannot open for appending: ", std::strerror(error)));
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
    // v1::Outcome numbers are OutcomeClass numbers (static_assert in
    // convert.cc).
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
