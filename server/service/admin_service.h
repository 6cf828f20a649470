// The breakerd.v1.Admin service: operator overrides (ForceOpen, ForceClose,
// Reset). Every call must carry `authorization: Bearer <token>` metadata
// matching the configured token, compared in constant time; without a
// configured token every call is refused. The token is never logged or put
// in a status message.
//
// Thread-safety: thread-safe; gRPC calls the handlers concurrently.
#ifndef BREAKERD_SERVER_SERVICE_ADMIN_SERVICE_H_
#define BREAKERD_SERVER_SERVICE_ADMIN_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "server/engine/mutex.h"
#include "server/engine/registry.h"
#include "server/service/call_tracker.h"
#include "server/service/rpc_stats.h"
#include "server/service/unary_call.h"

namespace breakerd {

class AdminServiceImpl final : public v1::Admin::CallbackService {
 public:
  // REQUIRES: `registry` is non-null and outlives the service. `token`:
  // the admin token; nullopt (or an empty token) disables admin.
  // `rpc_stats` (may be null; must outlive the service) counts handled calls
  // and their handling time; `tracker` (may be null; must outlive the
  // service) counts the calls in flight, so shutdown drains them.
  AdminServiceImpl(Registry* registry, std::optional<std::string> token,
                   RpcStats* rpc_stats = nullptr,
                   CallTracker* tracker = nullptr);

  AdminServiceImpl(const AdminServiceImpl&) = delete;
  AdminServiceImpl& operator=(const AdminServiceImpl&) = delete;

  // Replaces the token (a rotated Secret); nullopt or empty disables admin.
  // Calls already authorized are not affected.
  void SetToken(const std::optional<std::string>& token)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Called on every call refused as UNAUTHENTICATED, with a short reason
  // ("disabled", "missing", "invalid"; never what was sent), after
  // auth_failures() counted it. REQUIRES: set before serving; thread-safe;
  // cheap (it runs on the handler's thread).
  void SetOnAuthFailure(std::function<void(absl::string_view reason)> hook) {
    on_auth_failure_ = std::move(hook);
  }

  // Calls refused as UNAUTHENTICATED since construction.
  uint64_t auth_failures() const {
    return auth_failures_.load(std::memory_order_relaxed);
  }

  // Called after every override that succeeded, before the response is
  // sent (the --state-file is written there). REQUIRES: set before serving;
  // thread-safe; never calls this service.
  void SetAfterOverride(std::function<void()> hook) {
    after_override_ = std::move(hook);
  }

  // Each returns OK with the breaker's status after the change;
  // UNAUTHENTICATED (admin disabled, metadata missing or malformed, wrong
  // token) before anything else is looked at; INVALID_ARGUMENT for a bad
  // name; RESOURCE_EXHAUSTED at max_breakers (ForceOpen, ForceClose);
  // NOT_FOUND for an unknown name (Reset).
  grpc::ServerUnaryReactor* ForceOpen(grpc::CallbackServerContext* context,
                                      const v1::ForceOpenRequest* request,
                                      v1::AdminResponse* response) override;
  grpc::ServerUnaryReactor* ForceClose(grpc::CallbackServerContext* context,
                                       const v1::ForceCloseRequest* request,
                                       v1::AdminResponse* response) override;
  grpc::ServerUnaryReactor* Reset(grpc::CallbackServerContext* context,
                                  const v1::ResetRequest* request,
                                  v1::AdminResponse* response) override;

 private:
  // OK if the call carries the right bearer token, else UNAUTHENTICATED
  // (counted and reported to the hook).
  grpc::Status Authorize(const grpc::CallbackServerContext& context)
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status CheckAuthorization(const grpc::CallbackServerContext& context,
                                  absl::string_view* reason) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Runs one override: authorize, call `op`, run the hook on success, fill
  // the response.
  template <typename Op>
  grpc::ServerUnaryReactor* Run(UnaryCall& call,
                                const grpc::CallbackServerContext& context,
                                v1::AdminResponse* response, Op&& op);

  // Constant after construction (after_override_: set before serving).
  Registry* const registry_;
  RpcStats* const rpc_stats_;
  CallTracker* const tracker_;
  std::function<void()> after_override_;
  std::function<void(absl::string_view)> on_auth_failure_;

  std::atomic<uint64_t> auth_failures_{0};

  mutable SharedMutex mu_;
  // "Bearer <token>", or empty when admin is disabled.
  std::string expected_authorization_ ABSL_GUARDED_BY(mu_);
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_ADMIN_SERVICE_H_
