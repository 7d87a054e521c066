// CriClient and CriNodeSource against an in-process fake CRI runtime on a temp unix socket whose
// behaviour each test controls: normal answers, UNAVAILABLE, calls that never answer (deadlines
// must fire), garbage verbose info and responses beyond the receive limit. No root needed.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "child_process_util.h"
#include "cri/runtime_v1.grpc.pb.h"
#include "scan/cri_node_source.h"
#include "sources/cri/cri_client.h"

namespace ad {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct FakeSandbox {
  std::string id;
  std::string name;
  std::string uid;
  std::string namespace_name;
  runtime::v1::PodSandboxState state = runtime::v1::SANDBOX_READY;
  std::vector<std::string> ips;
  bool host_network = false;
  std::string info_json;  // value of info["info"]; empty = no info entry at all
};

struct FakeBehaviour {
  bool unavailable = false;          // every call answers UNAVAILABLE
  std::string hang_call;             // this method never answers until the client gives up
  bool ignore_state_filter = false;  // return NOTREADY sandboxes too (a sloppy runtime)
  size_t list_padding_bytes = 0;     // pad ListPodSandbox with labels of this total size
  size_t info_padding_bytes = 0;     // pad PodSandboxStatus info with an entry of this size
};

class FakeRuntime final : public runtime::v1::RuntimeService::Service {
 public:
  FakeRuntime(FakeBehaviour behaviour, std::vector<FakeSandbox> sandboxes)
      : behaviour_(std::move(behaviour)), sandboxes_(std::move(sandboxes)) {}

  grpc::Status Version(grpc::ServerContext* context, const runtime::v1::VersionRequest*,
                       runtime::v1::VersionResponse* response) override {
    if (auto early = Misbehave("Version", context)) return *early;
    response->set_version("0.1.0");
    response->set_runtime_name("fakeruntime");
    response->set_runtime_version("9.9.9");
    response->set_runtime_api_version("v1");
    return grpc::Status::OK;
  }

  grpc::Status ListPodSandbox(grpc::ServerContext* context,
                              const runtime::v1::ListPodSandboxRequest* request,
                              runtime::v1::ListPodSandboxResponse* response) override {
    asked_ready_only_ = request->filter().has_state() &&
                        request->filter().state().state() == runtime::v1::SANDBOX_READY;
    if (auto early = Misbehave("ListPodSandbox", context)) return *early;
    for (const FakeSandbox& fake : sandboxes_) {
      if (asked_ready_only_ && !behaviour_.ignore_state_filter &&
          fake.state != runtime::v1::SANDBOX_READY) {
        continue;
      }
      runtime::v1::PodSandbox* item = response->add_items();
      item->set_id(fake.id);
      item->set_state(fake.state);
      item->mutable_metadata()->set_name(fake.name);
      item->mutable_metadata()->set_uid(fake.uid);
      item->mutable_metadata()->set_namespace_(fake.namespace_name);
    }
    if (behaviour_.list_padding_bytes > 0) {
      (*response->add_items()->mutable_labels())["pad"] =
          std::string(behaviour_.list_padding_bytes, 'p');
    }
    return grpc::Status::OK;
  }

  grpc::Status PodSandboxStatus(grpc::ServerContext* context,
                                const runtime::v1::PodSandboxStatusRequest* request,
                                runtime::v1::PodSandboxStatusResponse* response) override {
    ++status_calls_;
    if (!request->verbose()) ++non_verbose_calls_;
    if (auto early = Misbehave("PodSandboxStatus", context)) return *early;
    for (const FakeSandbox& fake : sandboxes_) {
      if (fake.id != request->pod_sandbox_id()) continue;
      runtime::v1::PodSandboxStatus* status = response->mutable_status();
      status->set_id(fake.id);
      status->set_state(fake.state);
      status->mutable_metadata()->set_name(fake.name);
      status->mutable_metadata()->set_uid(fake.uid);
      status->mutable_metadata()->set_namespace_(fake.namespace_name);
      if (!fake.ips.empty()) status->mutable_network()->set_ip(fake.ips.front());
      for (size_t i = 1; i < fake.ips.size(); ++i) {
        status->mutable_network()->add_additional_ips()->set_ip(fake.ips[i]);
      }
      if (fake.host_network) {
        status->mutable_linux()->mutable_namespaces()->mutable_options()->set_network(
            runtime::v1::NODE);
      }
      if (!fake.info_json.empty()) (*response->mutable_info())["info"] = fake.info_json;
      if (behaviour_.info_padding_bytes > 0) {
        (*response->mutable_info())["pad"] = std::string(behaviour_.info_padding_bytes, 'p');
      }
      return grpc::Status::OK;
    }
    return {grpc::StatusCode::NOT_FOUND, "no sandbox " + request->pod_sandbox_id()};
  }

  void Stop() { stopping_ = true; }
  bool asked_ready_only() const { return asked_ready_only_; }
  int status_calls() const { return status_calls_; }
  int non_verbose_calls() const { return non_verbose_calls_; }

 private:
  std::optional<grpc::Status> Misbehave(const std::string& call, grpc::ServerContext* context) {
    if (behaviour_.unavailable) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "runtime is restarting");
    }
    if (behaviour_.hang_call == call) {
      // Never answer: wait until the client's deadline cancels the call (or the server stops).
      while (!context->IsCancelled() && !stopping_) std::this_thread::sleep_for(5ms);
      return grpc::Status(grpc::StatusCode::CANCELLED, "gave up");
    }
    return std::nullopt;
  }

  FakeBehaviour behaviour_;
  std::vector<FakeSandbox> sandboxes_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> asked_ready_only_{false};
  std::atomic<int> status_calls_{0};
  std::atomic<int> non_verbose_calls_{0};
};

// The fake runtime served on <tempdir>/cri.sock for the lifetime of the object.
class FakeRuntimeServer {
 public:
  FakeRuntimeServer(FakeBehaviour behaviour, std::vector<FakeSandbox> sandboxes)
      : service_(std::move(behaviour), std::move(sandboxes)) {
    socket_path_ = dir_.path() + "/cri.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_path_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeRuntimeServer() {
    service_.Stop();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
  }
  FakeRuntimeServer(const FakeRuntimeServer&) = delete;
  FakeRuntimeServer& operator=(const FakeRuntimeServer&) = delete;

  bool ok() const { return server_ != nullptr; }
  std::string endpoint() const { return "unix://" + socket_path_; }
  const std::string& socket_path() const { return socket_path_; }
  const std::string& dir() const { return dir_.path(); }
  FakeRuntime& service() { return service_; }

 private:
  testing::ScopedTempDir dir_;
  FakeRuntime service_;
  std::string socket_path_;
  std::unique_ptr<grpc::Server> server_;
};

uint64_t InodeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::string ContainerdInfo(const std::string& netns_path, int pid) {
  return R"({"pid":)" + std::to_string(pid) +
         R"(,"processStatus":"running","netNamespaceClosed":false,"runtimeType":"io.containerd.runc.v2",)"
         R"("runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":")" +
         netns_path + R"("}]}}})";
}

CriSourceOptions OptionsFor(const std::string& endpoint,
                            std::chrono::milliseconds call_timeout = 2000ms) {
  CriSourceOptions options;
  options.client.endpoints = {endpoint};
  options.client.call_timeout = call_timeout;
  return options;
}

NodeSnapshot CollectWith(const CriSourceOptions& options) {
  NodeSnapshot snapshot;
  CriNodeSource source(options);
  source.Collect(snapshot);
  return snapshot;
}

std::string AllErrors(const CriState& state) {
  std::string text;
  for (const SourceError& error : state.errors) text += "[" + error.message + "] ";
  return text;
}

bool AnyErrorContains(const CriState& state, std::string_view a, std::string_view b = "") {
  for (const SourceError& error : state.errors) {
    if (error.message.find(a) != std::string::npos && error.message.find(b) != std::string::npos) {
      return true;
    }
  }
  return false;
}

template <typename F>
std::chrono::milliseconds Timed(F&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

TEST(CriFakeRuntime, CollectsIdentityNetnsAndInodes) {
  // Three netns resolutions: a pin under a host-root prefix, a pid fallback, hostNetwork.
  testing::ScopedTempDir host;
  const std::string host_root = host.path();
  fs::create_directories(host_root + "/run/netns");
  std::ofstream(host_root + "/run/netns/cni-aaa").put('x');
  const int self = static_cast<int>(::getpid());

  FakeRuntimeServer runtime(
      {.ignore_state_filter = true},
      {
          {.id = "sb-web",
           .name = "web-0",
           .uid = "uid-web",
           .namespace_name = "demo",
           .ips = {"192.0.2.6", "2001:db8::6"},
           .info_json = ContainerdInfo("/run/netns/cni-aaa", 31651)},
          {.id = "sb-api",
           .name = "api-1",
           .uid = "uid-api",
           .namespace_name = "demo",
           .ips = {"192.0.2.7"},
           .info_json = R"({"pid":)" + std::to_string(self) + R"(,"runtimeSpec":{}})"},
          {.id = "sb-node",
           .name = "node-agent",
           .uid = "uid-node",
           .namespace_name = "kube-system",
           .host_network = true,
           .info_json = R"({"pid":1,"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"}]}}})"},
          {.id = "sb-dead",
           .name = "old-0",
           .uid = "uid-old",
           .namespace_name = "demo",
           .state = runtime::v1::SANDBOX_NOTREADY,
           .info_json = R"({"pid":0,"netNamespaceClosed":true})"},
      });
  ASSERT_TRUE(runtime.ok());
  CriSourceOptions options = OptionsFor(runtime.endpoint());
  options.host_root = host_root;
  const NodeSnapshot snapshot = CollectWith(options);
  const CriState& cri = snapshot.cri;

  EXPECT_TRUE(cri.available);
  EXPECT_EQ(cri.endpoint, runtime.endpoint());
  EXPECT_EQ(cri.runtime, "fakeruntime 9.9.9");
  EXPECT_TRUE(runtime.service().asked_ready_only());
  EXPECT_EQ(runtime.service().non_verbose_calls(), 0);
  EXPECT_TRUE(cri.errors.empty()) << AllErrors(cri);
  ASSERT_EQ(cri.pods.size(), 3u);  // NOTREADY dropped although the runtime returned it

  const PodIdentity& api = cri.pods[0];  // sorted by namespace, name
  EXPECT_EQ(api.name, "api-1");
  EXPECT_EQ(api.pid, self);
  EXPECT_EQ(api.netns_path, "");
  EXPECT_EQ(api.netns_inode, InodeOf("/proc/" + std::to_string(self) + "/ns/net"));

  const PodIdentity& web = cri.pods[1];
  EXPECT_EQ(web.uid, "uid-web");
  EXPECT_EQ(web.name, "web-0");
  EXPECT_EQ(web.namespace_name, "demo");
  EXPECT_EQ(web.sandbox_id, "sb-web");
  EXPECT_EQ(web.pid, 31651);
  EXPECT_EQ(web.netns_path, "/run/netns/cni-aaa");
  EXPECT_EQ(web.netns_inode, InodeOf(host_root + "/run/netns/cni-aaa"));
  EXPECT_NE(web.netns_inode, 0u);
  EXPECT_EQ(web.ips, (std::vector<std::string>{"192.0.2.6", "2001:db8::6"}));
  EXPECT_FALSE(web.host_network);

  const PodIdentity& node = cri.pods[2];
  EXPECT_EQ(node.namespace_name, "kube-system");
  EXPECT_TRUE(node.host_network);
  EXPECT_EQ(node.netns_path, "");
  EXPECT_EQ(node.netns_inode, 0u);
}

// Repeated collections reuse the runtime's last answer while the node's netns stay the same and
// the interval has not passed; a new netns, or a failed answer, asks again: the sandbox list, and
// PodSandboxStatus only for sandboxes not inspected completely before.
TEST(CriFakeRuntime, RepeatedCollectionsReuseTheLastAnswer) {
  FakeRuntimeServer runtime({}, {{.id = "sb-a",
                                  .name = "a-0",
                                  .uid = "uid-a",
                                  .namespace_name = "demo",
                                  .ips = {"192.0.2.8"},
                                  .info_json = ContainerdInfo("/proc/self/ns/net", 0)},
                                 {.id = "sb-gone",
                                  .name = "gone",
                                  .uid = "uid-gone",
                                  .namespace_name = "demo",
                                  .info_json = ContainerdInfo("/nonexistent/netns/cni-x", 0)}});
  ASSERT_TRUE(runtime.ok());
  CriSourceOptions options = OptionsFor(runtime.endpoint());
  options.min_interval = std::chrono::hours(1);
  CriNodeSource source(options);
  NodeSnapshot snapshot;
  snapshot.netns.resize(1);
  snapshot.netns[0].netns.inode = 1001;
  source.Collect(snapshot);
  ASSERT_TRUE(snapshot.cri.available) << AllErrors(snapshot.cri);
  ASSERT_EQ(snapshot.cri.pods.size(), 2u);
  const int status_calls = runtime.service().status_calls();
  EXPECT_EQ(status_calls, 2);
  NodeSnapshot again = snapshot;
  again.cri = {};
  source.Collect(again);
  EXPECT_EQ(again.cri, snapshot.cri) << "the last answer";
  EXPECT_EQ(runtime.service().status_calls(), status_calls) << "the runtime was not asked";
  EXPECT_EQ(source.runtime_queries(), 1u);
  again.netns.resize(2);
  again.netns[1].netns.inode = 1002;  // a new pod netns: names may have changed
  again.cri = {};
  source.Collect(again);
  EXPECT_EQ(source.runtime_queries(), 2u);
  EXPECT_EQ(runtime.service().status_calls(), status_calls + 1)
      << "only the sandbox whose netns did not resolve is inspected again";
  EXPECT_EQ(again.cri, snapshot.cri) << "same pods, same errors";
}

TEST(CriFakeRuntime, UnresolvableNetnsIsReportedPerPod) {
  FakeRuntimeServer runtime({}, {{.id = "sb-gone",
                                  .name = "gone",
                                  .uid = "u",
                                  .namespace_name = "ns",
                                  .info_json = ContainerdInfo("/nonexistent/netns/cni-x", 0)}});
  ASSERT_TRUE(runtime.ok());
  const CriState cri = CollectWith(OptionsFor(runtime.endpoint())).cri;
  ASSERT_EQ(cri.pods.size(), 1u);
  EXPECT_EQ(cri.pods[0].netns_path, "/nonexistent/netns/cni-x");
  EXPECT_EQ(cri.pods[0].netns_inode, 0u);
  EXPECT_TRUE(AnyErrorContains(cri, "ns/gone", "stat /nonexistent/netns/cni-x")) << AllErrors(cri);
}

TEST(CriFakeRuntime, UnavailableRuntimeIsNotFatal) {
  FakeRuntimeServer runtime({.unavailable = true}, {});
  ASSERT_TRUE(runtime.ok());
  const CriState cri = CollectWith(OptionsFor(runtime.endpoint())).cri;
  EXPECT_FALSE(cri.available);
  EXPECT_TRUE(cri.pods.empty());
  EXPECT_TRUE(AnyErrorContains(cri, "Version: UNAVAILABLE", "runtime is restarting"))
      << AllErrors(cri);
}

TEST(CriFakeRuntime, MissingSocketAndNoDefaults) {
  testing::ScopedTempDir empty_root;
  CriSourceOptions options = OptionsFor("unix://" + empty_root.path() + "/absent.sock", 500ms);
  const auto elapsed_missing = Timed([&] {
    const CriState cri = CollectWith(options).cri;
    EXPECT_FALSE(cri.available);
    EXPECT_TRUE(AnyErrorContains(cri, "absent.sock", "Version: UNAVAILABLE")) << AllErrors(cri);
  });
  EXPECT_LT(elapsed_missing, 2s);

  CriSourceOptions probing;
  probing.client.host_root = empty_root.path();  // nothing under it: every default is absent
  const CriState cri = CollectWith(probing).cri;
  EXPECT_FALSE(cri.available);
  EXPECT_TRUE(AnyErrorContains(cri, "no CRI runtime socket found",
                               empty_root.path() + "/run/containerd/containerd.sock"))
      << AllErrors(cri);

  probing.client.endpoints = {"tcp://127.0.0.1:1"};
  EXPECT_TRUE(AnyErrorContains(CollectWith(probing).cri, "only unix:// endpoints"));
}

TEST(CriFakeRuntime, DefaultProbeFindsSocketUnderHostRoot) {
  FakeRuntimeServer runtime({}, {});
  ASSERT_TRUE(runtime.ok());
  testing::ScopedTempDir host;
  fs::create_directories(host.path() + "/run/crio");
  // The runtime listens elsewhere; a symlink puts it at CRI-O's default path under the root.
  fs::create_symlink(runtime.socket_path(), host.path() + "/run/crio/crio.sock");
  CriSourceOptions options;
  options.client.host_root = host.path();
  const CriState cri = CollectWith(options).cri;
  EXPECT_TRUE(cri.available) << AllErrors(cri);
  EXPECT_EQ(cri.endpoint, "unix://" + host.path() + "/run/crio/crio.sock");
}

TEST(CriFakeRuntime, HungVersionHitsTheDeadline) {
  FakeRuntimeServer runtime({.hang_call = "Version"}, {});
  ASSERT_TRUE(runtime.ok());
  CriState cri;
  const auto elapsed = Timed([&] { cri = CollectWith(OptionsFor(runtime.endpoint(), 300ms)).cri; });
  EXPECT_FALSE(cri.available);
  EXPECT_TRUE(AnyErrorContains(cri, "Version: DEADLINE_EXCEEDED")) << AllErrors(cri);
  EXPECT_GE(elapsed, 250ms);
  EXPECT_LT(elapsed, 2s);
}

TEST(CriFakeRuntime, HungListHitsTheDeadline) {
  FakeRuntimeServer runtime({.hang_call = "ListPodSandbox"}, {});
  ASSERT_TRUE(runtime.ok());
  CriState cri;
  const auto elapsed = Timed([&] { cri = CollectWith(OptionsFor(runtime.endpoint(), 300ms)).cri; });
  EXPECT_TRUE(cri.available);
  EXPECT_TRUE(AnyErrorContains(cri, "ListPodSandbox: DEADLINE_EXCEEDED")) << AllErrors(cri);
  EXPECT_LT(elapsed, 2s);
}

TEST(CriFakeRuntime, HungStatusCostsOneDeadlineNotOnePerPod) {
  std::vector<FakeSandbox> pods;
  for (int i = 0; i < 5; ++i) {
    const std::string n = std::to_string(i);
    pods.push_back({.id = "sb-" + n,
                    .name = "p" + n,
                    .uid = "u" + n,
                    .namespace_name = "ns",
                    .info_json = ContainerdInfo("/proc/self/ns/net", 0)});
  }
  FakeRuntimeServer runtime({.hang_call = "PodSandboxStatus"}, pods);
  ASSERT_TRUE(runtime.ok());
  CriState cri;
  const auto elapsed = Timed([&] { cri = CollectWith(OptionsFor(runtime.endpoint(), 300ms)).cri; });
  EXPECT_LT(elapsed, 1500ms);
  EXPECT_EQ(runtime.service().status_calls(), 1);
  ASSERT_EQ(cri.pods.size(), 5u);  // identities from ListPodSandbox survive
  EXPECT_EQ(cri.pods[3].uid, "u3");
  EXPECT_TRUE(AnyErrorContains(cri, "PodSandboxStatus sb-0: DEADLINE_EXCEEDED")) << AllErrors(cri);
  EXPECT_TRUE(AnyErrorContains(cri, "skipped for 4 more sandboxes")) << AllErrors(cri);
}

TEST(CriFakeRuntime, TotalBudgetCapsEveryCall) {
  FakeRuntimeServer runtime({.hang_call = "ListPodSandbox"}, {});
  ASSERT_TRUE(runtime.ok());
  CriSourceOptions options = OptionsFor(runtime.endpoint(), 5000ms);
  options.total_timeout = 300ms;
  CriState cri;
  const auto elapsed = Timed([&] { cri = CollectWith(options).cri; });
  EXPECT_LT(elapsed, 2s);
  EXPECT_TRUE(AnyErrorContains(cri, "ListPodSandbox: DEADLINE_EXCEEDED")) << AllErrors(cri);
}

TEST(CriFakeRuntime, GarbageInfoKeepsIdentity) {
  FakeRuntimeServer runtime(
      {}, {{.id = "sb-g",
            .name = "garbled",
            .uid = "ug",
            .namespace_name = "ns",
            .ips = {"192.0.2.9"},
            .info_json = "{\"pid\": 12, \"runtimeSpec\": {\x01"},
           {.id = "sb-n", .name = "noinfo", .uid = "un", .namespace_name = "ns"}});
  ASSERT_TRUE(runtime.ok());
  const CriState cri = CollectWith(OptionsFor(runtime.endpoint())).cri;
  EXPECT_TRUE(cri.available);
  ASSERT_EQ(cri.pods.size(), 2u);
  EXPECT_EQ(cri.pods[0].uid, "ug");
  EXPECT_EQ(cri.pods[0].ips, std::vector<std::string>{"192.0.2.9"});
  EXPECT_EQ(cri.pods[0].pid, 0);
  EXPECT_EQ(cri.pods[0].netns_path, "");
  EXPECT_TRUE(AnyErrorContains(cri, "PodSandboxStatus sb-g: info JSON: offset")) << AllErrors(cri);
  EXPECT_TRUE(AnyErrorContains(cri, "PodSandboxStatus sb-n: verbose info has no \"info\""))
      << AllErrors(cri);
}

TEST(CriFakeRuntime, HugeListIsRefused) {
  FakeRuntimeServer runtime({.list_padding_bytes = 3 << 20}, {});
  ASSERT_TRUE(runtime.ok());
  CriSourceOptions options = OptionsFor(runtime.endpoint());
  options.client.max_receive_bytes = 1 << 20;
  const CriState cri = CollectWith(options).cri;
  EXPECT_TRUE(cri.available);
  EXPECT_TRUE(cri.pods.empty());
  EXPECT_TRUE(AnyErrorContains(cri, "ListPodSandbox: RESOURCE_EXHAUSTED")) << AllErrors(cri);
}

TEST(CriFakeRuntime, HugeStatusIsRefused) {
  FakeRuntimeServer runtime({.info_padding_bytes = 3 << 20},
                            {{.id = "sb-big",
                              .name = "big",
                              .uid = "ub",
                              .namespace_name = "ns",
                              .info_json = ContainerdInfo("/proc/self/ns/net", 0)}});
  ASSERT_TRUE(runtime.ok());
  CriSourceOptions options = OptionsFor(runtime.endpoint());
  options.client.max_receive_bytes = 1 << 20;
  const CriState cri = CollectWith(options).cri;
  ASSERT_EQ(cri.pods.size(), 1u);
  EXPECT_EQ(cri.pods[0].uid, "ub");
  EXPECT_TRUE(AnyErrorContains(cri, "PodSandboxStatus sb-big: RESOURCE_EXHAUSTED"))
      << AllErrors(cri);
}

TEST(CriFakeRuntime, EndpointSpellings) {
  EXPECT_EQ(cri::NormalizeUnixEndpoint("/run/x.sock"), "unix:///run/x.sock");
  EXPECT_EQ(cri::NormalizeUnixEndpoint("unix:/run/x.sock"), "unix:///run/x.sock");
  EXPECT_EQ(cri::NormalizeUnixEndpoint("unix:///run/x.sock"), "unix:///run/x.sock");
  EXPECT_EQ(cri::NormalizeUnixEndpoint("tcp://1.2.3.4:5"), "");
  EXPECT_EQ(cri::DefaultCriSocketPaths().front(), "/run/containerd/containerd.sock");
  EXPECT_EQ(cri::DefaultCriSocketPaths().size(), 6u);
}

}  // namespace
}  // namespace ad
