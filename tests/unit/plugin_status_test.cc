// The kubectl plugin's cluster logic without a cluster: kubectl's JSON read, agent pods matched to
// nodes, answers judged (report, garbage, refused exec, timeout), the status rows, totals, exit
// code and table, the concurrency bound; and the child-process runner with its deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/report_proto.h"
#include "base/agent_version.h"
#include "cli/plugin_cluster.h"
#include "cli/plugin_kubectl.h"

namespace ad::cli {
namespace {

using namespace std::chrono_literals;

std::string AgentPodJson(const std::string& name, const std::string& node,
                         const std::string& phase = "Running", bool running = true) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
         R"(","namespace":"istio-system","creationTimestamp":"2026-01-01T00:00:00Z",)" +
         R"("labels":{"app":"ambient-doctor"}},"spec":{"nodeName":")" + node +
         R"(","containers":[{"name":"ambient-doctor","image":"reg.example:5000/ambient-doctor:0.3.1"}]},)" +
         R"("status":{"phase":")" + phase + R"(","containerStatuses":[{"name":"ambient-doctor",)" +
         (running ? R"("state":{"running":{"startedAt":"2026-01-01T00:00:01Z"}}}]}})"
                  : R"("state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}})");
}

std::string ListJson(const std::vector<std::string>& items) {
  std::string out =
      R"({"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[)";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]}";
}

std::string NodeListJson(const std::vector<std::string>& names) {
  std::vector<std::string> items;
  for (const auto& n : names)
    items.push_back(R"({"kind":"Node","metadata":{"name":")" + n + "\"}}");
  return ListJson(items);
}

pb::Report SampleReport(const std::string& node, int critical, int warning) {
  pb::Report report;
  report.set_schema("ambient-doctor.report/v2");
  report.mutable_node()->set_name(node);
  report.mutable_node()->set_taken_at_unix_ms(1'000'000);
  report.mutable_node()->set_zds_collected(true);
  report.mutable_node()->mutable_zds()->set_listener_found(true);
  report.mutable_node()->mutable_zds()->add_accepted()->set_inode(7);
  report.mutable_origin()->set_source("daemon");
  report.mutable_origin()->set_age_ms(500);
  report.mutable_summary()->mutable_by_mode()->set_ambient(5);
  report.mutable_summary()->mutable_findings()->set_critical(critical);
  report.mutable_summary()->mutable_findings()->set_warning(warning);
  for (int i = 0; i < critical; ++i) {
    pb::Finding* f = report.add_findings();
    f->set_code(i == 0 ? "ZDS_STALL" : "POD_NOT_ENROLLED");
    f->set_severity("critical");
    f->set_pod("shop/p" + std::to_string(i));
    f->set_first_seen_unix_ms(1'000'000 - 60'000 * (i == 0 ? 1 : 3));  // the second is older
  }
  for (int i = 0; i < warning; ++i) {
    pb::Finding* f = report.add_findings();
    f->set_code("POD_NOT_ENROLLED");
    f->set_severity("warning");
  }
  return report;
}

ProcessOutput Answer(const std::string& out, int exit_code = 0, const std::string& err = "") {
  ProcessOutput o;
  o.out = out;
  o.err = err;
  o.exit_code = exit_code;
  return o;
}

// Answers by the command's words joined with spaces (exec: by the pod name); counts how many
// calls run at once.
class FakeKubectl : public Kubectl {
 public:
  std::map<std::string, ProcessOutput> answers;
  std::chrono::milliseconds delay{0};
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  std::mutex mu;
  std::vector<std::vector<std::string>> calls;

  ProcessOutput Run(const std::vector<std::string>& args, std::chrono::milliseconds) override {
    {
      std::lock_guard lock(mu);
      calls.push_back(args);
    }
    const int now = ++running;
    int seen = max_running.load();
    while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(delay);
    --running;
    std::string key;
    if (!args.empty() && args[0] == "exec") {
      key = "exec " + args.at(3);
    } else {
      for (const auto& a : args) key += (key.empty() ? "" : " ") + a;
    }
    const auto it = answers.find(key);
    if (it == answers.end()) return Answer("", 1, "error: fake kubectl has no answer for " + key);
    return it->second;
  }
};

constexpr char kListAgents[] = "get pods -n istio-system -l app=ambient-doctor -o json";
constexpr char kListNodes[] = "get nodes -o json -l kubernetes.io/os=linux";

TEST(PluginKubectl, ReadsAgentPodsAndImageTags) {
  auto pods = ParseAgentPods(
      ListJson({AgentPodJson("ad-a", "node-a"), AgentPodJson("ad-b", "node-b", "Pending", false)}),
      "ambient-doctor");
  ASSERT_TRUE(pods.ok()) << pods.error().message;
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[0].name, "ad-a");
  EXPECT_EQ((*pods)[0].namespace_name, "istio-system");
  EXPECT_EQ((*pods)[0].node, "node-a");
  EXPECT_TRUE((*pods)[0].container_running);
  EXPECT_EQ((*pods)[0].image, "reg.example:5000/ambient-doctor:0.3.1");
  EXPECT_FALSE((*pods)[1].container_running);
  EXPECT_EQ((*pods)[1].phase, "Pending");
  EXPECT_FALSE(ParseAgentPods("<html>", "ambient-doctor").ok());
  EXPECT_FALSE(ParseAgentPods(R"({"kind":"Node"})", "ambient-doctor").ok());

  EXPECT_EQ(ImageTag("reg.example:5000/ambient-doctor:0.3.1"), "0.3.1");
  EXPECT_EQ(ImageTag("reg.example:5000/ambient-doctor"), "");
  EXPECT_EQ(ImageTag("ambient-doctor@sha256:abc"), "");
  EXPECT_EQ(ImageTag("ambient-doctor:1.0@sha256:abc"), "1.0");

  auto placement = ParsePodPlacement(
      R"({"kind":"Pod","metadata":{"name":"web","namespace":"shop"},"spec":{"nodeName":"n1"}})");
  ASSERT_TRUE(placement.ok());
  EXPECT_EQ(placement->namespace_name, "shop");
  EXPECT_EQ(placement->node, "n1");
  EXPECT_FALSE(ParsePodPlacement("{}").ok());
}

TEST(PluginCluster, NodesWithoutAgentsAndAgentsNotRunning) {
  FakeKubectl kubectl;
  kubectl.answers[kListAgents] = Answer(
      ListJson({AgentPodJson("ad-a", "node-a"), AgentPodJson("ad-b", "node-b", "Pending", false)}));
  kubectl.answers[kListNodes] = Answer(NodeListJson({"node-c", "node-a", "node-b"}));
  auto directory = FindAgents(kubectl, PluginOptions{});
  ASSERT_TRUE(directory.ok()) << directory.error().message;
  ASSERT_EQ(directory->nodes.size(), 3u);
  EXPECT_EQ(directory->nodes[0].node, "node-a");
  EXPECT_TRUE(directory->nodes[0].failure.empty());
  EXPECT_EQ(directory->nodes[1].failure, kAgentNotRunning);
  EXPECT_NE(directory->nodes[1].failure_message.find("istio-system/ad-b"), std::string::npos);
  EXPECT_EQ(directory->nodes[2].node, "node-c");
  EXPECT_EQ(directory->nodes[2].failure, kNoAgent);
  EXPECT_TRUE(directory->nodes_note.empty());

  // Listing nodes refused: only the agents' nodes, with a note.
  kubectl.answers[kListNodes] =
      Answer("", 1, "Error from server (Forbidden): nodes is forbidden: User \"u\" cannot list");
  directory = FindAgents(kubectl, PluginOptions{});
  ASSERT_TRUE(directory.ok());
  EXPECT_EQ(directory->nodes.size(), 2u);
  EXPECT_NE(directory->nodes_note.find("Forbidden"), std::string::npos) << directory->nodes_note;

  // The agent pods cannot be listed: an error with kubectl's words.
  kubectl.answers[kListAgents] = Answer("", 1, "error: You must be logged in to the server");
  directory = FindAgents(kubectl, PluginOptions{});
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find("You must be logged in"), std::string::npos);
}

TEST(PluginCluster, ReadAnswerJudgesEachKindOfFailure) {
  pb::Report report;
  const std::string json = api::ToJson(SampleReport("node-a", 1, 0));
  EXPECT_FALSE(ReadAnswer(Answer(json, 1, "command terminated with exit code 1"),
                          "ambient-doctor.report/", report));
  EXPECT_EQ(report.node().name(), "node-a");

  auto failure = ReadAnswer(Answer("<html>oops</html>"), "ambient-doctor.report/", report);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->failure, kNotAReport);
  EXPECT_NE(failure->message.find("<html>oops"), std::string::npos) << failure->message;

  failure =
      ReadAnswer(Answer(R"({"schema":"ambient-doctor.pod/v1"})"), "ambient-doctor.report/", report);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->failure, kNotAReport);

  failure = ReadAnswer(Answer("", 1,
                              "\nError from server: error dialing backend: dial tcp: i/o "
                              "timeout\nmore\n"),
                       "ambient-doctor.report/", report);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->failure, kExecFailed);
  EXPECT_NE(failure->message.find("error dialing backend"), std::string::npos);
  EXPECT_EQ(failure->message.find("more"), std::string::npos);

  // client-go's klog lines and kubectl exec's own exit line are skipped for the real message.
  failure = ReadAnswer(Answer("", 1,
                              "E1204 03:31:11.799645   17924 memcache.go:265] \"Unhandled Error\"\n"
                              "The connection to the server localhost:8080 was refused\n"),
                       "ambient-doctor.report/", report);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->message, "exit 1: The connection to the server localhost:8080 was refused");
  failure = ReadAnswer(
      Answer("", 2, "ambient-doctor: scan could not run\ncommand terminated with exit code 2\n"),
      "ambient-doctor.report/", report);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->message, "exit 2: ambient-doctor: scan could not run");
  ProcessOutput killed;
  killed.signal = SIGSEGV;
  failure = ReadAnswer(killed, "ambient-doctor.report/", report);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->message, "killed by signal 11, no message");

  ProcessOutput hung;
  hung.timed_out = true;
  failure = ReadAnswer(hung, "ambient-doctor.report/", report);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->failure, kTimeout);
}

TEST(PluginCluster, StatusRowsTotalsExitCodeAndTable) {
  FakeKubectl kubectl;
  kubectl.answers[kListAgents] =
      Answer(ListJson({AgentPodJson("ad-a", "node-a"), AgentPodJson("ad-b", "node-b"),
                       AgentPodJson("ad-d", "node-d")}));
  kubectl.answers[kListNodes] = Answer(NodeListJson({"node-a", "node-b", "node-c", "node-d"}));
  kubectl.answers["exec ad-a"] = Answer(api::ToJson(SampleReport("node-a", 0, 0)));
  kubectl.answers["exec ad-b"] = Answer(api::ToJson(SampleReport("node-b", 2, 1)), 1);
  kubectl.answers["exec ad-d"] = Answer("garbage");
  PluginOptions options;
  options.timeout = 2s;
  auto directory = FindAgents(kubectl, options);
  ASSERT_TRUE(directory.ok());
  const auto answers = ExecOnAgents(kubectl, options, directory->nodes, {"ambient-doctor"});
  const pb::ClusterStatus status = BuildClusterStatus(*directory, answers, options, 42);
  EXPECT_EQ(status.schema(), "ambient-doctor.cluster-status/v1");
  EXPECT_EQ(status.exit_code(), 2);  // node-c and node-d could not be judged
  ASSERT_EQ(status.nodes_size(), 4);
  const pb::NodeStatus& a = status.nodes(0);
  EXPECT_EQ(a.state(), "reported");
  EXPECT_EQ(a.agent_version(), "0.3.1");
  EXPECT_EQ(a.agent_pod(), "istio-system/ad-a");
  EXPECT_EQ(a.pods_ambient(), 5u);
  EXPECT_EQ(a.zds(), "ok");
  EXPECT_EQ(a.exit_code(), 0);
  EXPECT_FALSE(a.has_oldest_critical());
  const pb::NodeStatus& b = status.nodes(1);
  EXPECT_EQ(b.findings().critical(), 2u);
  EXPECT_EQ(b.pods_not_enrolled(), 2u);  // one critical and one warning POD_NOT_ENROLLED
  EXPECT_EQ(b.exit_code(), 1);
  ASSERT_TRUE(b.has_oldest_critical());
  EXPECT_EQ(b.oldest_critical().code(), "POD_NOT_ENROLLED");
  EXPECT_EQ(b.oldest_critical().age_ms(), 180'000 + 500);  // first seen 3 min before, aged 0.5 s
  EXPECT_EQ(status.nodes(2).failure(), kNoAgent);
  EXPECT_EQ(status.nodes(3).failure(), kNotAReport);
  EXPECT_EQ(status.totals().nodes(), 4u);
  EXPECT_EQ(status.totals().reported(), 2u);
  EXPECT_EQ(status.totals().failed(), 2u);
  EXPECT_EQ(status.totals().findings().critical(), 2u);

  const std::string table = RenderClusterStatusTable(status, false);
  for (const char* text : {"NODE", "OLDEST CRITICAL", "node-a", "0.3.1", "POD_NOT_ENROLLED 3m00s",
                           "node-c", "FAILED no_agent", "FAILED not_a_report", "2 failed"}) {
    EXPECT_NE(table.find(text), std::string::npos) << text << "\n" << table;
  }
  const std::string json = RenderClusterStatusJson(status);
  EXPECT_NE(json.find("\"schema\": \"ambient-doctor.cluster-status/v1\""), std::string::npos);

  // Healthy nodes only: exit 0; findings at warning: exit 1.
  AgentDirectory healthy{.nodes = {directory->nodes[0]}};
  EXPECT_EQ(BuildClusterStatus(healthy, {answers[0]}, options, 0).exit_code(), 0);
  AgentDirectory warned{.nodes = {directory->nodes[1]}};
  EXPECT_EQ(BuildClusterStatus(warned, {answers[1]}, options, 0).exit_code(), 1);
  EXPECT_EQ(BuildClusterStatus(AgentDirectory{}, {}, options, 0).exit_code(), 2);
}

TEST(PluginCluster, ConcurrencyIsBounded) {
  FakeKubectl kubectl;
  kubectl.delay = 30ms;
  std::vector<NodeTarget> targets;
  for (int i = 0; i < 12; ++i) {
    AgentPod pod{.namespace_name = "istio-system", .name = "ad-" + std::to_string(i)};
    targets.push_back({.node = "n" + std::to_string(i), .agent = pod});
  }
  PluginOptions options;
  options.concurrency = 3;
  size_t last_done = 0;
  const auto answers =
      ExecOnAgents(kubectl, options, targets, {"true"}, [&](size_t done, size_t total) {
        EXPECT_EQ(total, 12u);
        EXPECT_EQ(done, last_done + 1);
        last_done = done;
      });
  EXPECT_EQ(answers.size(), 12u);
  EXPECT_EQ(last_done, 12u);
  EXPECT_EQ(kubectl.max_running.load(), 3);
  ASSERT_EQ(kubectl.calls.size(), 12u);
  const std::vector<std::string> first = kubectl.calls[0];
  EXPECT_EQ(std::vector<std::string>(first.begin(), first.begin() + 2),
            (std::vector<std::string>{"exec", "-n"}));
}

TEST(RunProcess, OutputExitCodeAndDeadline) {
  ProcessOutput out = RunProcess({.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"}});
  EXPECT_EQ(out.out, "out\n");
  EXPECT_EQ(out.err, "err\n");
  EXPECT_EQ(out.exit_code, 3);
  EXPECT_FALSE(out.timed_out);

  const auto start = std::chrono::steady_clock::now();
  out = RunProcess({.argv = {"sleep", "30"}, .timeout = 200ms});
  EXPECT_TRUE(out.timed_out);
  EXPECT_EQ(out.signal, SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);

  // Closes its output but does not exit: the deadline still holds.
  out = RunProcess({.argv = {"sh", "-c", "exec >&- 2>&-; sleep 30"}, .timeout = 200ms});
  EXPECT_TRUE(out.timed_out);

  out = RunProcess({.argv = {"/nonexistent/kubectl"}});
  EXPECT_FALSE(out.spawn_error.empty());

  out = RunProcess({.argv = {"sh", "-c", "head -c 100000 /dev/zero"}, .max_output = 1000});
  EXPECT_TRUE(out.truncated);
  EXPECT_EQ(out.out.size(), 1000u);
  EXPECT_EQ(out.exit_code, 0);
}

// The krew manifest installs this release: its version and archive URLs follow CMake's.
TEST(KrewManifest, FollowsTheProjectVersion) {
  std::ifstream in(std::string(AD_SOURCE_DIR) + "/deploy/krew/ambient-doctor.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string manifest = text.str();
  const std::string version = std::string("v") + AgentVersion();
  EXPECT_NE(manifest.find("\n  version: " + version + "\n"), std::string::npos) << manifest;
  size_t uris = 0;
  for (size_t at = manifest.find("uri: "); at != std::string::npos;
       at = manifest.find("uri: ", at + 1)) {
    ++uris;
    const std::string uri = manifest.substr(at, manifest.find('\n', at) - at);
    EXPECT_NE(uri.find("/" + version + "/ambient-doctor-" + version + "-linux-"), std::string::npos)
        << uri;
  }
  EXPECT_EQ(uris, 2u);  // linux/amd64 and linux/arm64
  EXPECT_NE(manifest.find("bin: ambient-doctor"), std::string::npos);
}

}  // namespace
}  // namespace ad::cli
