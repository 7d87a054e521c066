// The kubectl plugin: `kubectl ambient-doctor status | explain pod | capture` (this binary
// installed as kubectl-ambient_doctor, or `ambient-doctor kubectl ...`). Every node's agent is
// asked through kubectl itself (`kubectl exec` into the agent pods), so the user's kubeconfig,
// contexts and auth plugins apply and nothing else needs network access to the nodes.
#include "cli/plugin_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/agent_version.h"
#include "capture/capture.h"
#include "cli/command_common.h"
#include "cli/plugin_cluster.h"
#include "cli/report_render.h"
#include "report/report_policy.h"

namespace ad::cli {
namespace {

constexpr const char* kPluginUsage =
    R"(kubectl ambient-doctor: every node's ambient-doctor agent in one command, through kubectl.

Usage: kubectl ambient-doctor <command> [flags]
       ambient-doctor kubectl <command> [flags]   (the same, without the kubectl-ambient_doctor link)

Commands:
  status       One table: every node's agent version, pods ambient / not enrolled, findings by
               severity, ZDS state and oldest open critical finding; nodes that could not be
               asked are named with the reason (exit 0 healthy, 1 findings at warning or above,
               2 a node could not be judged).
  explain pod  explain pod NAME -n NAMESPACE (or NAMESPACE/NAME): finds the pod's node and shows
               that node agent's story of the pod, as `ambient-doctor explain pod` does there.
  capture      One capture per node and the status table, in DIR and DIR.tar (-o DIR).
  version      Print the plugin's version.

Transport: kubectl (the current context, or --context and --kubeconfig): `kubectl get pods` of
the agent DaemonSet, then `kubectl exec` into each agent pod. Needs list on pods in the agents'
namespace, create on pods/exec there, and get on the pod explained (list on nodes to name the
nodes without an agent pod).

Flags of every command:
)";

// The plugin's flags.
struct PluginConfig {
  PluginOptions cluster;
  KubectlOptions kubectl;
  std::string output = "table";
  std::string timeout = "30s";
  std::string color = "auto";
  std::string pod_namespace;  // explain pod: -n
};

// Without `output_format` (capture: -o is its directory), no -o FORMAT.
void AddPluginFlags(FlagSet& flags, PluginConfig& config, bool output_format = true) {
  flags.Add({.name = "context",
             .value_name = "NAME",
             .default_text = "kubectl's current context",
             .help = "The kubeconfig context to use (passed to every kubectl call)."},
            &config.kubectl.context);
  flags.Add({.name = "kubeconfig",
             .value_name = "FILE",
             .default_text = "kubectl's ($KUBECONFIG, ~/.kube/config)",
             .help = "The kubeconfig file (passed to every kubectl call)."},
            &config.kubectl.kubeconfig);
  flags.Add(
      {.name = "kubectl", .value_name = "PATH", .help = "The kubectl binary (looked up in PATH)."},
      &config.kubectl.binary);
  flags.Add({.name = "agent-namespace",
             .value_name = "NAMESPACE",
             .help = "The namespace of the agent DaemonSet's pods."},
            &config.cluster.agent_namespace);
  flags.Add({.name = "selector",
             .short_name = 'l',
             .value_name = "LABELS",
             .help = "The label selector of the agent pods."},
            &config.cluster.selector);
  flags.Add({.name = "container",
             .value_name = "NAME",
             .help = "The agent container of those pods (kubectl exec -c)."},
            &config.cluster.container);
  flags.Add({.name = "node-selector",
             .value_name = "LABELS",
             .help = "The nodes that should run an agent (the DaemonSet's nodeSelector); a node "
                     "among them without an agent pod is a failed row. \"\" lists every node."},
            &config.cluster.node_selector);
  flags.Add({.name = "agent-config",
             .value_name = "PATH",
             .help = "The agent's flags file inside its container, passed as --config to the "
                     "command run there (it asks the agent's daemon, and scans as the daemon does "
                     "when that does not answer); \"\" passes none."},
            &config.cluster.agent_config);
  flags.Add({.name = "concurrency", .value_name = "N", .help = "Nodes asked at once."},
            &config.cluster.concurrency);
  flags.Add({.name = "timeout",
             .value_name = "DURATION",
             .help = "How long each kubectl call (one node's exec, a list) may take before it is "
                     "killed and the node counts as failed."},
            &config.timeout);
  if (output_format) {
    flags.Add({.name = "output",
               .short_name = 'o',
               .value_name = "FORMAT",
               .help = "Output format: table or json (status: ambient-doctor.cluster-status/v1; "
                       "explain pod: ambient-doctor.pod/v1)."},
              &config.output);
  }
  flags.Add({.name = "color",
             .value_name = "WHEN",
             .help = "Colour: auto (only on a TTY), always, never."},
            &config.color);
}

std::string PluginUsage() {
  PluginConfig config;
  FlagSet flags("kubectl", "<command> [flags]", "");
  AddPluginFlags(flags, config);
  flags.Add({.name = "namespace",
             .short_name = 'n',
             .value_name = "NAMESPACE",
             .default_text = "the context's namespace",
             .help = "explain pod: the pod's namespace."},
            &config.pod_namespace);
  const std::string usage = flags.Usage();
  return kPluginUsage + usage.substr(usage.find("Flags:\n") + 7);
}

// Parses the flags; the exit code when the command should end now.
std::optional<int> ParsePluginFlags(FlagSet& flags, const std::vector<std::string>& args,
                                    PluginConfig& config) {
  if (auto rc = ParseOrExit(flags, args, nullptr, config.output)) return rc;
  const std::optional<int64_t> timeout = PositiveDuration("timeout", config.timeout, "30s");
  if (!timeout) return kExitScanFailed;
  config.cluster.timeout = std::chrono::milliseconds(*timeout);
  if (config.cluster.concurrency < 1) {
    std::fprintf(stderr, "kubectl ambient-doctor: --concurrency needs a number of at least 1\n");
    return kExitScanFailed;
  }
  config.cluster.context = config.kubectl.context;
  return std::nullopt;
}

// "asking agents: 3/10 nodes" on a TTY, rewritten in place and erased at the end.
class ProgressLine {
 public:
  ProgressLine() : tty_(::isatty(STDERR_FILENO) != 0) {}
  ~ProgressLine() {
    if (tty_ && shown_) std::fputs("\r\033[K", stderr);
  }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void Update(size_t done, size_t total) {
    if (!tty_) return;
    std::fprintf(stderr, "\r\033[Kasking agents: %zu/%zu nodes", done, total);
    std::fflush(stderr);
    shown_ = true;
  }

 private:
  bool tty_;
  bool shown_ = false;
};

int RunStatus(const std::vector<std::string>& args) {
  FlagSet flags("kubectl status", "[flags]",
                "Every node's agent in one table, through kubectl: lists the agent pods, runs "
                "`ambient-doctor report -o json` in each (kubectl exec, --concurrency at once, "
                "each within --timeout) and puts one row per node. Nodes that could not be asked "
                "stay in the table with the reason.");
  PluginConfig config;
  AddPluginFlags(flags, config);
  if (auto rc = ParsePluginFlags(flags, args, config)) return *rc;
  std::unique_ptr<Kubectl> kubectl = MakeKubectl(config.kubectl);
  Result<AgentDirectory> directory = FindAgents(*kubectl, config.cluster);
  if (!directory.ok()) {
    std::fprintf(stderr, "kubectl ambient-doctor: %s\n", directory.error().message.c_str());
    return kExitScanFailed;
  }
  const std::vector<NodeTarget>& nodes = directory->nodes;
  const auto asked = static_cast<size_t>(std::count_if(
      nodes.begin(), nodes.end(), [](const NodeTarget& t) { return t.failure.empty(); }));
  if (std::none_of(nodes.begin(), nodes.end(),
                   [](const NodeTarget& t) { return t.agent.has_value(); })) {
    std::fprintf(stderr,
                 "kubectl ambient-doctor: no agent pods in namespace %s with labels %s (is "
                 "ambient-doctor deployed? see --agent-namespace and --selector)\n",
                 config.cluster.agent_namespace.c_str(), config.cluster.selector.c_str());
    if (nodes.empty()) return kExitScanFailed;
  }
  std::vector<NodeAnswer> answers;
  {
    ProgressLine progress;
    progress.Update(0, asked);
    answers = ExecOnAgents(*kubectl, config.cluster, directory->nodes,
                           AgentCommand(config.cluster, {"report", "-o", "json"}),
                           [&](size_t done, size_t total) { progress.Update(done, total); });
  }
  const pb::ClusterStatus status =
      BuildClusterStatus(*directory, answers, config.cluster, NowUnixMs());
  if (config.output == "json") {
    std::fputs(RenderClusterStatusJson(status).c_str(), stdout);
    for (const pb::NodeStatus& row : status.nodes()) {
      if (row.state() == "reported") continue;
      std::fprintf(stderr, "kubectl ambient-doctor: node %s: %s: %s\n", row.node().c_str(),
                   row.failure().c_str(), row.failure_message().c_str());
    }
  } else {
    std::fputs(RenderClusterStatusTable(status, UseColor(config.color)).c_str(), stdout);
  }
  return status.exit_code();
}

// The pod's placement from `kubectl get pod`; nullopt after explaining on stderr.
std::optional<PodPlacement> LocatePod(Kubectl& kubectl, const PluginConfig& config,
                                      const std::string& pod) {
  std::string name = pod;
  std::string namespace_name = config.pod_namespace;
  bool fits = !pod.empty();
  if (const size_t slash = pod.find('/'); slash != std::string::npos) {
    namespace_name = pod.substr(0, slash);
    name = pod.substr(slash + 1);
    fits = !namespace_name.empty() && !name.empty() && name.find('/') == std::string::npos &&
           (config.pod_namespace.empty() || config.pod_namespace == namespace_name);
  }
  if (!fits) {
    std::fprintf(stderr,
                 "kubectl ambient-doctor explain: give the pod as NAME (-n NAMESPACE) or as "
                 "NAMESPACE/NAME (got \"%s\"%s)\n",
                 pod.c_str(),
                 config.pod_namespace.empty() ? "" : (", -n " + config.pod_namespace).c_str());
    return std::nullopt;
  }
  std::vector<std::string> get = {"get", "pod", name, "-o", "json"};
  // Without a namespace kubectl uses the context's, as `kubectl get pod` does.
  if (!namespace_name.empty()) get.insert(get.begin() + 2, {"-n", namespace_name});
  const ProcessOutput out = kubectl.Run(get, config.cluster.timeout);
  if (out.timed_out || out.exit_code != 0) {
    std::fprintf(stderr, "kubectl ambient-doctor: %s\n",
                 out.timed_out              ? "kubectl get pod: no answer within the timeout"
                 : !out.spawn_error.empty() ? ("cannot run kubectl: " + out.spawn_error).c_str()
                                            : KubectlMessage(out.err).c_str());
    return std::nullopt;
  }
  Result<PodPlacement> placement = ParsePodPlacement(out.out);
  if (!placement.ok()) {
    std::fprintf(stderr, "kubectl ambient-doctor: %s\n", placement.error().message.c_str());
    return std::nullopt;
  }
  if (placement->node.empty()) {
    std::fprintf(stderr,
                 "kubectl ambient-doctor: pod %s/%s is not scheduled to a node yet "
                 "(spec.nodeName is empty)\n",
                 placement->namespace_name.c_str(), placement->name.c_str());
    return std::nullopt;
  }
  return std::move(placement).value();
}

int RunExplainPod(const std::string& pod, const std::vector<std::string>& args) {
  FlagSet flags("kubectl explain", "pod NAME -n NAMESPACE [flags]",
                "Finds the pod's node (kubectl get pod), the agent pod on that node, and shows "
                "that agent's story of the pod (`ambient-doctor explain pod NAMESPACE/NAME` run "
                "there with kubectl exec), with its exit code.");
  PluginConfig config;
  AddPluginFlags(flags, config);
  flags.Add({.name = "namespace",
             .short_name = 'n',
             .value_name = "NAMESPACE",
             .default_text = "the context's namespace",
             .help = "The pod's namespace."},
            &config.pod_namespace);
  if (auto rc = ParsePluginFlags(flags, args, config)) return *rc;
  std::unique_ptr<Kubectl> kubectl = MakeKubectl(config.kubectl);
  const std::optional<PodPlacement> placement = LocatePod(*kubectl, config, pod);
  if (!placement) return kExitScanFailed;
  const std::string pod_name = placement->namespace_name + "/" + placement->name;
  Result<NodeTarget> target = FindAgentOnNode(*kubectl, config.cluster, placement->node);
  if (!target.ok()) {
    std::fprintf(stderr, "kubectl ambient-doctor: %s\n", target.error().message.c_str());
    return kExitScanFailed;
  }
  if (!target->failure.empty()) {
    std::fprintf(stderr, "kubectl ambient-doctor: pod %s runs on node %s: %s\n", pod_name.c_str(),
                 placement->node.c_str(), target->failure_message.c_str());
    return kExitScanFailed;
  }
  const ProcessOutput out = kubectl->Run(
      ExecArgs(config.cluster, *target->agent,
               AgentCommand(config.cluster, {"explain", "pod", pod_name, "-o", "json"})),
      config.cluster.timeout);
  pb::PodReport story;
  if (const auto failure = ReadAnswer(out, "ambient-doctor.pod/", story)) {
    std::fprintf(stderr, "kubectl ambient-doctor: node %s (agent pod %s/%s): %s: %s\n",
                 placement->node.c_str(), target->agent->namespace_name.c_str(),
                 target->agent->name.c_str(), failure->failure.c_str(), failure->message.c_str());
    return kExitScanFailed;
  }
  if (config.output == "json") {
    std::fputs(RenderPodJson(story).c_str(), stdout);
  } else {
    std::fputs(RenderPodText(story, UseColor(config.color)).c_str(), stdout);
  }
  return PodExitCode(story);
}

// One node's capture written as DIR/NODE.capture once it decodes; the failure otherwise.
std::optional<std::string> KeepNodeCapture(const std::string& dir, const NodeTarget& target,
                                           const NodeAnswer& answer) {
  if (!target.failure.empty()) return target.failure + ": " + target.failure_message;
  const ProcessOutput& out = answer.output;
  if (out.timed_out) return "timeout: no capture within --timeout";
  if (!out.spawn_error.empty()) return "exec_failed: " + out.spawn_error;
  Result<capture::Capture> decoded = capture::Decode(out.out);
  if (!decoded.ok()) {
    return (out.exit_code != 0 ? "exec_failed: " + KubectlMessage(out.err)
                               : "not_a_capture: " + decoded.error().message);
  }
  const Status written = WriteFileAtomically(dir + "/" + target.node + ".capture", out.out);
  if (!written.ok()) return "write_failed: " + written.error().message;
  return std::nullopt;
}

int RunClusterCapture(const std::vector<std::string>& args) {
  FlagSet flags("kubectl capture", "-o DIR [flags]",
                "One capture per node (`ambient-doctor capture -o -` in each agent, through "
                "kubectl exec) into DIR/NODE.capture, the cluster's status table as "
                "DIR/cluster-status.json, and DIR.tar holding both (tar(1)). Judge a node's "
                "capture anywhere with `ambient-doctor report --from DIR/NODE.capture`.");
  PluginConfig config;
  AddPluginFlags(flags, config, /*output_format=*/false);
  std::string dir;
  bool redact_ips = false;
  flags.Add({.name = "output",
             .short_name = 'o',
             .value_name = "DIR",
             .help = "The directory to write (created; files of the same names are replaced)."},
            &dir);
  flags.Add({.name = "redact-ips",
             .help = "Each agent maps pod and node IPs to stand-ins (ambient-doctor capture "
                     "--redact-ips)."},
            &redact_ips);
  if (auto rc = ParsePluginFlags(flags, args, config)) return *rc;
  std::error_code error;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty() || (std::filesystem::create_directories(dir, error), error)) {
    std::fprintf(stderr, "kubectl ambient-doctor capture: -o DIR: %s\n",
                 dir.empty() ? "say where to write the captures" : error.message().c_str());
    return kExitScanFailed;
  }
  std::unique_ptr<Kubectl> kubectl = MakeKubectl(config.kubectl);
  Result<AgentDirectory> directory = FindAgents(*kubectl, config.cluster);
  if (!directory.ok()) {
    std::fprintf(stderr, "kubectl ambient-doctor: %s\n", directory.error().message.c_str());
    return kExitScanFailed;
  }
  std::vector<std::string> words = {"capture", "-o", "-"};
  if (redact_ips) words.push_back("--redact-ips");
  std::vector<NodeAnswer> captures, reports;
  {
    ProgressLine progress;
    captures = ExecOnAgents(*kubectl, config.cluster, directory->nodes,
                            AgentCommand(config.cluster, words),
                            [&](size_t done, size_t total) { progress.Update(done, total); });
    reports = ExecOnAgents(*kubectl, config.cluster, directory->nodes,
                           AgentCommand(config.cluster, {"report", "-o", "json"}));
  }
  int failed = 0;
  for (size_t i = 0; i < directory->nodes.size(); ++i) {
    const NodeTarget& target = directory->nodes[i];
    if (auto failure = KeepNodeCapture(dir, target, captures[i])) {
      std::fprintf(stderr, "kubectl ambient-doctor capture: node %s: %s\n", target.node.c_str(),
                   failure->c_str());
      ++failed;
    }
  }
  const pb::ClusterStatus status =
      BuildClusterStatus(*directory, reports, config.cluster, NowUnixMs());
  if (Status written =
          WriteFileAtomically(dir + "/cluster-status.json", RenderClusterStatusJson(status));
      !written.ok()) {
    std::fprintf(stderr, "kubectl ambient-doctor capture: %s\n", written.error().message.c_str());
    ++failed;
  }
  std::fputs(RenderClusterStatusTable(status, UseColor(config.color)).c_str(), stdout);
  const std::filesystem::path path(dir);
  const ProcessOutput tar =
      RunProcess({.argv = {"tar", "-cf", dir + ".tar", "-C",
                           path.parent_path().empty() ? "." : path.parent_path().string(),
                           path.filename().string()}});
  if (tar.exit_code != 0) {
    std::fprintf(stderr, "kubectl ambient-doctor capture: tar: %s (the directory %s is complete)\n",
                 FirstLine(tar.err + tar.spawn_error).c_str(), dir.c_str());
  }
  std::fprintf(stderr, "kubectl ambient-doctor capture: %zu of %zu node(s) captured in %s%s\n",
               directory->nodes.size() - static_cast<size_t>(failed), directory->nodes.size(),
               dir.c_str(), tar.exit_code == 0 ? (" and " + dir + ".tar").c_str() : "");
  return failed > 0 ? kExitScanFailed : status.exit_code();
}

}  // namespace

int RunKubectlPlugin(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(PluginUsage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? kExitScanFailed : 0;
  }
  const std::string& command = args[0];
  if (command == "status") return RunStatus({args.begin() + 1, args.end()});
  if (command == "explain") {
    if (args.size() >= 2 && (args[1] == "--help" || args[1] == "-h")) {
      return RunExplainPod("", {"--help"});
    }
    if (args.size() < 3 || args[1] != "pod" || args[2].starts_with("-")) {
      std::fprintf(stderr,
                   "kubectl ambient-doctor explain: usage: explain pod NAME -n NAMESPACE "
                   "[flags] (or explain pod NAMESPACE/NAME)\n");
      return kExitScanFailed;
    }
    return RunExplainPod(args[2], {args.begin() + 3, args.end()});
  }
  if (command == "capture") return RunClusterCapture({args.begin() + 1, args.end()});
  if (command == "version" || command == "--version") {
    std::printf("kubectl ambient-doctor %s\n", AgentVersionText().c_str());
    return 0;
  }
  std::fprintf(stderr, "kubectl ambient-doctor: unknown command \"%s\"\n\n%s", command.c_str(),
               PluginUsage().c_str());
  return kExitScanFailed;
}

}  // namespace ad::cli
