// `capture -o FILE`: everything the analysis consumed on this node, in one file that `report
// --from`, `explain pod --from` judge anywhere (capture/capture.h).

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "base/agent_version.h"
#include "capture/capture.h"
#include "cli/command_common.h"
#include "report/report_policy.h"

namespace ad::cli {
namespace {

struct CaptureConfig {
  ScanConfig scan;
  ClientConfig client;
  std::string file;  // -o
  bool redact_ips = false;
};

// A capture to stdout (-), or to a file a reader never sees half written.
Status WriteFile(const std::string& path, const std::string& bytes) {
  if (path != "-") return WriteFileAtomically(path, bytes);
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size()) {
    return ErrnoError(SourceKind::kCapture, "stdout");
  }
  return {};
}

int Finish(const std::string& file, const std::string& bytes, const char* what, bool usable) {
  if (Status written = WriteFile(file, bytes); !written.ok()) {
    std::fprintf(stderr, "ambient-doctor capture: %s\n", written.error().message.c_str());
    return kExitScanFailed;
  }
  if (file != "-") {
    std::fprintf(stderr, "ambient-doctor capture: wrote %s (%zu bytes, %s)\n", file.c_str(),
                 bytes.size(), what);
  }
  return usable ? 0 : kExitScanFailed;
}

}  // namespace

int RunCapture(const std::vector<std::string>& args) {
  FlagSet flags("capture", "-o FILE [flags]",
                "Asks the node daemon (serve) on --api-socket for its latest scan, with its "
                "history (the ages of open conditions); without a daemon that answers, with "
                "--local or scan-scope flags, scans this node once (as `report --local`: every "
                "netns's rules in all "
                "backends, routes, listeners, sets, the ZDS socket observation and fd "
                "inventory, ztunnel's admin view, CRI, CNI config, nft userspace, and the "
                "Kubernetes objects of this node's pods when the API source is on) and writes "
                "it to one file, with the agent's version and scan flags. `report --from FILE` "
                "and `explain pod ... --from FILE` judge it anywhere, without root, and find "
                "what a report taken at that moment found. Secrets never enter it: no "
                "service-account token, no private key, ztunnel certificates only as the checks "
                "read them (subject, expiry). See docs/capture.md.");
  CaptureConfig config;
  AddScanFlags(flags, config.scan, /*output_format=*/false);
  AddClientFlags(flags, config.client);
  flags.Add({.name = "output",
             .short_name = 'o',
             .value_name = "FILE",
             .help = "Where to write the capture (gzip; - for stdout). Required."},
            &config.file);
  flags.Add({.name = "redact-ips",
             .help = "Replace pod and node IP addresses by stand-ins (198.18.0.0/15, "
                     "2001:db8::/32), the same one wherever an address occurs, so the capture "
                     "still judges the same. Loopback, link-local and Istio's fixed addresses, "
                     "and network prefixes such as 10.244.0.0/16, stay."},
            &config.redact_ips);
  if (auto rc = ParseScanCommand(flags, args, config.scan)) return *rc;
  if (config.file.empty()) {
    std::fprintf(stderr, "ambient-doctor capture: say where to write it: -o FILE (or -o -)\n");
    return kExitScanFailed;
  }
  DaemonChoice daemon = ChooseDaemon(flags, config.client, "capture");
  if (daemon.refused) return kExitScanFailed;
  if (daemon.client) {
    Result<std::string> bytes = daemon.client->GetCapture(config.redact_ips);
    if (bytes.ok()) return Finish(config.file, *bytes, "the daemon's latest scan", true);
    daemon.fallback_reason = bytes.error().message;
    daemon.daemon_failed = true;
  }
  LogFallback(daemon, "scanning");
  const std::vector<std::string> recorded = ReplayableScanFlags(config.scan.layers.layered_args);
  LocalScan local = ScanLocally(config.scan);
  if (!local.step.usable) ExplainUnusableScan(local.step.snapshot);
  capture::Capture taken;
  taken.manifest.agent_version = AgentVersion();
  taken.manifest.node_name = local.step.snapshot.node_name;
  taken.manifest.taken_at_unix_ms = local.step.snapshot.taken_at_unix_ms;
  taken.manifest.origin = "local";
  taken.manifest.agent_flags = recorded;
  taken.manifest.ips_redacted = config.redact_ips;
  taken.snapshot = std::move(local.step.snapshot);
  Result<std::string> bytes = capture::Encode(std::move(taken));
  if (!bytes.ok()) {
    std::fprintf(stderr, "ambient-doctor capture: %s\n", bytes.error().message.c_str());
    return kExitScanFailed;
  }
  return Finish(config.file, *bytes, "a local scan", local.step.usable);
}

}  // namespace ad::cli
