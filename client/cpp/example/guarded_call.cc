// A runnable example of the breakerd C++ client: guards calls to a
// pretend upstream that fails while `fail` is given, then shows the
// fallback chain.
//
//   breakerd_client_example [TARGET] [fail]
//
// TARGET defaults to $BREAKERD_ADDR or 127.0.0.1:50051;
// $BREAKERD_DECISION_TIMEOUT_MS overrides the 20 ms decision deadline. With
// breakerd's
// default policy (5 failures in a row open the breaker), `fail` shows five
// failed calls and then refusals, without the upstream being called.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "breakerd/client.h"

namespace bc = breakerd::client;

int main(int argc, char** argv) {
  bc::ClientOptions options;
  if (argc > 1) options.target = argv[1];
  if (const char* ms = std::getenv("BREAKERD_DECISION_TIMEOUT_MS")) {
    options.decision_timeout = absl::Milliseconds(std::atoi(ms));
  }
  const bool fail = argc > 2 && std::string(argv[2]) == "fail";
  auto client = bc::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 2;
  }
  (*client)->WaitForConnected(absl::Seconds(2));

  int upstream_calls = 0, ok = 0, failed = 0, refused = 0;
  auto upstream = [&]() -> absl::Status {
    ++upstream_calls;
    return fail ? absl::UnavailableError("upstream: connection refused")
                : absl::OkStatus();
  };
  for (int i = 0; i < 8; ++i) {
    absl::Status s = (*client)->Do("example/upstream", upstream);
    if (s.ok()) {
      ++ok;
    } else if (bc::IsBreakerOpen(s)) {
      ++refused;
    } else {
      ++failed;
    }
    std::printf("call %d: %s\n", i + 1, s.ok() ? "ok" : s.ToString().c_str());
  }

  // A fallback chain: the first dependency breakerd allows. Named, so
  // breakerd counts which tier served (breakerd_chain_decisions_total).
  std::string used;
  absl::Status chain = (*client)->First({"example/upstream", "example/backup"},
                                        [&](absl::string_view dep) {
                                          used = std::string(dep);
                                          return absl::OkStatus();
                                        },
                                        {"example"});
  std::printf("fallback chain: %s via %s\n",
              chain.ok() ? "ok" : chain.ToString().c_str(), used.c_str());
  std::printf("summary: ok=%d failed=%d refused=%d upstream_calls=%d\n", ok,
              failed, refused, upstream_calls);
  return 0;
}
