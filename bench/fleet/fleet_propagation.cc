// Fleet propagation delay: how long after sidecar A opens a breaker does
// sidecar B (same Redis, never having seen a failure) announce it open on
// its Watch stream? For each of --rounds dependencies: B's Watch on the
// dependency is set up first; then A gets five timeouts; the clock starts
// when the fifth Report is sent and stops when B's stream delivers OPEN.
// Prints p50 / p90 / max and the raw samples' count. Not a test: no
// assertion on the figures.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

ABSL_FLAG(std::string, a, "", "gRPC address of the sidecar that opens");
ABSL_FLAG(std::string, b, "", "gRPC address of the sidecar that learns");
ABSL_FLAG(int, rounds, 50, "Dependencies opened, one after another.");
ABSL_FLAG(std::string, prefix, "prop", "Dependency name prefix.");

namespace {

using breakerd::v1::Breaker;

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(5);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto a = Breaker::NewStub(grpc::CreateChannel(
      absl::GetFlag(FLAGS_a), grpc::InsecureChannelCredentials()));
  auto b = Breaker::NewStub(grpc::CreateChannel(
      absl::GetFlag(FLAGS_b), grpc::InsecureChannelCredentials()));
  std::vector<double> ms;
  const int rounds = absl::GetFlag(FLAGS_rounds);
  for (int i = 0; i < rounds; ++i) {
    const std::string dep =
        absl::StrCat(absl::GetFlag(FLAGS_prefix), "/",
                     absl::ToUnixNanos(absl::Now()), "-", i);
    grpc::ClientContext watch_ctx;
    watch_ctx.set_deadline(Deadline());
    breakerd::v1::WatchRequest wr;
    wr.add_dependencies(dep);
    auto stream = b->Watch(&watch_ctx, wr);
    breakerd::v1::StateChange change;
    if (!stream->Read(&change)) {  // the initial (closed) state
      std::fprintf(stderr, "watch on B failed\n");
      return 1;
    }
    absl::Time sent;
    for (int n = 0; n < 5; ++n) {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      breakerd::v1::AcquireRequest req;
      req.set_dependency(dep);
      breakerd::v1::AcquireResponse resp;
      if (!a->Acquire(&ctx, req, &resp).ok() || !resp.allowed()) {
        std::fprintf(stderr, "acquire on A failed\n");
        return 1;
      }
      grpc::ClientContext rctx;
      rctx.set_deadline(Deadline());
      breakerd::v1::ReportRequest rep;
      rep.set_dependency(dep);
      rep.set_permit(resp.permit());
      rep.set_outcome(breakerd::v1::OUTCOME_TIMEOUT);
      breakerd::v1::ReportResponse rr;
      sent = absl::Now();
      if (!a->Report(&rctx, rep, &rr).ok()) {
        std::fprintf(stderr, "report on A failed\n");
        return 1;
      }
    }
    bool seen = false;
    while (stream->Read(&change)) {
      if (change.state() == breakerd::v1::STATE_OPEN) {
        ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - sent));
        seen = true;
        break;
      }
    }
    watch_ctx.TryCancel();
    stream->Finish();
    if (!seen) {
      std::fprintf(stderr, "B never announced %s open\n", dep.c_str());
      return 1;
    }
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))];
  };
  std::printf(
      "propagation A opens -> B announces open (Watch), %zu rounds: "
      "p50 %.2f ms, p90 %.2f ms, max %.2f ms\n",
      ms.size(), pct(0.5), pct(0.9), ms.back());
  return 0;
}
