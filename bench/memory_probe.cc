// Resident memory per breaker: creates N breakers in a running breakerd over
// gRPC (one Acquire per new dependency name, its permit reported as a
// cancelled call: nothing in the window) and reads the process's VmRSS from
// /proc before and after. With --settle, waits that long (the permit
// horizon, 60 s by default, plus an eviction pass: breakerd frees each
// breaker's permit ledger then) and reads VmRSS again: the cost of an idle
// breaker. Prints one JSON object.
//
// Usage: memory_probe --target=ADDR --pid=PID [--breakers=100000]
//                     [--threads=8] [--settle=SECONDS]
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "breakerd/v1/breaker.grpc.pb.h"

namespace {

// VmRSS of `pid` in KiB, or -1.
long ResidentKiB(const std::string& pid) {
  std::ifstream status("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      long kib = 0;
      if (absl::SimpleAtoi(
              absl::StripSuffix(absl::StripPrefix(line, "VmRSS:"), " kB"),
              &kib)) {
        return kib;
      }
    }
  }
  return -1;
}

std::string Flag(int argc, char** argv, const std::string& name,
                 const std::string& fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (absl::StartsWith(argv[i], prefix)) {
      return std::string(argv[i] + prefix.size());
    }
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string target = Flag(argc, argv, "target", "127.0.0.1:50051");
  const std::string pid = Flag(argc, argv, "pid", "");
  long breakers = 100000, threads = 8, settle = 0;
  if (pid.empty() ||
      !absl::SimpleAtoi(Flag(argc, argv, "breakers", "100000"), &breakers) ||
      !absl::SimpleAtoi(Flag(argc, argv, "threads", "8"), &threads) ||
      !absl::SimpleAtoi(Flag(argc, argv, "settle", "0"), &settle)) {
    std::fprintf(stderr,
                 "usage: memory_probe --target=ADDR --pid=PID "
                 "[--breakers=N] [--threads=T] [--settle=SECONDS]\n");
    return 2;
  }
  auto channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = breakerd::v1::Breaker::NewStub(channel);

  const long before = ResidentKiB(pid);
  const absl::Time start = absl::Now();
  std::atomic<long> next{0};
  std::atomic<long> failed{0};
  std::vector<std::thread> workers;
  for (long t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      breakerd::v1::AcquireRequest request;
      breakerd::v1::AcquireResponse response;
      breakerd::v1::ReportRequest report;
      breakerd::v1::ReportResponse reported;
      report.set_outcome(breakerd::v1::OUTCOME_CANCELLED);
      for (long i = next++; i < breakers; i = next++) {
        grpc::ClientContext context;
        request.set_dependency(absl::StrCat("memprobe/dependency-", i));
        if (!stub->Acquire(&context, request, &response).ok()) {
          ++failed;
          continue;
        }
        grpc::ClientContext report_context;
        report.set_dependency(request.dependency());
        report.set_permit(response.permit());
        if (!stub->Report(&report_context, report, &reported).ok()) ++failed;
      }
    });
  }
  for (auto& w : workers) w.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const long after = ResidentKiB(pid);
  const double per_breaker =
      breakers > 0 ? (after - before) * 1024.0 / breakers : 0;
  long idle = after;
  if (settle > 0) {
    absl::SleepFor(absl::Seconds(settle));
    idle = ResidentKiB(pid);
  }
  const double idle_per_breaker =
      breakers > 0 ? (idle - before) * 1024.0 / breakers : 0;
  std::printf(
      "{\"breakers\": %ld, \"failed\": %ld, \"rss_before_kib\": %ld, "
      "\"rss_after_kib\": %ld, \"bytes_per_breaker\": %.0f, "
      "\"settle_seconds\": %ld, \"rss_idle_kib\": %ld, "
      "\"idle_bytes_per_breaker\": %.0f, \"seconds\": %.2f}\n",
      breakers, failed.load(), before, after, per_breaker, settle, idle,
      idle_per_breaker, seconds);
  return failed.load() == 0 && before > 0 && after > 0 && idle > 0 ? 0 : 1;
}
