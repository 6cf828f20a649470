#include "tools/breakerctl/format.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"

namespace breakerd::ctl {
namespace {

namespace v1 = ::breakerd::v1;

absl::Duration ToAbsl(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

}  // namespace

std::string StateName(v1::State state) {
  switch (state) {
    case v1::STATE_CLOSED:
      return "closed";
    case v1::STATE_OPEN:
      return "open";
    case v1::STATE_HALF_OPEN:
      return "half_open";
    case v1::STATE_FORCED_OPEN:
      return "forced_open";
    case v1::STATE_FORCED_CLOSED:
      return "forced_closed";
    default:
      return "unspecified";
  }
}

std::string FormatProtoDuration(const google::protobuf::Duration& duration) {
  return absl::FormatDuration(
      absl::Trunc(ToAbsl(duration), absl::Milliseconds(1)));
}

std::string FormatTable(const v1::ListStatesResponse& response) {
  std::vector<const v1::BreakerStatus*> sorted;
  for (const v1::BreakerStatus& b : response.breakers()) sorted.push_back(&b);
  std::sort(sorted.begin(), sorted.end(),
            [](const v1::BreakerStatus* a, const v1::BreakerStatus* b) {
              return a->dependency() < b->dependency();
            });
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"DEPENDENCY", "STATE", "GEN", "RETRY_AFTER", "CALLS",
                  "FAILURES", "RATE", "CONSEC", "ESCALATION", "POLICY",
                  "MODE"});
  for (const v1::BreakerStatus* b : sorted) {
    rows.push_back(
        {b->dependency(), StateName(b->state()), absl::StrCat(b->generation()),
         FormatProtoDuration(b->retry_after()), absl::StrCat(b->window_calls()),
         absl::StrCat(b->window_failures()),
         absl::StrFormat("%.2f", b->failure_rate()),
         absl::StrCat(b->consecutive_failures()),
         absl::StrCat(b->escalation_level()), b->policy(), b->mode()});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string FormatStatus(const v1::BreakerStatus& s) {
  return absl::StrCat(
      "dependency: ", s.dependency(), "\n",   //
      "state: ", StateName(s.state()), "\n",  //
      "generation: ", s.generation(), "\n",   //
      "retry_after: ", FormatProtoDuration(s.retry_after()), "\n",
      "window_calls: ", s.window_calls(), "\n",  //
      "window_failures: ", s.window_failures(), "\n",
      "window_slow_calls: ", s.window_slow_calls(), "\n",
      "failure_rate: ", absl::StrFormat("%.4f", s.failure_rate()), "\n",
      "consecutive_failures: ", s.consecutive_failures(), "\n",
      "escalation_level: ", s.escalation_level(), "\n",  //
      "policy: ", s.policy(), "\n",                      //
      "mode: ", s.mode(), "\n",                          //
      "probe_in_flight: ", s.probe_in_flight() ? "true" : "false", "\n",
      "admit_share: ", absl::StrFormat("%.4f", s.admit_share()), "\n",
      "inflight: ", s.inflight(), "\n",  //
      "fleet_window_calls: ", s.fleet_window_calls(), "\n",
      "fleet_window_failures: ", s.fleet_window_failures(), "\n");
}

namespace {

// RFC 3339 in UTC, to the millisecond.
std::string Timestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

}  // namespace

std::string FormatChange(const v1::StateChange& change,
                         absl::Time received_at) {
  return absl::StrCat(
      Timestamp(received_at), " ", change.dependency(), " ",
      // An initial state has no previous one (STATE_UNSPECIFIED on the
      // wire).
      change.previous() == v1::STATE_UNSPECIFIED ? "none"
                                                 : StateName(change.previous()),
      " -> ", StateName(change.state()), " reason=", change.reason(),
      " gen=", change.generation(),
      " retry_after=", FormatProtoDuration(change.retry_after()),
      " mode=", change.mode().empty() ? "enforce" : change.mode());
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  // always_print_primitive_fields leaves unset message fields out: give
  // them their zero value, so "every field is printed" holds for them too.
  std::unique_ptr<google::protobuf::Message> copy(message.New());
  copy->CopyFrom(message);
  const google::protobuf::Descriptor* descriptor = copy->GetDescriptor();
  const google::protobuf::Reflection* reflection = copy->GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->cpp_type() ==
            google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE &&
        !field->is_repeated() && !reflection->HasField(*copy, field)) {
      reflection->MutableMessage(copy.get(), field);
    }
  }
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = false;
  std::string out;
  auto status =
      google::protobuf::util::MessageToJsonString(*copy, &out, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  return out;
}

absl::StatusOr<std::string> ChangeToJson(const v1::StateChange& change,
                                         absl::Time received_at) {
  absl::StatusOr<std::string> json = ToJson(change);
  if (!json.ok()) return json;
  // ToJson's object starts with '{'.
  return absl::StrCat("{\"received_at\":\"", Timestamp(received_at), "\"",
                      json->size() > 2 ? "," : "", json->substr(1));
}

std::string StatusCodeName(grpc::StatusCode code) {
  // gRPC and absl share the canonical code numbering and names.
  const int n = static_cast<int>(code);
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(n));
  return name.empty() ? absl::StrCat("CODE_", n) : name;
}

}  // namespace breakerd::ctl
