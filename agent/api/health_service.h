// grpc.health.v1 served synchronously. gRPC's default health service is a callback service: its
// completion queue keeps two "nexting" threads that woke about twice a second each on an idle
// daemon (with them, 0.6 of its 4 millicores, paired). Here Check answers from a map and Watch
// waits on a condition variable, so an idle server with no Watch open costs nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"

namespace ad::api {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  // At most `max_watches` Watch streams at once (each holds a server thread); more get
  // RESOURCE_EXHAUSTED. A Watch notices its client's cancel within `cancel_check`.
  explicit HealthService(size_t max_watches = 8,
                         std::chrono::milliseconds cancel_check = std::chrono::seconds(1));

  // "" is the server as a whole; any other name is a service.
  void SetServing(const std::string& service, bool serving);
  // Every status NOT_SERVING from now on; open Watch streams send it and end.
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;
  Status StatusOf(const std::string& service) const;  // with mutex_ held

  const size_t max_watches_;
  const std::chrono::milliseconds cancel_check_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, bool> serving_;
  bool shut_down_ = false;
  size_t watches_ = 0;
};

}  // namespace ad::api
