// breakerctl: operate a breakerd sidecar from a shell. Reads breaker states
// (list, get, watch) over breakerd.v1.Breaker and overrides them (force-open,
// force-close, reset) over breakerd.v1.Admin with a bearer token.
//
// Flags are Abseil flags, but this file parses argv itself through the flag
// reflection API: flags may come before or after the command, dashes and
// underscores both work, and every usage error exits with code 2 (Abseil's
// own parser exits with 1, which we keep for RPC errors).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "server/cli/flag_help.h"
#include "server/cli/secret_file.h"
#include "server/engine/registry.h"
#include "server/metrics/dependency_label.h"
#include "tools/breakerctl/format.h"
#include "tools/breakerctl/simulate.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "breakerd's gRPC address: host:port, [::1]:port or unix:/path.");
ABSL_FLAG(std::string, token, "",
          "Bearer token for force-open, force-close and reset. Prefer "
          "--token-file: a flag is visible in the process list.");
ABSL_FLAG(std::string, token_file, "",
          "File holding the bearer token (surrounding whitespace trimmed), "
          "the same file breakerd's --admin-token-file reads.");
ABSL_FLAG(bool, json, false,
          "Print JSON with the proto field names instead of text: list "
          "prints one array, get and the admin commands one object, watch "
          "one object per line.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5),
          "Deadline of each call (not of watch, which runs until Ctrl-C or "
          "the server ends the stream).");
ABSL_FLAG(std::string, config, "",
          "simulate: the YAML policy file, as breakerd's --config.");
ABSL_FLAG(std::string, trace, "",
          "simulate: the trace of calls, one JSON object per line, as "
          "breakerd's --trace-file writes it (tools/breakerctl/README.md).");

namespace breakerd::ctl {
namespace {

namespace v1 = ::breakerd::v1;

constexpr int kExitOk = 0;
constexpr int kExitRpcError = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] =
    R"(breakerctl: inspect and override the breakers of a breakerd sidecar.

Usage: breakerctl [flags] COMMAND [ARGS]

Commands:
  list                 every breaker as a table, sorted by dependency
  get DEP              one breaker's status
  watch [DEP...]       the current state, then every transition as it happens
                       (all dependencies if none named); Ctrl-C to stop
  force-open DEP       refuse every call to DEP until force-close or reset
                       (a shadow-mode DEP is only marked: calls still go)
  force-close DEP      allow every call to DEP until force-open or reset
  reset DEP            back to plain closed, counters and escalation cleared
  simulate --config=POLICY.yaml --trace=OUTCOMES.jsonl
                       replay recorded calls through the real engine on a
                       simulated clock; print when each breaker would have
                       opened, probed and closed, how many calls it would
                       have refused (by reason, recovery ramps included) and
                       how each ramp went. A record is an Acquire at its
                       t - latency_ms and a Report at its t; a record with
                       no outcome (no outcome, http_status or grpc_code) is
                       a call that never reported: it stays in flight, and
                       with inflight.hang_after counts as hung once it has
                       been out that long, whatever its latency_ms
  hash-label NAME...   for each dependency NAME, the label /metrics shows for
                       it under breakerd --metrics-dependency-label=hash, as
                       "NAME<TAB>LABEL" (local: no breakerd needed); a NAME
                       breakerd would refuse is an error naming it, the
                       others are still printed, and the exit code is 2
The admin commands (force-open, force-close, reset) need --token or
--token-file.

Exit codes: 0 success, 1 the call failed (the gRPC status code name and
message are printed on stderr), 2 usage error.
)";

constexpr ::breakerd::FlagDoc kFlagDocs[] = {
    {"target", "ADDR"}, {"token", "TOKEN"},      {"token_file", "PATH"},
    {"json", ""},       {"timeout", "DURATION"}, {"config", "PATH"},
    {"trace", "PATH"},
};

void PrintHelp(std::ostream& out) {
  out << kUsage << "\nFlags:\n";
  PrintFlags(out, kFlagDocs);
  out << "  --help\n      this text\n";
}

struct Args {
  std::vector<std::string> positional;
  bool help = false;
};

bool IsOurFlag(absl::string_view name) {
  return IsDocumentedFlag(kFlagDocs, name);
}

// Sets our flags from argv; everything else is positional. Never exits.
absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args args;
  bool flags_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      args.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    const size_t start = arg[1] == '-' ? 2 : 1;
    const size_t eq = arg.find('=');
    std::string name = arg.substr(
        start, eq == std::string::npos ? std::string::npos : eq - start);
    std::replace(name.begin(), name.end(), '-', '_');
    if (name == "help" || name == "h" || name == "helpfull") {
      args.help = true;
      continue;
    }
    std::optional<std::string> value;
    if (eq != std::string::npos) value = arg.substr(eq + 1);
    if (!IsOurFlag(name) && absl::StartsWith(name, "no") &&
        IsOurFlag(name.substr(2)) && !value.has_value()) {
      name = name.substr(2);
      value = "false";
    }
    absl::CommandLineFlag* flag =
        IsOurFlag(name) ? absl::FindCommandLineFlag(name) : nullptr;
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", arg.substr(0, eq), " (see --help)"));
    }
    if (!value.has_value()) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(*value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, ": ", error));
    }
  }
  return args;
}

int UsageError(absl::string_view message) {
  std::cerr << "breakerctl: " << message << "\n";
  return kExitUsage;
}

int RpcError(const grpc::Status& status) {
  std::cerr << "breakerctl: " << StatusCodeName(status.error_code()) << ": "
            << status.error_message() << "\n";
  return kExitRpcError;
}

// Prints `message` as JSON or through `text`; exit code.
template <typename Message, typename TextFn>
int Print(const Message& message, TextFn text) {
  if (absl::GetFlag(FLAGS_json)) {
    absl::StatusOr<std::string> json = ToJson(message);
    if (!json.ok()) {
      std::cerr << "breakerctl: " << json.status().message() << "\n";
      return kExitRpcError;
    }
    std::cout << *json << "\n";
  } else {
    std::cout << text(message);
  }
  return kExitOk;
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(
      absl::ToChronoTime(absl::Now() + absl::GetFlag(FLAGS_timeout)));
}

int List(v1::Breaker::Stub* stub) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ListStatesResponse response;
  grpc::Status status =
      stub->ListStates(&ctx, v1::ListStatesRequest(), &response);
  if (!status.ok()) return RpcError(status);
  if (!absl::GetFlag(FLAGS_json)) {
    std::cout << FormatTable(response);
    return kExitOk;
  }
  std::sort(response.mutable_breakers()->begin(),
            response.mutable_breakers()->end(),
            [](const v1::BreakerStatus& a, const v1::BreakerStatus& b) {
              return a.dependency() < b.dependency();
            });
  std::string out = "[";
  for (const v1::BreakerStatus& b : response.breakers()) {
    absl::StatusOr<std::string> json = ToJson(b);
    if (!json.ok()) {
      std::cerr << "breakerctl: " << json.status().message() << "\n";
      return kExitRpcError;
    }
    if (out.size() > 1) out += ",";
    out += *json;
  }
  std::cout << out << "]\n";
  return kExitOk;
}

int Get(v1::Breaker::Stub* stub, const std::string& dependency) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetStateRequest request;
  request.set_dependency(dependency);
  v1::BreakerStatus response;
  grpc::Status status = stub->GetState(&ctx, request, &response);
  if (!status.ok()) return RpcError(status);
  return Print(response, FormatStatus);
}

int Watch(v1::Breaker::Stub* stub, const std::vector<std::string>& deps) {
  // SIGINT/SIGTERM were blocked in Run before any thread started; this
  // thread takes them and cancels the stream, so Ctrl-C ends cleanly.
  // The context is never destroyed: the detached thread may still hold it
  // when Watch returns, and the process exits right after. A static keeps
  // it reachable, so LeakSanitizer does not report it at exit.
  static grpc::ClientContext* const ctx = new grpc::ClientContext;
  static std::atomic<bool> interrupted{false};
  std::thread([] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int signo = 0;
    sigwait(&set, &signo);
    interrupted = true;
    ctx->TryCancel();
  }).detach();

  v1::WatchRequest request;
  for (const std::string& d : deps) request.add_dependencies(d);
  std::unique_ptr<grpc::ClientReader<v1::StateChange>> reader =
      stub->Watch(ctx, request);
  const bool json = absl::GetFlag(FLAGS_json);
  v1::StateChange change;
  while (reader->Read(&change)) {
    if (json) {
      absl::StatusOr<std::string> line = ChangeToJson(change, absl::Now());
      if (!line.ok()) {
        std::cerr << "breakerctl: " << line.status().message() << "\n";
        continue;
      }
      std::cout << *line << std::endl;
    } else {
      std::cout << FormatChange(change, absl::Now()) << std::endl;
    }
  }
  grpc::Status status = reader->Finish();
  if (status.error_code() == grpc::StatusCode::CANCELLED && interrupted) {
    return kExitOk;  // Ctrl-C
  }
  if (!status.ok()) return RpcError(status);
  return kExitOk;
}

absl::StatusOr<std::string> ReadToken() {
  const std::string token = absl::GetFlag(FLAGS_token);
  const std::string file = absl::GetFlag(FLAGS_token_file);
  if (!token.empty() && !file.empty()) {
    return absl::InvalidArgumentError("give --token or --token-file, not both");
  }
  // The same rules as breakerd's --admin-token-file.
  if (!file.empty()) return ReadSecretFile(file, "--token-file");
  return token;  // may be empty: the server answers UNAUTHENTICATED
}

int Admin(v1::Admin::Stub* stub, const std::string& command,
          const std::string& dependency, const std::string& token) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  v1::AdminResponse response;
  grpc::Status status;
  if (command == "force-open") {
    v1::ForceOpenRequest request;
    request.set_dependency(dependency);
    status = stub->ForceOpen(&ctx, request, &response);
  } else if (command == "force-close") {
    v1::ForceCloseRequest request;
    request.set_dependency(dependency);
    status = stub->ForceClose(&ctx, request, &response);
  } else {
    v1::ResetRequest request;
    request.set_dependency(dependency);
    status = stub->Reset(&ctx, request, &response);
  }
  if (!status.ok()) return RpcError(status);
  if (command == "force-open" && response.status().mode() == "shadow") {
    std::cerr << "breakerctl: note: " << dependency
              << " is in shadow mode: the override is recorded but every call "
                 "is still allowed (switch its policy to mode: enforce to "
                 "refuse calls)\n";
  }
  return Print(response.status(), FormatStatus);
}

// An argument for an error message: escaped (it may hold control bytes),
// and cut short if long.
std::string QuoteArgument(absl::string_view arg) {
  constexpr size_t kMaxShown = 32;
  return absl::StrCat("\"", absl::CHexEscape(arg.substr(0, kMaxShown)),
                      arg.size() > kMaxShown ? "\"..." : "\"");
}

// hash-label: "NAME<TAB>LABEL" for each valid name, in order; an error
// naming each name breakerd would refuse (it has no breaker, hence no
// label) by its position. kExitUsage if any was refused.
int RunHashLabel(const std::vector<std::string>& names) {
  int exit_code = kExitOk;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    const std::string argument =
        absl::StrCat("hash-label: argument ", i + 1, " ", QuoteArgument(name));
    if (absl::Status s = ValidateDependency(name, argument); !s.ok()) {
      std::cout.flush();  // keep the lines in order on a shared terminal
      exit_code = UsageError(s.message());
      continue;
    }
    std::cout << name << "\t" << HashedDependencyLabel(name) << "\n";
  }
  return exit_code;
}

int Run(int argc, char** argv) {
  absl::StatusOr<Args> parsed = ParseArgs(argc, argv);
  if (!parsed.ok()) return UsageError(parsed.status().message());
  if (parsed->help) {
    PrintHelp(std::cout);
    return kExitOk;
  }
  const std::vector<std::string>& pos = parsed->positional;
  if (pos.empty()) return UsageError("no command given (see --help)");
  const std::string& command = pos[0];
  const std::vector<std::string> rest(pos.begin() + 1, pos.end());

  if (absl::GetFlag(FLAGS_timeout) <= absl::ZeroDuration()) {
    return UsageError("--timeout must be > 0");
  }
  auto want_args = [&](size_t n) -> bool { return rest.size() == n; };

  if (command == "hash-label") {
    if (rest.empty()) return UsageError("hash-label needs at least one NAME");
    return RunHashLabel(rest);
  }

  if (command == "simulate") {
    if (!rest.empty()) return UsageError("simulate takes flags only");
    if (absl::GetFlag(FLAGS_config).empty() ||
        absl::GetFlag(FLAGS_trace).empty()) {
      return UsageError("simulate needs --config and --trace");
    }
    return RunSimulate(absl::GetFlag(FLAGS_config), absl::GetFlag(FLAGS_trace),
                       absl::GetFlag(FLAGS_json), std::cout, std::cerr);
  }

  const bool is_admin =
      command == "force-open" || command == "force-close" || command == "reset";
  if (command == "list") {
    if (!want_args(0)) return UsageError("list takes no arguments");
  } else if (command == "get" || is_admin) {
    if (!want_args(1)) {
      return UsageError(absl::StrCat(command, " needs exactly one DEP"));
    }
  } else if (command != "watch") {
    return UsageError(
        absl::StrCat("unknown command \"", command, "\" (see --help)"));
  }
  std::string token;
  if (is_admin) {
    absl::StatusOr<std::string> t = ReadToken();
    if (!t.ok()) return UsageError(t.status().message());
    token = *std::move(t);
  }

  if (command == "watch") {
    // Before gRPC starts threads: only Watch's signal thread takes these.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials());
  if (is_admin) {
    auto stub = v1::Admin::NewStub(channel);
    return Admin(stub.get(), command, rest[0], token);
  }
  auto stub = v1::Breaker::NewStub(channel);
  if (command == "list") return List(stub.get());
  if (command == "get") return Get(stub.get(), rest[0]);
  return Watch(stub.get(), rest);
}

}  // namespace
}  // namespace breakerd::ctl

int main(int argc, char** argv) { return breakerd::ctl::Run(argc, argv); }
