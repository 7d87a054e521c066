// cri-sim, the lab's CRI runtime: the server alone against the agent's own CRI client, then end to
// end (lab with ZDS -> `ambient-doctor report` names every meshed pod through cri-sim).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "child_process_util.h"
#include "cri_sim/cri_server.h"
#include "lab/emulators.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "model/json_reader.h"
#include "sources/cri/cri_client.h"
#include "sources/cri/sandbox_info.h"

namespace ad {
namespace {

namespace fs = std::filesystem;

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path + ".tmp", std::ios::trunc) << text;
  fs::rename(path + ".tmp", path);
}

struct SimFixture {
  testing::ScopedTempDir dir;
  sim::CriSimOptions options;
  std::unique_ptr<sim::CriSimServer> server;

  explicit SimFixture(const std::string& pods_text, const std::string& ips_text = "") {
    options.socket_path = dir.path() + "/cri.sock";
    options.pods_file = dir.path() + "/pods.txt";
    options.ips_file = dir.path() + "/ips.txt";
    options.log_to_stderr = false;
    WriteFile(options.pods_file, pods_text);
    if (!ips_text.empty()) WriteFile(options.ips_file, ips_text);
    Result<std::unique_ptr<sim::CriSimServer>> started = sim::CriSimServer::Start(options);
    if (started.ok()) server = std::move(started).value();
  }
};

TEST(CriSimServerTest, ServesPodsFileToTheAgentsClient) {
  SimFixture sim(
      "# uid name namespace sa netns\n"
      "uid-a pod-a ns1 default /run/netns/a\n"
      "uid-b pod-b ns2 default /run/netns/b\n",
      "uid-a 10.0.0.1 fd00::1\n");
  ASSERT_NE(sim.server, nullptr);
  Result<cri::CriClient> client =
      cri::CriClient::Connect({.endpoints = {"unix://" + sim.options.socket_path}});
  ASSERT_TRUE(client.ok()) << client.error().message;
  EXPECT_EQ(client->version().runtime_name(), "cri-sim");
  EXPECT_EQ(client->version().runtime_api_version(), "v1");

  auto sandboxes = client->ListPodSandbox(true);
  ASSERT_TRUE(sandboxes.ok()) << sandboxes.error().message;
  ASSERT_EQ(sandboxes->size(), 2u);
  EXPECT_EQ((*sandboxes)[0].metadata().name(), "pod-a");
  EXPECT_EQ((*sandboxes)[0].metadata().namespace_(), "ns1");
  EXPECT_EQ((*sandboxes)[0].metadata().uid(), "uid-a");
  EXPECT_EQ((*sandboxes)[0].state(), runtime::v1::SANDBOX_READY);

  auto status = client->PodSandboxStatus((*sandboxes)[0].id(), true);
  ASSERT_TRUE(status.ok()) << status.error().message;
  EXPECT_EQ(status->status().metadata().name(), "pod-a");
  EXPECT_EQ(status->status().metadata().uid(), "uid-a");
  EXPECT_EQ(status->status().metadata().namespace_(), "ns1");
  EXPECT_EQ(status->status().network().ip(), "10.0.0.1");
  ASSERT_EQ(status->status().network().additional_ips_size(), 1);
  EXPECT_EQ(status->status().network().additional_ips(0).ip(), "fd00::1");
  EXPECT_EQ(status->status().linux().namespaces().options().network(), runtime::v1::POD);
  ASSERT_EQ(status->info().count("info"), 1u);
  Result<cri::SandboxInfo> info = cri::ParseSandboxInfo(status->info().at("info"));
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->netns_path, "/run/netns/a");
  EXPECT_EQ(info->pid, 0);
  EXPECT_FALSE(info->netns_closed);

  // No IP line: the network status stays empty. Not verbose: no info map.
  auto other = client->PodSandboxStatus((*sandboxes)[1].id(), false);
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_TRUE(other->status().network().ip().empty());
  EXPECT_TRUE(other->info().empty());

  auto missing = client->PodSandboxStatus("crisim-nope", true);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("NOT_FOUND"), std::string::npos)
      << missing.error().message;
}

TEST(CriSimServerTest, HonoursFiltersAndFollowsThePodsFile) {
  SimFixture sim("uid-a pod-a ns1 default /run/netns/a\n");
  ASSERT_NE(sim.server, nullptr);
  Result<cri::CriClient> client =
      cri::CriClient::Connect({.endpoints = {"unix://" + sim.options.socket_path}});
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto stub = runtime::v1::RuntimeService::NewStub(client->channel());
  auto list = [&](const std::function<void(runtime::v1::PodSandboxFilter&)>& set_filter) {
    runtime::v1::ListPodSandboxRequest request;
    set_filter(*request.mutable_filter());
    runtime::v1::ListPodSandboxResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    EXPECT_TRUE(stub->ListPodSandbox(&context, request, &response).ok());
    return response.items_size();
  };
  EXPECT_EQ(list([](auto&) {}), 1);
  EXPECT_EQ(list([](auto& f) { f.mutable_state()->set_state(runtime::v1::SANDBOX_NOTREADY); }), 0);
  EXPECT_EQ(list([](auto& f) { f.mutable_state()->set_state(runtime::v1::SANDBOX_READY); }), 1);
  EXPECT_EQ(list([](auto& f) { f.set_id("crisim-uid-a"); }), 1);
  EXPECT_EQ(list([](auto& f) { f.set_id("crisim-other"); }), 0);
  EXPECT_EQ(list([](auto& f) { (*f.mutable_label_selector())["io.kubernetes.pod.name"] = "x"; }),
            0);
  EXPECT_EQ(
      list([](auto& f) { (*f.mutable_label_selector())["io.kubernetes.pod.namespace"] = "ns1"; }),
      1);

  // Other RPCs are not served.
  runtime::v1::RunPodSandboxRequest run;
  runtime::v1::RunPodSandboxResponse ran;
  grpc::ClientContext context;
  EXPECT_EQ(stub->RunPodSandbox(&context, run, &ran).error_code(), grpc::StatusCode::UNIMPLEMENTED);

  // The pods file is re-read per request.
  WriteFile(sim.options.pods_file,
            "uid-a pod-a ns1 default /run/netns/a\nuid-c pod-c ns1 default /run/netns/c\n");
  auto sandboxes = client->ListPodSandbox(true);
  ASSERT_TRUE(sandboxes.ok());
  EXPECT_EQ(sandboxes->size(), 2u);
  fs::remove(sim.options.pods_file);
  EXPECT_FALSE(client->ListPodSandbox(true).ok());

  // Stopping removes the socket.
  sim.server->Shutdown();
  EXPECT_FALSE(fs::exists(sim.options.socket_path));
}

class CriSimLabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

TEST_F(CriSimLabTest, ReportNamesEveryMeshedPodThroughCriSim) {
  lab::LabOptions options;
  options.prefix = "adc" + std::to_string(::getpid() % 100000);
  options.pods = 3;
  options.plain_pods = 1;
  options.zds = true;
  std::string cri_socket;
  int cri_pid = 0;
  {
    lab::ScopedLab lab(options);
    ASSERT_TRUE(lab.ok()) << lab.error().message;
    const lab::LabNode& node = lab.node();
    cri_socket = node.zds.cri_socket_path;
    cri_pid = node.zds.cri_sim_pid;
    EXPECT_EQ(cri_socket, "/run/ambient-lab/" + options.prefix + "/cri.sock");
    ASSERT_GT(cri_pid, 0);
    EXPECT_TRUE(lab::DaemonRunning(cri_pid, "cri-sim"));
    bool listed = false;
    for (const lab::LabEmulator& emulator : lab::LabEmulators(options.prefix)) {
      listed = listed || (emulator.name == "cri-sim" && emulator.running);
    }
    EXPECT_TRUE(listed);

    auto out = lab::RunCommand(
        {{kDoctor, "report", "--lab-prefix", options.prefix, "-o", "json"}, "", ""});
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out->exit_code, 0) << out->err;
    rapidjson::Document root;
    const JsonStatus read = ParseJsonDocument(out->out, root);
    ASSERT_TRUE(read.ok()) << read.error << "\n" << out->out << out->err;

    const rapidjson::Value* findings = JsonMember(root, "findings");
    ASSERT_NE(findings, nullptr);
    EXPECT_TRUE(findings->IsArray() && findings->Empty()) << out->out;

    const rapidjson::Value* node_json = JsonMember(root, "node");
    const rapidjson::Value* cri = node_json ? JsonMember(*node_json, "cri") : nullptr;
    ASSERT_NE(cri, nullptr) << out->out;
    const rapidjson::Value* available = JsonMember(*cri, "available");
    EXPECT_TRUE(available && available->IsBool() && available->GetBool()) << out->out;
    EXPECT_EQ(JsonStringMember(*cri, "endpoint"), "unix://" + cri_socket);
    EXPECT_NE(JsonStringMember(*cri, "runtime").find("cri-sim"), std::string::npos);
    const rapidjson::Value* pods = JsonMember(*cri, "pods");
    ASSERT_NE(pods, nullptr);
    EXPECT_EQ(pods->IsNumber() ? pods->GetDouble() : -1, 3);
    const rapidjson::Value* errors = JsonMember(*cri, "errors");
    ASSERT_NE(errors, nullptr);
    EXPECT_TRUE(errors->IsArray() && errors->Empty()) << out->out;

    const rapidjson::Value* netns = JsonMember(root, "netns");
    ASSERT_NE(netns, nullptr);
    ASSERT_TRUE(netns->IsArray());
    for (const lab::LabPod& pod : node.pods) {
      if (!pod.meshed) continue;
      bool found = false;
      for (const rapidjson::Value& entry : netns->GetArray()) {
        if (JsonStringMember(entry, "path") != pod.netns_path) continue;
        found = true;
        EXPECT_EQ(JsonStringMember(entry, "pod"), "lab/" + pod.netns_name) << pod.netns_path;
        EXPECT_EQ(JsonStringMember(entry, "pod_uid"), pod.pod_uid) << pod.netns_path;
      }
      EXPECT_TRUE(found) << pod.netns_path << " missing from\n" << out->out;
    }
  }
  // ScopedLab's LabDown stopped cri-sim and removed its socket.
  EXPECT_FALSE(lab::DaemonRunning(cri_pid, "cri-sim"));
  EXPECT_FALSE(fs::exists(cri_socket));
}

}  // namespace
}  // namespace ad
