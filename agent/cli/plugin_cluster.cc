#include "cli/plugin_cluster.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "api/report_proto.h"
#include "cli/report_render.h"
#include "report/report_policy.h"

namespace ad::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::string Seconds(std::chrono::milliseconds timeout) {
  const int64_t ms = timeout.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

// kubectl's own failure in one line: its first stderr line, else how it ended.
std::string KubectlFailure(const ProcessOutput& out) {
  if (!out.spawn_error.empty()) return "cannot run kubectl: " + out.spawn_error;
  const std::string how = out.signal != 0 ? "killed by signal " + std::to_string(out.signal)
                                          : "exit " + std::to_string(out.exit_code);
  const std::string line = KubectlMessage(out.err);
  return line.empty() ? how + ", no message" : how + ": " + line;
}

// Which of a node's agent pods to ask: a running one not being deleted, the newest.
bool BetterAgent(const AgentPod& a, const AgentPod& b) {
  auto rank = [](const AgentPod& p) {
    return std::make_tuple(p.container_running && !p.deleting, p.phase == "Running", p.created);
  };
  return rank(a) > rank(b);
}

NodeTarget TargetFor(const std::string& node, const std::vector<AgentPod>& pods) {
  NodeTarget target{.node = node};
  const AgentPod* best = nullptr;
  for (const AgentPod& pod : pods) {
    if (pod.node == node && (best == nullptr || BetterAgent(pod, *best))) best = &pod;
  }
  if (best == nullptr) {
    target.failure = kNoAgent;
    target.failure_message = "no agent pod on this node";
    return target;
  }
  if (!best->container_running || best->deleting) {
    target.failure = kAgentNotRunning;
    target.failure_message = "agent pod " + best->namespace_name + "/" + best->name + " is " +
                             (best->deleting ? "terminating" : "not running") + " (phase " +
                             (best->phase.empty() ? "unknown" : best->phase) + ")";
  }
  target.agent = *best;
  return target;
}

std::string ZdsState(const pb::Node& node) {
  if (!node.zds_collected()) return "off";
  const pb::ZdsSocket& zds = node.zds();
  if (zds.listener_found()) return zds.accepted_size() > 0 ? "ok" : "no client";
  return zds.errors().empty() ? "no listener" : "unreadable";
}

// The oldest open critical finding, aged by the node's clock: opened at first seen (daemon
// history), else since; the node's "now" is its scan time plus the answer's age.
std::optional<pb::OldestCritical> OldestCritical(const pb::Report& report) {
  const double node_now = report.node().taken_at_unix_ms() + report.origin().age_ms();
  const pb::Finding* oldest = nullptr;
  double oldest_at = 0;
  for (const pb::Finding& f : report.findings()) {
    if (f.severity() != "critical") continue;
    const double at = f.has_first_seen_unix_ms() ? f.first_seen_unix_ms()
                      : f.has_since_unix_ms()    ? f.since_unix_ms()
                                                 : report.node().taken_at_unix_ms();
    if (oldest == nullptr || at < oldest_at) {
      oldest = &f;
      oldest_at = at;
    }
  }
  if (oldest == nullptr) return std::nullopt;
  pb::OldestCritical out;
  out.set_code(oldest->code());
  out.set_pod(oldest->pod());
  out.set_age_ms(std::max(0.0, node_now - oldest_at));
  out.set_summary(oldest->summary());
  return out;
}

void AddCounts(const pb::SeverityCounts& from, pb::SeverityCounts* to) {
  to->set_critical(to->critical() + from.critical());
  to->set_warning(to->warning() + from.warning());
  to->set_info(to->info() + from.info());
}

}  // namespace

Result<AgentDirectory> FindAgents(Kubectl& kubectl, const PluginOptions& options) {
  const ProcessOutput listed = kubectl.Run(
      {"get", "pods", "-n", options.agent_namespace, "-l", options.selector, "-o", "json"},
      options.timeout);
  if (listed.timed_out || listed.exit_code != 0) {
    return SourceError{SourceKind::kKubeApi,
                       "listing the agent pods (kubectl get pods -n " + options.agent_namespace +
                           " -l " + options.selector + ") failed: " +
                           (listed.timed_out ? "no answer within " + Seconds(options.timeout)
                                             : KubectlFailure(listed)),
                       EIO};
  }
  Result<std::vector<AgentPod>> pods = ParseAgentPods(listed.out, options.container);
  if (!pods.ok()) return pods.error();
  AgentDirectory directory;
  std::vector<std::string> names;
  std::vector<std::string> list_nodes = {"get", "nodes", "-o", "json"};
  if (!options.node_selector.empty())
    list_nodes.insert(list_nodes.end(), {"-l", options.node_selector});
  const ProcessOutput nodes = kubectl.Run(list_nodes, options.timeout);
  Result<std::vector<std::string>> node_names =
      nodes.exit_code == 0 && !nodes.timed_out
          ? ParseNodeNames(nodes.out)
          : Result<std::vector<std::string>>(SourceError{
                SourceKind::kKubeApi, nodes.timed_out ? "no answer" : KubectlFailure(nodes), EIO});
  if (node_names.ok()) {
    names = std::move(node_names).value();
  } else {
    directory.nodes_note = "nodes not listed (" + node_names.error().message +
                           "): a node without an agent pod is not shown";
  }
  for (const AgentPod& pod : *pods) {
    if (!pod.node.empty()) names.push_back(pod.node);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& node : names) directory.nodes.push_back(TargetFor(node, *pods));
  return directory;
}

Result<NodeTarget> FindAgentOnNode(Kubectl& kubectl, const PluginOptions& options,
                                   const std::string& node) {
  const ProcessOutput listed =
      kubectl.Run({"get", "pods", "-n", options.agent_namespace, "-l", options.selector,
                   "--field-selector", "spec.nodeName=" + node, "-o", "json"},
                  options.timeout);
  if (listed.timed_out || listed.exit_code != 0) {
    return SourceError{SourceKind::kKubeApi,
                       "listing the agent pod of node " + node + " failed: " +
                           (listed.timed_out ? "no answer within " + Seconds(options.timeout)
                                             : KubectlFailure(listed)),
                       EIO};
  }
  Result<std::vector<AgentPod>> pods = ParseAgentPods(listed.out, options.container);
  if (!pods.ok()) return pods.error();
  return TargetFor(node, *pods);
}

std::vector<std::string> AgentCommand(const PluginOptions& options,
                                      const std::vector<std::string>& words) {
  std::vector<std::string> command = {"ambient-doctor"};
  command.insert(command.end(), words.begin(), words.end());
  if (!options.agent_config.empty())
    command.insert(command.end(), {"--config", options.agent_config});
  return command;
}

std::vector<std::string> ExecArgs(const PluginOptions& options, const AgentPod& agent,
                                  const std::vector<std::string>& command) {
  std::vector<std::string> args = {
      "exec", "-n", agent.namespace_name, agent.name, "-c", options.container, "--"};
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

std::vector<NodeAnswer> ExecOnAgents(Kubectl& kubectl, const PluginOptions& options,
                                     const std::vector<NodeTarget>& targets,
                                     const std::vector<std::string>& command,
                                     const std::function<void(size_t, size_t)>& progress) {
  std::vector<NodeAnswer> answers(targets.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].agent && targets[i].failure.empty()) todo.push_back(i);
  }
  std::atomic<size_t> next{0};
  std::mutex progress_mu;
  size_t done = 0;
  auto work = [&] {
    for (size_t k = next++; k < todo.size(); k = next++) {
      const size_t i = todo[k];
      const auto start = Clock::now();
      answers[i].output =
          kubectl.Run(ExecArgs(options, *targets[i].agent, command), options.timeout);
      answers[i].elapsed_ms =
          std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      std::lock_guard lock(progress_mu);
      ++done;
      if (progress) progress(done, todo.size());
    }
  };
  const size_t workers =
      std::min(todo.size(), static_cast<size_t>(std::max(1, options.concurrency)));
  {
    std::vector<std::jthread> threads;
    for (size_t w = 0; w < workers; ++w) threads.emplace_back(work);
  }  // joined
  return answers;
}

std::optional<AnswerFailure> ReadAnswer(const ProcessOutput& output,
                                        const std::string& schema_prefix,
                                        google::protobuf::Message& document) {
  if (!output.spawn_error.empty()) return AnswerFailure{kExecFailed, KubectlFailure(output)};
  if (output.timed_out) {
    return AnswerFailure{kTimeout, "no answer within the timeout (kubectl exec killed)"};
  }
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;  // a newer agent's additions
  const auto parsed = google::protobuf::util::JsonStringToMessage(output.out, &document, parse);
  std::string schema;
  if (parsed.ok()) {
    const auto* field = document.GetDescriptor()->FindFieldByName("schema");
    if (field != nullptr) schema = document.GetReflection()->GetString(document, field);
    if (schema.starts_with(schema_prefix)) return std::nullopt;
  }
  if (output.exit_code != 0) return AnswerFailure{kExecFailed, KubectlFailure(output)};
  // protobuf's parse error quotes the input over several lines: its first line is enough.
  std::string why = !parsed.ok() ? "not JSON (" + FirstLine(std::string(parsed.message())) + ")"
                                 : "schema \"" + schema + "\", not " + schema_prefix + "*";
  const std::string start = FirstLine(output.out);
  if (output.truncated) why += ", output too large";
  return AnswerFailure{
      kNotAReport, "answer is not a report: " + why +
                       (start.empty() ? ", empty output" : "; it begins: " + start.substr(0, 80))};
}

pb::NodeStatus NodeStatusFromReport(const pb::Report& report) {
  pb::NodeStatus row;
  row.set_state("reported");
  row.set_pods_ambient(report.summary().by_mode().ambient());
  uint32_t not_enrolled = 0;
  for (const pb::Finding& f : report.findings()) not_enrolled += f.code() == "POD_NOT_ENROLLED";
  row.set_pods_not_enrolled(not_enrolled);
  *row.mutable_findings() = report.summary().findings();
  row.set_zds(ZdsState(report.node()));
  if (auto oldest = OldestCritical(report)) *row.mutable_oldest_critical() = *oldest;
  row.set_report_source(report.origin().source());
  if (report.origin().source() == "local") {
    row.set_fallback_reason(report.origin().fallback_reason());
  }
  row.set_exit_code(ReportExitCode(report));
  return row;
}

pb::ClusterStatus BuildClusterStatus(const AgentDirectory& directory,
                                     const std::vector<NodeAnswer>& answers,
                                     const PluginOptions& options, int64_t now_unix_ms) {
  pb::ClusterStatus status;
  status.set_schema(kClusterStatusSchema);
  status.set_context(options.context);
  status.set_agent_namespace(options.agent_namespace);
  status.set_selector(options.selector);
  status.set_taken_at_unix_ms(static_cast<double>(now_unix_ms));
  status.set_nodes_note(directory.nodes_note);
  int worst = directory.nodes.empty() ? kExitScanFailed : kExitHealthy;
  pb::ClusterTotals* totals = status.mutable_totals();
  for (size_t i = 0; i < directory.nodes.size(); ++i) {
    const NodeTarget& target = directory.nodes[i];
    pb::NodeStatus row;
    std::optional<AnswerFailure> failure;
    if (!target.failure.empty()) {
      failure = AnswerFailure{target.failure, target.failure_message};
    } else {
      pb::Report report;
      failure = ReadAnswer(answers.at(i).output, "ambient-doctor.report/", report);
      if (failure && failure->failure == kTimeout) {
        failure->message =
            "no answer within " + Seconds(options.timeout) + " (kubectl exec killed)";
      }
      if (!failure) row = NodeStatusFromReport(report);
    }
    row.set_node(target.node);
    if (target.agent) {
      row.set_agent_pod(target.agent->namespace_name + "/" + target.agent->name);
      row.set_agent_image(target.agent->image);
      row.set_agent_version(ImageTag(target.agent->image));
    }
    row.set_elapsed_ms(i < answers.size() ? answers[i].elapsed_ms : 0);
    if (failure) {
      row.set_state("failed");
      row.set_failure(failure->failure);
      row.set_failure_message(failure->message);
      row.set_exit_code(kExitScanFailed);
      totals->set_failed(totals->failed() + 1);
    } else {
      totals->set_reported(totals->reported() + 1);
      totals->set_pods_ambient(totals->pods_ambient() + row.pods_ambient());
      totals->set_pods_not_enrolled(totals->pods_not_enrolled() + row.pods_not_enrolled());
      AddCounts(row.findings(), totals->mutable_findings());
    }
    worst = std::max(worst, row.exit_code());
    *status.add_nodes() = std::move(row);
  }
  totals->set_nodes(static_cast<uint32_t>(directory.nodes.size()));
  status.set_exit_code(worst);
  return status;
}

namespace {

constexpr const char* kReset = "\033[0m";
constexpr const char* kBold = "\033[1m";
constexpr const char* kRed = "\033[31m";
constexpr const char* kYellow = "\033[33m";

std::string Paint(bool color, const char* code, const std::string& text) {
  return color ? code + text + kReset : text;
}

std::vector<std::string> RowCells(const pb::NodeStatus& row) {
  const std::string version = row.agent_version().empty() ? "-" : row.agent_version();
  if (row.state() != "reported") {
    return {row.node(), version, "-",
            "-",        "-",     "-",
            "-",        "-",     "FAILED " + row.failure() + ": " + row.failure_message()};
  }
  std::string oldest = "-";
  if (row.has_oldest_critical()) {
    const pb::OldestCritical& o = row.oldest_critical();
    oldest = o.code() + " " + FormatDuration(static_cast<int64_t>(o.age_ms())) +
             (o.pod().empty() ? "" : " (" + o.pod() + ")");
  }
  const pb::SeverityCounts& f = row.findings();
  return {row.node(),
          version,
          std::to_string(row.pods_ambient()),
          std::to_string(row.pods_not_enrolled()),
          std::to_string(f.critical()),
          std::to_string(f.warning()),
          std::to_string(f.info()),
          row.zds(),
          oldest};
}

// The colour of a row: red when it failed or has critical findings, yellow with warnings.
const char* RowColor(const pb::NodeStatus& row) {
  if (row.state() != "reported" || row.findings().critical() > 0) return kRed;
  if (row.findings().warning() > 0) return kYellow;
  return nullptr;
}

}  // namespace

std::string RenderClusterStatusTable(const pb::ClusterStatus& status, bool color) {
  std::vector<std::vector<std::string>> rows = {{"NODE", "VERSION", "AMBIENT", "NOT-ENROLLED",
                                                 "CRITICAL", "WARNING", "INFO", "ZDS",
                                                 "OLDEST CRITICAL"}};
  for (const pb::NodeStatus& row : status.nodes()) rows.push_back(RowCells(row));
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t k = 0; k + 1 < row.size(); ++k) widths[k] = std::max(widths[k], row[k].size());
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t k = 0; k + 1 < rows[r].size(); ++k) {
      line += rows[r][k] + std::string(widths[k] - rows[r][k].size() + 2, ' ');
    }
    line += rows[r].back();
    const char* paint = r == 0 ? kBold : RowColor(status.nodes(static_cast<int>(r - 1)));
    out += (paint != nullptr ? Paint(color, paint, line) : line) + "\n";
  }
  const pb::ClusterTotals& t = status.totals();
  out += "\n" + std::to_string(t.nodes()) + " node(s): " + std::to_string(t.reported()) +
         " reported, " + std::to_string(t.failed()) + " failed  ·  pods ambient " +
         std::to_string(t.pods_ambient()) + ", not enrolled " +
         std::to_string(t.pods_not_enrolled()) + "  ·  findings " +
         std::to_string(t.findings().critical()) + " critical, " +
         std::to_string(t.findings().warning()) + " warning, " +
         std::to_string(t.findings().info()) + " info\n";
  for (const pb::NodeStatus& row : status.nodes()) {
    if (row.report_source() == "local") {
      out += "note: " + row.node() + ": the agent's daemon did not answer, its pod scanned " +
             "locally (" + row.fallback_reason() + ")\n";
    }
  }
  if (!status.nodes_note().empty()) out += "note: " + status.nodes_note() + "\n";
  return out;
}

std::string RenderClusterStatusJson(const pb::ClusterStatus& status) { return api::ToJson(status); }

}  // namespace ad::cli
