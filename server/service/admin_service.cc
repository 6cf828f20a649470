#include "server/service/admin_service.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/service/convert.h"
#include "server/service/unary_call.h"

namespace breakerd {
namespace {

constexpr absl::string_view kBearerPrefix = "Bearer ";

// True if `given` equals `expected`. The running time depends only on
// expected.size(), not on the contents or on where the two differ, so the
// token cannot be guessed byte by byte from response times.
bool ConstantTimeEquals(absl::string_view given, absl::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g =
        i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

grpc::Status Unauthenticated(const char* message) {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, message);
}

std::string ExpectedAuthorization(const std::optional<std::string>& token) {
  if (!token.has_value() || token->empty()) return std::string();
  std::string out(kBearerPrefix);
  out += *token;
  return out;
}

}  // namespace

AdminServiceImpl::AdminServiceImpl(Registry* registry,
                                   std::optional<std::string> token,
                                   RpcStats* rpc_stats, CallTracker* tracker)
    : registry_(registry),
      rpc_stats_(rpc_stats),
      tracker_(tracker),
      expected_authorization_(ExpectedAuthorization(token)) {}

void AdminServiceImpl::SetToken(const std::optional<std::string>& token) {
  std::string expected = ExpectedAuthorization(token);
  WriterMutexLock lock(&mu_);
  expected_authorization_.swap(expected);
}

template <typename Op>
grpc::ServerUnaryReactor* AdminServiceImpl::Run(
    UnaryCall& call, const grpc::CallbackServerContext& context,
    v1::AdminResponse* response, Op&& op) {
  if (grpc::Status auth = Authorize(context); !auth.ok()) {
    return call.Finish(auth);
  }
  absl::StatusOr<BreakerSnapshot> snapshot = op();
  if (snapshot.ok()) {
    if (after_override_) after_override_();
    FillBreakerStatus(*snapshot, response->mutable_status());
  }
  return call.Finish(ToGrpcStatus(snapshot.status()));
}

grpc::Status AdminServiceImpl::Authorize(
    const grpc::CallbackServerContext& context) {
  absl::string_view reason;
  grpc::Status status = CheckAuthorization(context, &reason);
  if (!status.ok()) {
    auth_failures_.fetch_add(1, std::memory_order_relaxed);
    if (on_auth_failure_) on_auth_failure_(reason);
  }
  return status;
}

grpc::Status AdminServiceImpl::CheckAuthorization(
    const grpc::CallbackServerContext& context,
    absl::string_view* reason) const {
  ReaderMutexLock lock(&mu_);
  if (expected_authorization_.empty()) {
    *reason = "disabled";
    return Unauthenticated(
        "admin: disabled; start breakerd with --admin-token-file");
  }
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    *reason = "missing";
    return Unauthenticated(
        "admin: missing authorization metadata (send \"authorization: "
        "Bearer <token>\")");
  }
  const absl::string_view given(it->second.data(), it->second.length());
  if (!ConstantTimeEquals(given, expected_authorization_)) {
    // Same answer for malformed and wrong, so the message reveals nothing.
    *reason = "invalid";
    return Unauthenticated(
        "admin: invalid authorization (want \"Bearer <token>\" with the "
        "configured admin token)");
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* AdminServiceImpl::ForceOpen(
    grpc::CallbackServerContext* context, const v1::ForceOpenRequest* request,
    v1::AdminResponse* response) {
  UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kForceOpen);
  return Run(call, *context, response,
             [&] { return registry_->ForceOpen(request->dependency()); });
}

grpc::ServerUnaryReactor* AdminServiceImpl::ForceClose(
    grpc::CallbackServerContext* context, const v1::ForceCloseRequest* request,
    v1::AdminResponse* response) {
  UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kForceClose);
  return Run(call, *context, response,
             [&] { return registry_->ForceClose(request->dependency()); });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Reset(
    grpc::CallbackServerContext* context, const v1::ResetRequest* request,
    v1::AdminResponse* response) {
  UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kReset);
  return Run(call, *context, response,
             [&] { return registry_->Reset(request->dependency()); });
}

}  // namespace breakerd
