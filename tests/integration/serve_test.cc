// `ambient-doctor serve` end to end on the lab: the real binary scans on its interval, serves
// /metrics and /healthz with the lab's state, logs each finding once (not once per scan), and
// stops cleanly on SIGTERM.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "ambientdoctor/v1/ambient_doctor.grpc.pb.h"
#include "child_process_util.h"
#include "lab/lab.h"
#include "scoped_child.h"
#include "sources/ztunnel/http_get.h"

namespace ad {
namespace {

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

TEST(Serve, MetricsHealthLogsAndCleanStop) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  lab::LabOptions options;
  options.prefix = "adsv" + std::to_string(::getpid() % 100000);
  options.pods = 3;
  options.zds = true;
  options.faults = {{lab::FaultKind::kZtunnelNoListeners, 1}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;

  testing::ScopedTempDir dir("adt-serve");
  const std::string log = dir.path() + "/serve.log";
  const std::string api_socket = dir.path() + "/api/api.sock";
  testing::ScopedChild serve(
      {kDoctor, "serve", "--lab-prefix", options.prefix, "--interval", "200ms", "--metrics-address",
       "127.0.0.1:0", "--api-socket", api_socket},
      "", log, /*with_stderr=*/true);
  // The endpoint's port is in the log ("metrics on 127.0.0.1:PORT").
  const std::regex bound("metrics on 127\\.0\\.0\\.1:([0-9]+)");
  std::smatch match;
  std::string text;
  // Up to 20 s: the first scan of a lab under a parallel test run (ctest -j2) can take seconds,
  // and /healthz is 503 until it has published ("no successful scan yet").
  for (int i = 0; i < 1000; ++i) {
    text = ReadAll(log);
    if (std::regex_search(text, match, bound) && text.find("finding opened") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(std::regex_search(text, match, bound)) << text;
  ASSERT_NE(text.find("finding opened"), std::string::npos) << "no first scan published: " << text;
  const uint16_t port = static_cast<uint16_t>(std::stoi(match[1].str()));

  // The log line comes just before the step is published to the outputs: give the metrics feed
  // a moment to take it.
  auto health = ztunnel::HttpGet({"", "127.0.0.1", port, "/healthz"});
  for (int i = 0; i < 250 && health.ok() && health->status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    health = ztunnel::HttpGet({"", "127.0.0.1", port, "/healthz"});
  }
  ASSERT_TRUE(health.ok()) << health.error().message;
  EXPECT_EQ(health->status, 200) << health->body;
  auto metrics = ztunnel::HttpGet({"", "127.0.0.1", port, "/metrics"});
  ASSERT_TRUE(metrics.ok()) << metrics.error().message;
  EXPECT_EQ(metrics->status, 200);
  const std::string& body = metrics->body;
  EXPECT_NE(body.find("ambient_doctor_pods{redirect_state=\"listeners_missing\"} 1"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("ambient_doctor_pods{redirect_state=\"healthy\"} 2"), std::string::npos);
  EXPECT_NE(body.find("ambient_doctor_findings{code=\"ZTUNNEL_LISTENERS_MISSING\",severity="
                      "\"critical\"} 1"),
            std::string::npos);

  // The gRPC API answers from the same published result.
  auto channel = grpc::CreateChannel("unix:" + api_socket, grpc::InsecureChannelCredentials());
  auto stub = ambientdoctor::v1::AmbientDoctor::NewStub(channel);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ambientdoctor::v1::Report report;
    const grpc::Status status =
        stub->GetReport(&context, ambientdoctor::v1::GetReportRequest{}, &report);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(report.findings_size(), 1) << report.DebugString();
    EXPECT_EQ(report.findings(0).code(), "ZTUNNEL_LISTENERS_MISSING");
    EXPECT_TRUE(report.findings(0).has_first_seen_unix_ms()) << "the daemon's history";
  }
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ambientdoctor::v1::GetNetnsRulesRequest request;
    request.set_path(lab.node().pods.at(1).netns_path);
    ambientdoctor::v1::NetnsRules rules;
    const grpc::Status status = stub->GetNetnsRules(&context, request, &rules);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_NE(rules.DebugString().find("ISTIO_OUTPUT"), std::string::npos);
  }

  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // a few more scans
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(std::chrono::seconds(20)), 0) << "a clean exit on SIGTERM";
  text = ReadAll(log);
  EXPECT_EQ(Count(text, "finding opened ZTUNNEL_LISTENERS_MISSING"), 1u)
      << "one line per change, never one per scan:\n"
      << text;
  EXPECT_NE(text.find("stopped after"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(api_socket)) << "the socket is removed on exit";
}

}  // namespace
}  // namespace ad
