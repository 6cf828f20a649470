#include "bench/abuse/abuser.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/abuse/client.h"
#include "breakerd/v1/breaker.grpc.pb.h"

namespace breakerd {
namespace bench {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(15);
constexpr absl::Duration kStopTimeout = absl::Seconds(15);
constexpr char kReady[] = "ready";
constexpr char kResultPrefix[] = "result ";
constexpr char kFirstErrorKey[] = "first_error=";

// Every mode and its flag value, in the order ParseAbuseMode tries them.
struct ModeName {
  AbuseMode mode;
  const char* name;
};
constexpr ModeName kModeNames[] = {
    {AbuseMode::kWatchFirst, "watch_first"},
    {AbuseMode::kWatchSnapshot, "watch_snapshot"},
    {AbuseMode::kListStates, "list_states"},
};

// The operation in flight, so that the stop can cancel it at once instead
// of waiting for its deadline.
//
// Thread-safety: thread-safe.
class InFlight {
 public:
  // Makes `ctx` the operation in flight; false if stopped already.
  bool Begin(grpc::ClientContext* ctx) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return false;
    ctx_ = ctx;
    return true;
  }
  // REQUIRES: a successful Begin, whose context is still alive.
  void End() {
    absl::MutexLock lock(&mu_);
    ctx_ = nullptr;
  }
  void Stop() {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  bool stopped() {
    absl::MutexLock lock(&mu_);
    return stopped_;
  }

 private:
  absl::Mutex mu_;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

// Watch(all), reading `wanted` messages (>= 1) before cancelling. Returns
// false, counting nothing, if the stop interrupted it.
bool WatchOnce(v1::Breaker::Stub* stub, InFlight* in_flight, size_t wanted,
               AbuseCounts* counts) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (!in_flight->Begin(&ctx)) return false;
  const v1::WatchRequest request;  // no dependencies: every breaker
  std::unique_ptr<grpc::ClientReader<v1::StateChange>> reader =
      stub->Watch(&ctx, request);
  v1::StateChange change;
  size_t read = 0;
  while (read < wanted && reader->Read(&change)) ++read;
  const bool complete = read == wanted;
  if (complete) ctx.TryCancel();
  const grpc::Status status = reader->Finish();
  in_flight->End();
  if (in_flight->stopped()) return false;
  counts->messages += read;
  if (complete) {
    ++counts->ok;  // finished CANCELLED, by us
  } else if (status.ok()) {
    // The server ended the stream before the snapshot was complete.
    ++counts->other;
    if (counts->first_error.empty()) {
      counts->first_error = absl::StrCat("Watch ended OK after ", read, " of ",
                                         wanted, " messages");
    }
  } else {
    counts->Classify(status);
  }
  return true;
}

// As WatchOnce, for one ListStates.
bool ListStatesOnce(v1::Breaker::Stub* stub, InFlight* in_flight,
                    AbuseCounts* counts) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (!in_flight->Begin(&ctx)) return false;
  v1::ListStatesResponse response;
  const grpc::Status status =
      stub->ListStates(&ctx, v1::ListStatesRequest(), &response);
  in_flight->End();
  if (in_flight->stopped()) return false;
  counts->Classify(status);
  return true;
}

void PrintLine(absl::string_view line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// Reads one line from `fd` (without the newline) until `deadline`. False on
// EOF, error or timeout.
bool ReadLine(int fd, absl::Time deadline, std::string* line) {
  line->clear();
  while (true) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int n =
        poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n < 0 && errno != EINTR) return false;
    if (n <= 0) continue;
    char c;
    if (read(fd, &c, 1) != 1) return false;
    if (c == '\n') return true;
    line->push_back(c);
  }
}

}  // namespace

const char* AbuseModeName(AbuseMode mode) {
  for (const ModeName& m : kModeNames) {
    if (m.mode == mode) return m.name;
  }
  return "?";
}

std::optional<AbuseMode> ParseAbuseMode(absl::string_view name) {
  for (const ModeName& m : kModeNames) {
    if (name == m.name) return m.mode;
  }
  return std::nullopt;
}

void AbuseCounts::Classify(const grpc::Status& s) {
  if (s.ok()) {
    ++ok;
  } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    ++refused;
  } else {
    ++other;
    if (first_error.empty()) first_error = StatusText(s);
  }
}

void AbuseCounts::Add(const AbuseCounts& c) {
  ok += c.ok;
  refused += c.refused;
  other += c.other;
  messages += c.messages;
  seconds = std::max(seconds, c.seconds);
  if (first_error.empty()) first_error = c.first_error;
}

std::string AbuseCounts::ResultLine() const {
  // first_error last: it runs to the end of the line.
  std::string error = first_error;
  std::replace(error.begin(), error.end(), '\n', ' ');
  return absl::StrFormat(
      "%sok=%d refused=%d other=%d messages=%d seconds=%.3f %s%s",
      kResultPrefix, ok, refused, other, messages, seconds, kFirstErrorKey,
      error);
}

bool AbuseCounts::ParseResultLine(absl::string_view line, AbuseCounts* out) {
  if (!absl::ConsumePrefix(&line, kResultPrefix)) return false;
  const size_t error_at = line.find(kFirstErrorKey);
  if (error_at == absl::string_view::npos) return false;
  AbuseCounts c;
  c.first_error = std::string(line.substr(error_at + strlen(kFirstErrorKey)));
  for (absl::string_view field :
       absl::StrSplit(line.substr(0, error_at), ' ', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(field, absl::MaxSplits('=', 1));
    bool parsed = false;
    if (kv.first == "seconds") {
      parsed = absl::SimpleAtod(kv.second, &c.seconds);
    } else {
      for (auto [key, value] :
           {std::pair{"ok", &c.ok}, std::pair{"refused", &c.refused},
            std::pair{"other", &c.other}, std::pair{"messages", &c.messages}}) {
        if (kv.first == key) parsed = absl::SimpleAtoi(kv.second, value);
      }
    }
    if (!parsed) return false;
  }
  *out = std::move(c);
  return true;
}

int RunAbuser(const AbuserOptions& options) {
  if (options.mode == AbuseMode::kWatchSnapshot && options.snapshot_size < 1) {
    std::fprintf(stderr, "abuse_bench: watch_snapshot needs a snapshot size\n");
    return 2;
  }
  // Before any thread exists: threads inherit their creator's nice value.
  if (options.nice != 0) setpriority(PRIO_PROCESS, 0, options.nice);
  auto channel = MakeChannel(options.target, absl::StrCat("abuser-", getpid()));
  if (!Connect(channel)) {
    std::fprintf(stderr, "abuse_bench: abuser cannot connect to %s\n",
                 options.target.c_str());
    return 2;
  }
  auto stub = v1::Breaker::NewStub(channel);
  InFlight in_flight;
  std::thread stopper([&in_flight] {
    char buf[64];
    while (read(STDIN_FILENO, buf, sizeof(buf)) > 0) {
    }
    in_flight.Stop();
  });
  PrintLine(kReady);
  const absl::Time start = absl::Now();
  AbuseCounts counts;
  const size_t wanted = options.mode == AbuseMode::kWatchSnapshot
                            ? static_cast<size_t>(options.snapshot_size)
                            : 1;
  while (options.mode == AbuseMode::kListStates
             ? ListStatesOnce(stub.get(), &in_flight, &counts)
             : WatchOnce(stub.get(), &in_flight, wanted, &counts)) {
  }
  counts.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  stopper.join();
  PrintLine(counts.ResultLine());
  return 0;
}

// --- AbuserProcess -----------------------------------------------------------

AbuserProcess::~AbuserProcess() { Kill(); }

bool AbuserProcess::Start(const std::string& exe,
                          const std::vector<std::string>& args,
                          std::string* error) {
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) {
    *error = absl::StrCat("pipe: ", std::strerror(errno));
    return false;
  }
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    *error = absl::StrCat("pipe: ", std::strerror(errno));
    close(to_child[0]);
    close(to_child[1]);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears close-on-exec on the new descriptors only: the child keeps
  // no other end of any pipe (else it would never see EOF on stdin).
  posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
  std::vector<std::string> all = {exe};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc =
      posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  stdin_ = to_child[1];
  stdout_ = from_child[0];
  if (rc != 0) {
    pid_ = 0;
    *error = absl::StrCat("posix_spawn ", exe, ": ", std::strerror(rc));
    return false;
  }
  std::string line;
  if (!ReadLine(stdout_, absl::Now() + kStartTimeout, &line) ||
      line != kReady) {
    *error =
        absl::StrCat("abuser ", pid_, " did not start (got \"", line, "\")");
    return false;
  }
  return true;
}

void AbuserProcess::AskToStop() {
  if (stdin_ >= 0) close(stdin_);
  stdin_ = -1;
}

bool AbuserProcess::Collect(AbuseCounts* counts, std::string* error) {
  AskToStop();
  const absl::Time deadline = absl::Now() + kStopTimeout;
  std::string line;
  bool reported = false;
  while (!reported && ReadLine(stdout_, deadline, &line)) {
    reported = AbuseCounts::ParseResultLine(line, counts);
  }
  int status = 0;
  bool exited = false;
  while (!exited && absl::Now() < deadline) {
    exited = waitpid(pid_, &status, WNOHANG) == pid_;
    if (!exited) absl::SleepFor(absl::Milliseconds(10));
  }
  if (!exited) {
    *error = absl::StrCat("abuser ", pid_, " did not exit");
    Kill();
    return false;
  }
  pid_ = 0;
  CloseStdout();
  if (!reported || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = absl::StrCat("abuser ended without a result (wait status ", status,
                          ")");
    return false;
  }
  return true;
}

void AbuserProcess::CloseStdout() {
  if (stdout_ >= 0) close(stdout_);
  stdout_ = -1;
}

void AbuserProcess::Kill() {
  AskToStop();
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  CloseStdout();
}

}  // namespace bench
}  // namespace breakerd
