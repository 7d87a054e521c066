// Our synchronous grpc.health.v1 over a real gRPC server and channel: Check answers SERVING,
// NOT_SERVING and NOT_FOUND; Watch sends the status, every change and NOT_SERVING at shutdown;
// Watch streams past the limit get RESOURCE_EXHAUSTED; a client that cancels frees its slot.
#include "api/health_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace ad::api {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = "unix:/tmp/adt-health-" + std::to_string(::getpid()) + ".sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort(socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = Health::NewStub(grpc::CreateChannel(socket_, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    health_.Shutdown();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    ::unlink(socket_.substr(5).c_str());
  }

  grpc::Status Check(const std::string& service, HealthCheckResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    HealthCheckRequest request;
    request.set_service(service);
    return stub_->Check(&context, request, response);
  }

  HealthService health_{/*max_watches=*/2, std::chrono::milliseconds(50)};
  std::string socket_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST_F(HealthServiceTest, CheckAnswersEachKnownServiceAndRefusesUnknownOnes) {
  health_.SetServing("", true);
  health_.SetServing("ambientdoctor.v1.AmbientDoctor", false);
  HealthCheckResponse response;
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(Check("ambientdoctor.v1.AmbientDoctor", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check("no.Such", &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(HealthServiceTest, WatchSendsEveryChangeAndNotServingAtShutdown) {
  health_.SetServing("", true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  health_.SetServing("", false);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  health_.SetServing("", true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  health_.Shutdown();
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_TRUE(reader->Finish().ok());
}

TEST_F(HealthServiceTest, WatchesPastTheLimitAreRefusedAndACancelFreesASlot) {
  health_.SetServing("", true);
  auto open_watch = [&](grpc::ClientContext& context, HealthCheckResponse* first) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto reader = stub_->Watch(&context, HealthCheckRequest());
    const bool got = reader->Read(first);
    return std::make_pair(std::move(reader), got);
  };
  HealthCheckResponse response;
  grpc::ClientContext first_context;
  grpc::ClientContext second_context;
  auto first = open_watch(first_context, &response);
  auto second = open_watch(second_context, &response);
  ASSERT_TRUE(first.second && second.second);
  {
    grpc::ClientContext third_context;
    auto third = open_watch(third_context, &response);
    EXPECT_FALSE(third.second);
    EXPECT_EQ(third.first->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  first_context.TryCancel();
  (void)first.first->Finish();
  // The server notices the cancel within its check interval and frees the slot.
  bool reopened = false;
  for (int attempt = 0; attempt < 40 && !reopened; ++attempt) {
    grpc::ClientContext retry_context;
    auto retry = open_watch(retry_context, &response);
    reopened = retry.second;
    retry_context.TryCancel();
    (void)retry.first->Finish();
    if (!reopened) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(reopened);
  second_context.TryCancel();
  (void)second.first->Finish();
}

}  // namespace
}  // namespace ad::api
