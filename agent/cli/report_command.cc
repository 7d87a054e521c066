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

}  // namespace

int RunReport(const std::vector<std::string>& args) {
  FlagSet flags("report", "[flags]",
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
  flags.Add({.name = "istio-only", .help = "Hide netns without Istio state and without findings."},
            &config.istio_only);
  if (auto rc = ParseScanCommand(flags, args, config.scan)) return *rc;
  DaemonChoice daemon = ChooseDaemon(flags, config.client, "report");
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
  LogFallback(daemon, "scanning");
  if (::geteuid() != 0) {
    spdlog::warn("not running as root: entering other network namespaces will likely fail");
  }
  config.scan.engine.analysis.history_known = false;  // one step: nothing seen before
  Engine engine(std::move(config.scan.engine));
  const EngineStep step = engine.Step();
  if (!step.usable) {
    ExplainUnusableScan(step.snapshot);
    return kExitScanFailed;
  }
  pb::Report report = api::BuildReport(step.snapshot, step.analysis);
  pb::ReportOrigin* origin = report.mutable_origin();
  origin->set_source("local");
  origin->set_api_socket(daemon.socket);
  origin->set_fallback_reason(daemon.fallback_reason);
  return PrintReport(report, config);
}

}  // namespace ad::cli
