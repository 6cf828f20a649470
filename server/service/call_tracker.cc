#include "server/service/call_tracker.h"

namespace breakerd {

// gRPC creates one interceptor per call and destroys it when the call is
// done, so its lifetime is exactly the call's.
class CallTracker::Interceptor final : public grpc::experimental::Interceptor {
 public:
  explicit Interceptor(CallTracker* tracker) : tracker_(tracker) {
    tracker_->started_.fetch_add(1, std::memory_order_relaxed);
    tracker_->active_.fetch_add(1, std::memory_order_acq_rel);
  }
  ~Interceptor() override {
    tracker_->active_.fetch_sub(1, std::memory_order_acq_rel);
  }
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  CallTracker* const tracker_;
};

class CallTracker::Factory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(CallTracker* tracker) : tracker_(tracker) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new Interceptor(tracker_);
  }

 private:
  CallTracker* const tracker_;
};

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
CallTracker::MakeInterceptorFactory() {
  return std::make_unique<Factory>(this);
}

}  // namespace breakerd
