// The kubectl plugin's cluster logic, over the Kubectl interface: find the agent pod of every
// node, ask each (bounded parallelism, a deadline per node), read their answers into the report
// model, and put the nodes in one table (ambient-doctor.cluster-status/v1). Failed nodes stay in
// the result, named with the reason.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.pb.h"
#include "ambientdoctor/v1/cluster.pb.h"
#include "cli/plugin_kubectl.h"

namespace ad::cli {

namespace pb = ::ambientdoctor::v1;

inline constexpr const char* kClusterStatusSchema = "ambient-doctor.cluster-status/v1";

// Where the agents are and how they are asked (the plugin's flags).
struct PluginOptions {
  std::string agent_namespace = "istio-system";
  std::string selector = "app=ambient-doctor";  // the DaemonSet's pod label (deploy/base)
  std::string container = "ambient-doctor";
  // The nodes that should run an agent: the DaemonSet's nodeSelector (deploy/base).
  std::string node_selector = "kubernetes.io/os=linux";
  // The agent's flags file in its container (deploy/base's ConfigMap), given to the command run
  // there as --config so that it scans as the daemon does when the daemon does not answer; ""
  // gives none.
  std::string agent_config = "/etc/ambient-doctor/agent.flags";
  std::string context;  // for the JSON document only; kubectl gets it from KubectlOptions
  int concurrency = 10;
  std::chrono::milliseconds timeout{30000};  // per kubectl call
};

// Why a node could not be judged (NodeStatus.failure).
inline constexpr const char* kNoAgent = "no_agent";
inline constexpr const char* kAgentNotRunning = "agent_not_running";
inline constexpr const char* kExecFailed = "exec_failed";
inline constexpr const char* kTimeout = "timeout";
inline constexpr const char* kNotAReport = "not_a_report";

// A node and the agent pod that answers for it (or why none does).
struct NodeTarget {
  std::string node;
  std::optional<AgentPod> agent;  // the one to ask: running, not being deleted, newest
  std::string failure;            // kNoAgent or kAgentNotRunning when there is none to ask
  std::string failure_message;
};

struct AgentDirectory {
  std::vector<NodeTarget> nodes;  // by node name
  std::string nodes_note;         // why nodes without an agent pod may be missing
};

// Lists the agent pods (`get pods -n NS -l SELECTOR -o json`) and the nodes meant to run one
// (`get nodes -l NODE_SELECTOR -o json`; a refusal leaves only the agents' nodes, with a note). An
// error when the agent pods cannot be listed.
Result<AgentDirectory> FindAgents(Kubectl& kubectl, const PluginOptions& options);

// The agent pod on one node (`--field-selector spec.nodeName=NODE`), as a target.
Result<NodeTarget> FindAgentOnNode(Kubectl& kubectl, const PluginOptions& options,
                                   const std::string& node);

// What one node answered.
struct NodeAnswer {
  ProcessOutput output;
  double elapsed_ms = 0;
};

// Runs `kubectl exec -n NS POD -c CONTAINER -- COMMAND...` on every target that has an agent, at
// most `options.concurrency` at once, each with `options.timeout`. `progress(done, total)` is
// called (serialised) after each node. Answers are in the order of `targets`.
std::vector<NodeAnswer> ExecOnAgents(Kubectl& kubectl, const PluginOptions& options,
                                     const std::vector<NodeTarget>& targets,
                                     const std::vector<std::string>& command,
                                     const std::function<void(size_t, size_t)>& progress = {});

// `ambient-doctor WORDS... [--config AGENT_CONFIG]`: what runs in the agent container.
std::vector<std::string> AgentCommand(const PluginOptions& options,
                                      const std::vector<std::string>& words);

// `kubectl exec` argv words for one agent pod.
std::vector<std::string> ExecArgs(const PluginOptions& options, const AgentPod& agent,
                                  const std::vector<std::string>& command);

// Why a node's answer could not be used.
struct AnswerFailure {
  std::string failure;  // kExecFailed, kTimeout, kNotAReport
  std::string message;
};
// A node's answer read into `document` (a Report, a PodReport) whose `schema` field must start
// with `schema_prefix` ("ambient-doctor.report/"); the failure when it is not one (timeout, exec
// refused, garbage). A non-zero exit with a document is an answer: `report` exits 1 on findings.
std::optional<AnswerFailure> ReadAnswer(const ProcessOutput& output,
                                        const std::string& schema_prefix,
                                        google::protobuf::Message& document);

// The status document from the directory and the answers (ExecOnAgents' order). `now_unix_ms`
// stamps it.
pb::ClusterStatus BuildClusterStatus(const AgentDirectory& directory,
                                     const std::vector<NodeAnswer>& answers,
                                     const PluginOptions& options, int64_t now_unix_ms);
// One node's row from its report.
pb::NodeStatus NodeStatusFromReport(const pb::Report& report);

// The table: one row per node, failed nodes named with their reason, totals below.
std::string RenderClusterStatusTable(const pb::ClusterStatus& status, bool color);
std::string RenderClusterStatusJson(const pb::ClusterStatus& status);

}  // namespace ad::cli
