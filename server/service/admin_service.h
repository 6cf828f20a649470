// The breakerd.v1.Admin service: operator overrides (ForceOpen, ForceClose,
// Reset). Every call must carry `authorization: Bearer <token>` metadata
// matching the configured token, compared in constant time; without a
// configured token every call is refused. The token is never logged or put
// in a status message.
//
// Thread-safety: thread-safe; gRPC calls the handlers concurrently.
#ifndef BREAKERD_SERVER_SERVICE_ADMIN_SERVICE_H_
#define BREAKERD_SERVER_SERVICE_ADMIN_SERVICE_H_

#include <optional>
#include <string>

#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "server/engine/registry.h"
#include "server/service/rpc_stats.h"

namespace breakerd {

class AdminServiceImpl final : public v1::Admin::CallbackService {
 public:
  // REQUIRES: `registry` is non-null and outlives the service. `token`:
  // the admin token; nullopt (or an empty token) disables admin.
  // `rpc_stats` (may be null; must outlive the service) counts handled calls
  // and their handling time.
  AdminServiceImpl(Registry* registry, std::optional<std::string> token,
                   RpcStats* rpc_stats = nullptr);

  AdminServiceImpl(const AdminServiceImpl&) = delete;
  AdminServiceImpl& operator=(const AdminServiceImpl&) = delete;

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
  // OK if the call carries the right bearer token, else UNAUTHENTICATED.
  grpc::Status Authorize(const grpc::CallbackServerContext& context) const;

  // Constant after construction.
  Registry* const registry_;
  // "Bearer <token>", or empty when admin is disabled.
  const std::string expected_authorization_;
  RpcStats* const rpc_stats_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_ADMIN_SERVICE_H_
