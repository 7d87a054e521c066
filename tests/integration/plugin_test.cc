// The kubectl plugin end to end: two lab nodes (separate lab prefixes, each with its own `serve`
// and API socket and the Kubernetes API source), kube-api-sim as the cluster's API server, and
// kubectl-sim (tests/sim/kubectl) first on PATH as `kubectl`: it answers `get` from kube-api-sim
// and runs `exec` against the matching lab node's daemon. Covers every node healthy, findings,
// an agent that is down and a node without an agent, a hung exec (timeout, the others still
// reported), garbage and refused execs, `explain pod` routed to the pod's node, `-o json`, the
// exit codes, and the plugin found by kubectl itself as kubectl-ambient_doctor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ambientdoctor/v1/cluster.pb.h"
#include "integration/kube_fixture.h"
#include "lab/lab.h"

namespace ad::test {
namespace {

using namespace std::chrono_literals;
using Strings = std::vector<std::string>;

constexpr char kImage[] = "registry.invalid/ambient-doctor:0.1.0";

std::string AgentPodJson(const std::string& name, const std::string& node) {
  return R"({"metadata":{"name":")" + name +
         R"(","namespace":"istio-system","labels":{"app":"ambient-doctor"}},)" +
         R"("spec":{"nodeName":")" + node +
         R"(","containers":[{"name":"ambient-doctor","image":")" + kImage +
         R"("}]},"status":{"phase":"Running","containerStatuses":[{"name":)" +
         R"("ambient-doctor","ready":true,"state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}})";
}

// A node as the API serves it, labelled with its OS as the kubelet does.
std::string NodeWithOs(const std::string& name, const std::string& os = "linux") {
  return R"({"metadata":{"name":")" + name + R"(","labels":{"kubernetes.io/os":")" + os + "\"}}}";
}

void UpsertNode(KubeSim& sim, const std::string& name, const std::string& os = "linux") {
  sim.Upsert(kube_sim::Resource::kNodes, name, NodeWithOs(name, os));
}

struct Answer {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::string all() const { return out + err; }
};

std::optional<pb::ClusterStatus> ParseStatus(const std::string& json) {
  pb::ClusterStatus status;
  if (!google::protobuf::util::JsonStringToMessage(json, &status).ok()) return std::nullopt;
  return status;
}

const pb::NodeStatus* Row(const pb::ClusterStatus& status, const std::string& node) {
  for (const pb::NodeStatus& row : status.nodes()) {
    if (row.node() == node) return &row;
  }
  return nullptr;
}

// Lab A (node-a): one meshed pod, shop/a-0. Lab B (node-b): a meshed pod, shop/b-0, and a plain
// one, quiet/b-plain, in a namespace that is not ambient until a test labels it.
class Plugin : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    for (const char* tag : {"pa", "pb"}) {
      lab::LabOptions options;
      options.prefix = LabPrefix(tag);
      options.pods = 1;
      options.plain_pods = std::string(tag) == "pb" ? 1 : 0;
      labs_.push_back(std::make_unique<lab::ScopedLab>(options));
      if (!labs_.back()->ok()) return;
    }
    sim_ = std::make_unique<KubeSim>();
    if (!sim_->Start(&error_)) return;
    sim_->UpsertNamespace("shop", "ambient");
    sim_->UpsertNamespace("quiet");
    sim_->UpsertNamespace("istio-system");
    auto lab_pod = [](int lab, int index, const std::string& ns, const std::string& name,
                      const std::string& node) {
      const auto& pod = labs_[lab]->node().pods.at(index);
      KubePodSpec spec{.ns = ns, .name = name, .node = node, .uid = pod.pod_uid};
      spec.ips = {pod.ipv4};
      return spec;
    };
    sim_->UpsertPod(lab_pod(0, 0, "shop", "a-0", "node-a"));
    sim_->UpsertPod(lab_pod(1, 0, "shop", "b-0", "node-b"));
    sim_->UpsertPod(lab_pod(1, 1, "quiet", "b-plain", "node-b"));
    sim_->UpsertPod({.ns = "shop", .name = "d-0", .node = "node-d", .ips = {"10.99.0.4"}});
    for (const char* node : {"node-a", "node-b"}) {
      UpsertNode(*sim_, node);
      sim_->Upsert(kube_sim::Resource::kPods, std::string("istio-system/ad-") + node[5],
                   AgentPodJson(std::string("ad-") + node[5], node));
    }
    dir_ = std::make_unique<testing::ScopedTempDir>("adt-plug");
    for (int i = 0; i < 2; ++i) {
      const std::string node = i == 0 ? "node-a" : "node-b";
      std::filesystem::create_directories(dir_->path() + "/" + node);
      serves_.push_back(std::make_unique<ServeProcess>(
          dir_->path() + "/" + node,
          Strings{"--lab-prefix", labs_[i]->node().prefix, "--no-cri", "--kubeconfig",
                  sim_->kubeconfig(), "--node-name", node}));
    }
    // kubectl-sim as `kubectl`, and the binary as kubectl-ambient_doctor, first on PATH.
    bin_ = dir_->path() + "/bin";
    std::filesystem::create_directories(bin_);
    std::filesystem::create_symlink(
        std::string(AD_SOURCE_DIR) + "/tests/sim/kubectl/kubectl_sim.py", bin_ + "/kubectl");
    std::filesystem::create_symlink(DoctorBinary(), bin_ + "/kubectl-ambient_doctor");
    ::setenv("PATH", (bin_ + ":" + std::getenv("PATH")).c_str(), 1);
    ::setenv("AD_KUBECTL_SIM", (dir_->path() + "/sim.json").c_str(), 1);
    ::setenv("KUBECONFIG", sim_->kubeconfig().c_str(), 1);
    setup_ok_ = true;
  }
  static void TearDownTestSuite() {
    serves_.clear();
    dir_.reset();
    sim_.reset();
    labs_.clear();
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    for (const auto& lab : labs_) ASSERT_TRUE(lab->ok()) << lab->error().message;
    ASSERT_TRUE(setup_ok_) << error_;
    for (const auto& serve : serves_) ASSERT_TRUE(serve->WaitReady(30s)) << serve->log();
    SetModes({});
  }

  // What kubectl-sim's exec does per node: "serve" (default) against the node's daemon, or
  // "hang", "garbage", "refuse".
  static void SetModes(const std::map<std::string, std::string>& modes) {
    std::string nodes;
    for (int i = 0; i < 2; ++i) {
      const std::string node = i == 0 ? "node-a" : "node-b";
      const auto mode = modes.count(node) ? modes.at(node) : "serve";
      nodes += (nodes.empty() ? "" : ",") + JsonString(node) + ":{\"mode\":" + JsonString(mode) +
               ",\"socket\":" + JsonString(serves_[i]->socket()) +
               ",\"flags\":" + JsonString(lab::LabAgentFlagsPath(labs_[i]->node().prefix)) + "}";
    }
    std::ofstream(dir_->path() + "/sim.json")
        << "{\"doctor\":" << JsonString(DoctorBinary())
        << ",\"log\":" << JsonString(dir_->path() + "/calls.log") << ",\"nodes\":{" << nodes
        << "}}";
  }

  static Answer Run(Strings args) {
    args.insert(args.begin(), "kubectl");
    const lab::CommandOutput out = RunDoctor(args);
    return {out.exit_code, out.out, out.err};
  }

  static std::string CallsLog() { return ReadFile(dir_->path() + "/calls.log"); }

  static inline std::vector<std::unique_ptr<lab::ScopedLab>> labs_;
  static inline std::unique_ptr<KubeSim> sim_;
  static inline std::unique_ptr<testing::ScopedTempDir> dir_;
  static inline std::vector<std::unique_ptr<ServeProcess>> serves_;
  static inline std::string bin_;
  static inline std::string error_;
  static inline bool setup_ok_ = false;
};

TEST_F(Plugin, EveryNodeHealthy) {
  Answer table = Run({"status"});
  EXPECT_EQ(table.exit_code, 0) << table.all();
  for (const char* text : {"NODE", "VERSION", "OLDEST CRITICAL", "node-a", "node-b", "0.1.0",
                           "2 node(s): 2 reported, 0 failed"}) {
    EXPECT_NE(table.out.find(text), std::string::npos) << text << "\n" << table.all();
  }
  Answer json = Run({"status", "-o", "json", "--context", "sim", "--concurrency", "1"});
  EXPECT_EQ(json.exit_code, 0) << json.all();
  const std::optional<pb::ClusterStatus> status = ParseStatus(json.out);
  ASSERT_TRUE(status) << json.all();
  EXPECT_EQ(status->schema(), "ambient-doctor.cluster-status/v1");
  EXPECT_EQ(status->context(), "sim");
  EXPECT_EQ(status->exit_code(), 0);
  ASSERT_EQ(status->nodes_size(), 2) << json.out;
  for (const pb::NodeStatus& row : status->nodes()) {
    EXPECT_EQ(row.state(), "reported") << row.node() << ": " << row.failure_message();
    EXPECT_EQ(row.agent_version(), "0.1.0");
    EXPECT_EQ(row.report_source(), "daemon");
    EXPECT_EQ(row.pods_ambient(), 1u) << row.node();
    EXPECT_EQ(row.pods_not_enrolled(), 0u);
    EXPECT_EQ(row.exit_code(), 0);
  }
  EXPECT_EQ(Row(*status, "node-a")->agent_pod(), "istio-system/ad-a");
  EXPECT_EQ(status->totals().reported(), 2u);
  // Every kubectl call got the context.
  EXPECT_NE(CallsLog().find(
                R"(["--context", "sim", "exec", "-n", "istio-system", "ad-b", "-c", )"
                R"("ambient-doctor", "--", "ambient-doctor", "report", "-o", "json", "--config", )"
                R"("/etc/ambient-doctor/agent.flags"])"),
            std::string::npos)
      << CallsLog();
  // A context kubectl does not know: kubectl's error, exit 2.
  Answer bad = Run({"status", "--context", "nowhere"});
  EXPECT_EQ(bad.exit_code, 2) << bad.all();
  EXPECT_NE(bad.err.find("context \"nowhere\" does not exist"), std::string::npos) << bad.all();
}

TEST_F(Plugin, FoundByKubectlAsKubectlAmbientDoctor) {
  // The binary under its plugin name, then kubectl's own plugin lookup on PATH (the real kubectl
  // finds kubectl-ambient_doctor; the plugin's `kubectl` calls reach kubectl-sim).
  lab::CommandOutput named =
      lab::RunCommand({{bin_ + "/kubectl-ambient_doctor", "status"}, "", ""}).value();
  EXPECT_EQ(named.exit_code, 0) << named.out << named.err;
  EXPECT_NE(named.out.find("2 reported"), std::string::npos) << named.out << named.err;
  if (!std::filesystem::exists("/usr/bin/kubectl")) GTEST_SKIP() << "no kubectl installed";
  lab::CommandOutput real =
      lab::RunCommand({{"/usr/bin/kubectl", "ambient-doctor", "version"}, "", ""}).value();
  EXPECT_EQ(real.exit_code, 0) << real.out << real.err;
  EXPECT_NE(real.out.find("kubectl ambient-doctor"), std::string::npos) << real.out << real.err;
}

TEST_F(Plugin, FindingsAndExplainPodOnItsNode) {
  // quiet becomes an ambient namespace: b-plain (no rules) is not enrolled on node-b.
  sim_->UpsertNamespace("quiet", "ambient");
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::optional<pb::Report> r = serves_[1]->Report();
        return r && !FindingsWithCode(*r, "POD_NOT_ENROLLED").empty();
      },
      20s))
      << serves_[1]->log();
  Answer json = Run({"status", "-o", "json"});
  EXPECT_EQ(json.exit_code, 1) << json.all();
  const std::optional<pb::ClusterStatus> status = ParseStatus(json.out);
  ASSERT_TRUE(status) << json.all();
  const pb::NodeStatus* b = Row(*status, "node-b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->pods_not_enrolled(), 1u);
  EXPECT_GE(b->findings().warning() + b->findings().critical(), 1u);
  EXPECT_EQ(b->exit_code(), 1);
  EXPECT_EQ(Row(*status, "node-a")->exit_code(), 0);

  // explain pod goes to the pod's node: node-b's daemon tells b-plain's story.
  Answer story = Run({"explain", "pod", "b-plain", "-n", "quiet", "-o", "json"});
  EXPECT_EQ(story.exit_code, 1) << story.all();
  std::optional<pb::PodReport> pod = ParsePodJson(story.out);
  ASSERT_TRUE(pod) << story.all();
  EXPECT_EQ(pod->node(), "node-b");
  EXPECT_EQ(pod->location(), "this_node");
  EXPECT_EQ(pod->verdict_code(), "not_in_mesh") << pod->verdict();
  EXPECT_EQ(pod->origin().source(), "daemon");
  EXPECT_NE(CallsLog().find(R"("ad-b", "-c", "ambient-doctor", "--", "ambient-doctor", )"
                            R"("explain", "pod", "quiet/b-plain", "-o", "json", "--config", )"),
            std::string::npos)
      << CallsLog();
  // The table form, NAMESPACE/NAME, on node-a.
  Answer text = Run({"explain", "pod", "shop/a-0"});
  EXPECT_EQ(text.exit_code, 0) << text.all();
  EXPECT_NE(text.out.find("in the mesh"), std::string::npos) << text.all();
  EXPECT_NE(text.out.find("shop/a-0"), std::string::npos) << text.all();
  // Without -n: the context's namespace (default), where there is no such pod.
  Answer missing = Run({"explain", "pod", "a-0"});
  EXPECT_EQ(missing.exit_code, 2) << missing.all();
  EXPECT_NE(missing.err.find("pods \"a-0\" not found"), std::string::npos) << missing.all();
  sim_->UpsertNamespace("quiet");
}

TEST_F(Plugin, AgentDownAndNodeWithoutAgentArePartialResults) {
  UpsertNode(*sim_, "node-c");
  UpsertNode(*sim_, "node-d");
  UpsertNode(*sim_, "node-w", "windows");  // no agent by design: not listed
  sim_->Upsert(kube_sim::Resource::kPods, "istio-system/ad-c", AgentPodJson("ad-c", "node-c"));
  Answer table = Run({"status"});
  EXPECT_EQ(table.exit_code, 2) << table.all();
  EXPECT_NE(table.out.find("4 node(s): 2 reported, 2 failed"), std::string::npos) << table.all();
  Answer json = Run({"status", "-o", "json"});
  EXPECT_EQ(json.exit_code, 2) << json.all();
  const std::optional<pb::ClusterStatus> status = ParseStatus(json.out);
  ASSERT_TRUE(status) << json.all();
  ASSERT_EQ(status->nodes_size(), 4);
  EXPECT_EQ(Row(*status, "node-a")->state(), "reported");
  EXPECT_EQ(Row(*status, "node-b")->state(), "reported");
  const pb::NodeStatus* c = Row(*status, "node-c");
  EXPECT_EQ(c->failure(), "exec_failed");
  EXPECT_NE(c->failure_message().find("container not found"), std::string::npos)
      << c->failure_message();
  EXPECT_EQ(Row(*status, "node-d")->failure(), "no_agent");
  EXPECT_NE(json.err.find("node node-d: no_agent"), std::string::npos) << json.err;

  // explain pod of a pod on the node without an agent.
  Answer story = Run({"explain", "pod", "shop/d-0"});
  EXPECT_EQ(story.exit_code, 2) << story.all();
  EXPECT_NE(story.err.find("node-d: no agent pod on this node"), std::string::npos) << story.all();
  sim_->server().Delete(kube_sim::Resource::kPods, "istio-system", "ad-c");
  sim_->server().Delete(kube_sim::Resource::kNodes, "", "node-c");
  sim_->server().Delete(kube_sim::Resource::kNodes, "", "node-d");
  sim_->server().Delete(kube_sim::Resource::kNodes, "", "node-w");
}

TEST_F(Plugin, HungExecTimesOutAndTheOthersAreReported) {
  SetModes({{"node-a", "hang"}});
  const auto start = std::chrono::steady_clock::now();
  Answer json = Run({"status", "-o", "json", "--timeout", "2s"});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(json.exit_code, 2) << json.all();
  EXPECT_LT(took, 10s);
  const std::optional<pb::ClusterStatus> status = ParseStatus(json.out);
  ASSERT_TRUE(status) << json.all();
  const pb::NodeStatus* a = Row(*status, "node-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->failure(), "timeout");
  EXPECT_NE(a->failure_message().find("2s"), std::string::npos) << a->failure_message();
  EXPECT_EQ(Row(*status, "node-b")->state(), "reported");
}

TEST_F(Plugin, GarbageAndRefusedExecs) {
  SetModes({{"node-a", "garbage"}, {"node-b", "refuse"}});
  Answer table = Run({"status"});
  EXPECT_EQ(table.exit_code, 2) << table.all();
  EXPECT_NE(table.out.find("FAILED not_a_report"), std::string::npos) << table.all();
  EXPECT_NE(table.out.find("502 Bad Gateway"), std::string::npos) << table.all();
  EXPECT_NE(table.out.find("FAILED exec_failed"), std::string::npos) << table.all();
  EXPECT_NE(table.out.find("cannot create resource \"pods/exec\""), std::string::npos)
      << table.all();
  Answer story = Run({"explain", "pod", "shop/a-0"});
  EXPECT_EQ(story.exit_code, 2) << story.all();
  EXPECT_NE(story.err.find("not_a_report"), std::string::npos) << story.all();
}

TEST_F(Plugin, AgentWhoseDaemonDoesNotAnswerScansWithItsFlags) {
  SetModes({{"node-a", "local"}});
  Answer json = Run({"status", "-o", "json", "--kubeconfig", sim_->kubeconfig()});
  EXPECT_EQ(json.exit_code, 0) << json.all();
  const std::optional<pb::ClusterStatus> status = ParseStatus(json.out);
  ASSERT_TRUE(status) << json.all();
  const pb::NodeStatus* a = Row(*status, "node-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->state(), "reported") << a->failure_message();
  EXPECT_EQ(a->report_source(), "local");
  EXPECT_NE(a->fallback_reason().find("no-daemon.sock"), std::string::npos) << a->fallback_reason();
  EXPECT_EQ(a->pods_ambient(), 1u);  // the lab node, scanned with its own flags
  EXPECT_EQ(Row(*status, "node-b")->report_source(), "daemon");
  EXPECT_NE(
      CallsLog().find(R"(["--kubeconfig", )" + JsonString(sim_->kubeconfig()) + R"(, "exec", )"),
      std::string::npos)
      << CallsLog();
  Answer table = Run({"status"});
  EXPECT_NE(table.out.find("note: node-a: the agent's daemon did not answer"), std::string::npos)
      << table.all();
}

TEST_F(Plugin, UsageErrorsAndCapture) {
  EXPECT_EQ(Run({}).exit_code, 2);
  EXPECT_EQ(Run({"explain", "pod"}).exit_code, 2);
  EXPECT_EQ(Run({"explain", "pod", "a/b/c"}).exit_code, 2);
  EXPECT_EQ(Run({"status", "--concurrency", "0"}).exit_code, 2);
  EXPECT_EQ(Run({"status", "--timeout", "soon"}).exit_code, 2);
  Answer no_kubectl = Run({"status", "--kubectl", "/nonexistent/kubectl"});
  EXPECT_EQ(no_kubectl.exit_code, 2);
  EXPECT_NE(no_kubectl.err.find("cannot run kubectl: /nonexistent/kubectl"), std::string::npos)
      << no_kubectl.all();
  Answer capture = Run({"capture"});
  EXPECT_EQ(capture.exit_code, 2);
  EXPECT_NE(capture.err.find("say where"), std::string::npos) << capture.all();
}

// One capture per node from its daemon, the status table beside them and one tar of both; each
// node's capture judges as its daemon did, anywhere. A node whose exec is garbage is named.
TEST_F(Plugin, CaptureEveryNode) {
  const std::string dir = dir_->path() + "/cluster";
  Answer all = Run({"capture", "-o", dir});
  EXPECT_EQ(all.exit_code, 0) << all.all();
  for (const char* node : {"node-a", "node-b"}) {
    const std::string file = dir + "/" + node + ".capture";
    const lab::CommandOutput replay = RunDoctor({"report", "--from", file, "-o", "json"});
    const std::optional<pb::Report> report = ParseReportJson(replay.out);
    ASSERT_TRUE(report) << file << ": " << replay.err;
    EXPECT_EQ(report->node().name(), node);
    EXPECT_EQ(report->origin().captured_from(), "daemon");
  }
  const std::optional<pb::ClusterStatus> status =
      ParseStatus(ReadFile(dir + "/cluster-status.json"));
  ASSERT_TRUE(status) << all.all();
  EXPECT_EQ(status->nodes_size(), 2);
  Result<lab::CommandOutput> listing = lab::RunCommand({{"tar", "-tf", dir + ".tar"}, "", ""});
  ASSERT_TRUE(listing.ok());
  for (const char* name :
       {"cluster/node-a.capture", "cluster/node-b.capture", "cluster/cluster-status.json"}) {
    EXPECT_NE(listing->out.find(name), std::string::npos) << listing->out;
  }
  SetModes({{"node-b", "garbage"}});
  Answer partial = Run({"capture", "-o", dir_->path() + "/partial"});
  EXPECT_EQ(partial.exit_code, 2) << partial.all();
  EXPECT_NE(partial.err.find("node node-b: not_a_capture"), std::string::npos) << partial.all();
  EXPECT_TRUE(std::filesystem::exists(dir_->path() + "/partial/node-a.capture"));
}

}  // namespace
}  // namespace ad::test
