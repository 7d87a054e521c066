// `explain pod NAMESPACE/NAME` and `report --pod`: one pod's story on this node, from the daemon
// (GetPod) when it answers, else from a local scan with the Kubernetes API source.

#include <algorithm>
#include <cstdio>
#include <utility>

#include "api/kube_proto.h"
#include "api/report_proto.h"
#include "cli/command_common.h"
#include "cli/report_render.h"
#include "report/report_policy.h"

namespace ad::cli {
namespace {

int PrintPod(const pb::PodReport& pod, const ScanConfig& scan) {
  if (scan.common.output == "json") {
    std::fputs(RenderPodJson(pod).c_str(), stdout);
  } else {
    std::fputs(RenderPodText(pod, UseColor(scan.color)).c_str(), stdout);
  }
  return PodExitCode(pod);
}

// A local scan judged against the API source, then the pod's story from it.
int LocalPod(ScanConfig& scan, const PodQuery& query, const DaemonChoice& daemon) {
  if (!scan.layers.capture) LogFallback(daemon, "scanning");
  const LocalScan local = ScanLocally(scan);
  const EngineStep& step = local.step;
  if (!step.usable) {
    ExplainUnusableScan(step.snapshot);
    return kExitScanFailed;
  }
  const bool aged = ReplaysDaemonHistory(scan);
  pb::PodReport pod =
      api::BuildPodReport(step.snapshot, step.analysis, step.desired.get(),
                          aged ? &step.finding_records : nullptr, query.namespace_name, query.name);
  if (pod.location() == "unknown" && !local.kube) {
    // A capture holds its node's pods only: nothing can be asked about the others.
    api::FillPodLocation(
        false, false, "",
        "not among the pods of node " + step.snapshot.node_name + " in this capture",
        step.snapshot.node_name, pod);
  } else if (pod.location() == "unknown") {
    const PodLocation where = local.kube->Locate(query.namespace_name, query.name);
    const std::string node =
        pod.kubernetes().node().empty() ? step.snapshot.node_name : pod.kubernetes().node();
    api::FillPodLocation(where.found, where.not_found, where.node_name, where.error, node, pod);
  }
  SetLocalOrigin(scan, daemon, *pod.mutable_origin());
  return PrintPod(pod, scan);
}

}  // namespace

std::optional<PodQuery> ParsePodQuery(const std::string& pod, const std::string& namespace_name) {
  PodQuery query;
  if (api::SplitPodName(pod, query.namespace_name, query.name)) {
    if (!namespace_name.empty() && namespace_name != query.namespace_name) return std::nullopt;
    return query;
  }
  if (pod.empty() || pod.find('/') != std::string::npos || namespace_name.empty()) {
    return std::nullopt;
  }
  query.namespace_name = namespace_name;
  query.name = pod;
  return query;
}

int RunPodStory(ScanConfig& scan, const ClientConfig& client, const FlagSet& flags,
                const PodQuery& query, const std::string& command) {
  DaemonChoice daemon;
  if (!scan.layers.capture) daemon = ChooseDaemon(flags, client, command);
  if (daemon.refused) return kExitScanFailed;
  if (daemon.client) {
    Result<pb::PodReport> answer = daemon.client->GetPod(query.namespace_name, query.name);
    if (answer.ok()) {
      pb::PodReport pod = std::move(answer).value();
      pb::ReportOrigin* origin = pod.mutable_origin();
      origin->set_source("daemon");
      origin->set_api_socket(daemon.socket);
      origin->set_age_ms(static_cast<double>(
          std::max<int64_t>(0, NowUnixMs() - static_cast<int64_t>(pod.taken_at_unix_ms()))));
      return PrintPod(pod, scan);
    }
    daemon.fallback_reason = answer.error().message;
    daemon.daemon_failed = true;
  }
  return LocalPod(scan, query, daemon);
}

int RunExplain(const std::vector<std::string>& args) {
  // `explain pod NAMESPACE/NAME [flags]` or `explain pod NAME -n NAMESPACE [flags]`.
  if (args.empty() || args[0] != "pod" || args.size() < 2 || args[1].starts_with("-")) {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
      std::fputs(
          "Usage: ambient-doctor explain pod NAMESPACE/NAME [flags]\n\n"
          "Tells one pod's whole story on this node: whether it should be in the mesh and why "
          "(the label, annotation or setting that decided), its netns and how it was paired, "
          "the rules per backend, the ZDS hand-off, ztunnel's listeners, recent flows and every "
          "finding with its fix. Same flags as `report --pod` (see `report --help`).\n",
          stdout);
      return 0;
    }
    std::fprintf(stderr,
                 "ambient-doctor explain: usage: explain pod NAMESPACE/NAME [flags] (or explain "
                 "pod NAME -n NAMESPACE)\n");
    return kExitScanFailed;
  }
  std::vector<std::string> rest(args.begin() + 2, args.end());
  return RunReportForPod(args[1], rest, "explain");
}

}  // namespace ad::cli
