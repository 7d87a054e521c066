#include "api/health_service.h"

#include <optional>
#include <string>

namespace ad::api {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

HealthService::HealthService(size_t max_watches, std::chrono::milliseconds cancel_check)
    : max_watches_(max_watches), cancel_check_(cancel_check) {}

void HealthService::SetServing(const std::string& service, bool serving) {
  {
    std::lock_guard lock(mutex_);
    serving_[service] = serving;
  }
  changed_.notify_all();
}

void HealthService::Shutdown() {
  {
    std::lock_guard lock(mutex_);
    shut_down_ = true;
  }
  changed_.notify_all();
}

HealthService::Status HealthService::StatusOf(const std::string& service) const {
  const auto it = serving_.find(service);
  if (it == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second && !shut_down_ ? HealthCheckResponse::SERVING
                                   : HealthCheckResponse::NOT_SERVING;
}

grpc::Status HealthService::Check(grpc::ServerContext*, const HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  std::lock_guard lock(mutex_);
  const Status status = StatusOf(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service: " + request->service());
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context, const HealthCheckRequest* request,
                                  grpc::ServerWriter<HealthCheckResponse>* writer) {
  std::unique_lock lock(mutex_);
  if (watches_ >= max_watches_) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "too many health Watch streams (at most " + std::to_string(max_watches_) + ")");
  }
  ++watches_;
  struct Release {
    size_t& watches;
    ~Release() { --watches; }  // runs with mutex_ held (the lock is released after it)
  } release{watches_};
  std::optional<Status> sent;
  for (;;) {
    const Status status = StatusOf(request->service());
    if (!sent || *sent != status) {
      HealthCheckResponse response;
      response.set_status(status);
      lock.unlock();
      const bool written = writer->Write(response);
      lock.lock();
      if (!written) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      sent = status;
      // The lock was released for the write: a Shutdown (or a change) meanwhile is sent before
      // the stream may end, so look again before testing shut_down_.
      continue;
    }
    if (shut_down_) return grpc::Status::OK;
    changed_.wait_for(lock, cancel_check_);
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }
}

}  // namespace ad::api
