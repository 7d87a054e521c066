#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "api/report_proto.h"
#include "cli/command_common.h"
#include "cli/report_render.h"
#include "report/report_policy.h"

namespace ad::cli {

namespace {

// The flags of `report`.
struct ReportConfig {
  ScanConfig scan;
  ClientConfig client;
  bool istio_only = false;
  std::string pod;            // --pod: one pod's story instead of the node's report
  std::string pod_namespace;  // -n
};

int PrintReport(const pb::Report& report, const ReportConfig& config) {
  if (config.scan.common.output == "json") {
    std::fputs(RenderReportJson(report).c_str(), stdout);
  } else {
    RenderOptions render;
    render.color = UseColor(config.scan.color);
    render.show_all_netns = !config.istio_only;
    std::fputs(RenderReportTable(report, render).c_str(), stdout);
  }
  return ReportExitCode(report);
}

int RunReportCommand(const std::vector<std::string>& args, const std::string* pod_arg,
                     const std::string& command) {
  FlagSet flags(command, pod_arg != nullptr ? "pod NAMESPACE/NAME [flags]" : "[flags]",
                "Asks the node daemon (serve) on --api-socket for its latest report, with finding "
                "history (first/last seen, recently resolved; ZDS hand-offs aged into "
                "ZDS_STALL). Without a daemon that answers, with --local, or with scan-scope "
                "flags on the command line (--netns-dir, --netns-match, --no-zds, --lab, ...; a "
                "--config file counts as the daemon's own flags), scans every network "
                "namespace of the node in-process instead (iptables-legacy, iptables-nft and "
                "nftables; IPv4 and IPv6; policy routes), judges each against Istio's ambient "
                "rule sets, and cross-checks the istio-cni -> ztunnel (ZDS) hand-off with the "
                "kernel's sockets, process fds, ztunnel's admin view and CRI. The second line of "
                "the table (origin in JSON) says which it did and why. Scan-scope flags together "
                "with an explicit --api-socket are refused.");
  ReportConfig config;
  AddScanFlags(flags, config.scan);
  AddClientFlags(flags, config.client);
  AddFromFlag(flags, config.scan.layers);
  flags.Add({.name = "istio-only", .help = "Hide netns without Istio state and without findings."},
            &config.istio_only);
  flags.Add({.name = "pod",
             .value_name = "NAMESPACE/NAME",
             .help = "One pod's whole story on this node instead of the node's report (as "
                     "`explain pod`): desired state and why, netns pairing, rules per backend, "
                     "ZDS hand-off, listeners, recent flows, findings with fixes, a verdict. Exit "
                     "2 when the pod runs on another node (named) or does not exist."},
            &config.pod);
  flags.Add({.name = "namespace",
             .short_name = 'n',
             .value_name = "NAMESPACE",
             .help = "The namespace of --pod NAME."},
            &config.pod_namespace);
  if (auto rc = ParseScanCommand(flags, args, config.scan)) return *rc;
  if (pod_arg != nullptr) config.pod = *pod_arg;
  if (!config.pod.empty() || !config.pod_namespace.empty()) {
    const std::optional<PodQuery> query = ParsePodQuery(config.pod, config.pod_namespace);
    if (!query) {
      std::fprintf(stderr,
                   "ambient-doctor %s: give the pod as NAMESPACE/NAME or as NAME with -n "
                   "NAMESPACE (got \"%s\"%s)\n",
                   command.c_str(), config.pod.c_str(),
                   config.pod_namespace.empty() ? "" : (", -n " + config.pod_namespace).c_str());
      return kExitScanFailed;
    }
    return RunPodStory(config.scan, config.client, flags, *query, command);
  }
  DaemonChoice daemon;
  if (!config.scan.layers.capture) daemon = ChooseDaemon(flags, config.client, "report");
  if (daemon.refused) return kExitScanFailed;
  if (daemon.client) {
    Result<pb::Report> answer = daemon.client->GetReport();
    if (answer.ok()) {
      pb::Report report = std::move(answer).value();
      pb::ReportOrigin* origin = report.mutable_origin();
      origin->set_source("daemon");
      origin->set_api_socket(daemon.socket);
      origin->set_age_ms(static_cast<double>(std::max<int64_t>(
          0, NowUnixMs() - static_cast<int64_t>(report.node().taken_at_unix_ms()))));
      return PrintReport(report, config);
    }
    daemon.fallback_reason = answer.error().message;
    daemon.daemon_failed = true;
  }
  if (!config.scan.layers.capture) LogFallback(daemon, "scanning");
  const LocalScan scan = ScanLocally(config.scan);
  const EngineStep& step = scan.step;
  if (!step.usable) {
    ExplainUnusableScan(step.snapshot);
    return kExitScanFailed;
  }
  const bool aged = ReplaysDaemonHistory(config.scan);  // first-seen times as the daemon had them
  pb::Report report = api::BuildReport(
      step.snapshot, step.analysis,
      aged ? api::ReportHistory{.finding_records = &step.finding_records} : api::ReportHistory{},
      step.desired.get());
  SetLocalOrigin(config.scan, daemon, *report.mutable_origin());
  return PrintReport(report, config);
}

}  // namespace

int RunReport(const std::vector<std::string>& args) {
  return RunReportCommand(args, nullptr, "report");
}

int RunReportForPod(const std::string& pod, const std::vector<std::string>& args,
                    const std::string& command) {
  return RunReportCommand(args, &pod, command);
}

}  // namespace ad::cli
