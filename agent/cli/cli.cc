#include "cli/cli.h"

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "analysis/analysis.h"
#include "api/api_server.h"
#include "api/report_proto.h"
#include "base/agent_version.h"
#include "base/thread_name.h"
#include "cli/flags.h"
#include "cli/flows_command.h"
#include "cli/report_render.h"
#include "cli/rules_render.h"
#include "client/api_client.h"
#include "daemon/bypass_feed.h"
#include "daemon/daemon.h"
#include "daemon/flow_monitor.h"
#include "engine/engine.h"
#include "flows/flow_joins.h"
#include "metrics/metrics_endpoint.h"
#include "model/json.h"
#include "report/finding_alerts.h"
#include "report/report_policy.h"
#include "scan/inspector.h"
#include "sources/netns/discovery.h"
#include "sources/netns/netns_workers.h"

namespace ad::cli {
namespace {

const char* const kVersion = AgentVersion();  // CMake PROJECT_VERSION (base/agent_version.h)

constexpr const char* kTopUsage =
    R"(ambient-doctor: is every pod on this node really in the Istio ambient mesh?

Usage: ambient-doctor <command> [flags]

Commands:
  report     Print the node's report: the daemon's (with history) when it answers on
             --api-socket, else a local scan of every network namespace (exit 0 healthy,
             1 findings at warning or above, 2 scan failed).
  watch      Print one line per finding opened or resolved: the daemon's stream, else
             periodic local rescans.
  serve      Run as the node daemon: scan at start and on an interval, keep finding history,
             log one line per change (the gRPC API and metrics attach to it).
  rules      Print the normalized netfilter rules and policy routes of one netns (read by the
             daemon when it answers, else locally; the same output).
  findings   List every finding code with its severity and meaning.
  version    Print the version.
  flows      Trace HBONE (:15008) connections with eBPF for a while; print open and recent flows.

Run "ambient-doctor <command> --help" for the flags of a command.
)";

// Where `scripts/lab up` writes the flags that scan its node (the lab's concern, not ours: the
// agent only knows this one path, for --lab).
std::string LabFlagsPath(const std::string& prefix) {
  return "/run/ambient-lab/" + prefix + ".flags";
}

void SetupLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("ambient-doctor");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

void AddCommonFlags(FlagSet& flags) {
  flags.Add({.name = "output",
             .short_name = 'o',
             .value_name = "FORMAT",
             .default_text = "table",
             .help = "Output format: table or json."});
  flags.Add({.name = "log-level",
             .value_name = "LEVEL",
             .default_text = "warn",
             .help = "Log level on stderr: trace, debug, info, warn, error, off."});
}

void AddDiscoveryFlags(FlagSet& flags) {
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .default_text = "/proc",
             .help = "procfs to scan for process netns (use /host/proc in a pod)."});
  flags.Add({.name = "no-proc",
             .takes_value = false,
             .help = "Do not scan processes for netns; only netns bind mounts."});
  flags.Add({.name = "netns-dir",
             .repeatable = true,
             .value_name = "DIR",
             .default_text = "/var/run/netns and /run/containerd/io.containerd.grpc.v1.cri/netns",
             .help = "Directory of netns bind mounts."});
  flags.Add({.name = "host-netns",
             .value_name = "PATH",
             .default_text = "<proc-root>/1/ns/net",
             .help = "The node's host network namespace."});
  flags.Add({.name = "netns-match",
             .value_name = "GLOB",
             .help = "Only bind mounts whose file name matches this glob."});
  flags.Add({.name = "config",
             .value_name = "FILE",
             .help =
                 "Read flags from FILE first (one flag per line, \"--name value\"; # comments); "
                 "flags on the command line override it."});
  flags.Add({.name = "lab",
             .takes_value = false,
             .help = "Scan the embedded lab node (scripts/lab up): shorthand for --config "
                     "/run/ambient-lab/<lab-prefix>.flags, the flags the lab wrote for itself."});
  flags.Add({.name = "lab-prefix",
             .value_name = "NAME",
             .default_text = "adlab",
             .help = "Name prefix of the lab node to scan (implies --lab)."});
}

void AddNodeSourceFlags(FlagSet& flags) {
  flags.Add({.name = "zds-socket",
             .value_name = "PATH",
             .default_text = "/var/run/ztunnel/ztunnel.sock",
             .help = "istio-cni's ZDS socket, observed through sock_diag only (never connected)."});
  flags.Add({.name = "host-root",
             .value_name = "PATH",
             .default_text = "\"\"",
             .help = "Prefix for host paths (ZDS socket, CRI socket, netns pins) when the node's / "
                     "is mounted elsewhere, e.g. /host in a pod."});
  flags.Add({.name = "cri-endpoint",
             .repeatable = true,
             .value_name = "unix://PATH",
             .default_text = "probe containerd, CRI-O, cri-dockerd sockets",
             .help = "CRI runtime socket used to name the pods of each netns."});
  flags.Add({.name = "no-cri", .takes_value = false, .help = "Do not ask the container runtime."});
  flags.Add({.name = "no-probe-path",
             .takes_value = false,
             .help = "Skip the host netns conntrack read (kernel-filtered ctnetlink dump of "
                     "unreplied kubelet probe connections) and PROBE_PATH_BROKEN."});
  flags.Add({.name = "probe-path-threshold",
             .value_name = "DURATION",
             .default_text = "10s",
             .help = "How long probe connections to a pod must stay unreplied before "
                     "PROBE_PATH_BROKEN (across scans, or by the conntrack entry's age)."});
  flags.Add({.name = "cni-conf-dir",
             .value_name = "DIR",
             .default_text = "/etc/cni/net.d",
             .help = "The node's CNI config directory (under --host-root), checked for istio-cni "
                     "in the chain the runtime uses (CNI_CHAIN_BROKEN); `off` skips the check."});
  flags.Add({.name = "no-nft-probe",
             .takes_value = false,
             .help = "Skip the nftables userspace check (NFT_BACKEND_UNUSABLE): package version, "
                     "JSON support and `nft -j list ruleset` in a throwaway netns."});
  flags.Add({.name = "no-zds",
             .takes_value = false,
             .help = "Skip the ZDS socket, process fd inventory and ztunnel admin sources (and "
                     "every ZDS check)."});
  flags.Add({.name = "ztunnel-admin-port",
             .value_name = "PORT",
             .default_text = "15000",
             .help = "ztunnel admin port for /config_dump (read-only GETs)."});
  flags.Add({.name = "ztunnel-netns",
             .repeatable = true,
             .value_name = "PATH",
             .help = "A further netns where a ztunnel admin listens (besides the netns of every "
                     "ztunnel process found)."});
  flags.Add(
      {.name = "zds-stall-threshold",
       .value_name = "DURATION",
       .default_text = "30s",
       .help = "How long a ZDS hand-off may stay pending before it is a stall (ms, s, m, h)."});
  flags.Add({.name = "cert-expiry-warning",
             .value_name = "DURATION",
             .default_text = "1h",
             .help = "ZTUNNEL_CERT_UNHEALTHY when ztunnel's certificate of a pod identity on the "
                     "node expires within this long (or is Unavailable)."});
}

// "30s", "500ms", "2m", "1h"; a bare number is seconds.
std::optional<int64_t> ParseDurationMs(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string unit = text.substr(used);
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m" || unit == "min") {
    scale = 60000;
  } else if (unit == "h") {
    scale = 3600000;
  }
  if (scale == 0 || value < 0) return std::nullopt;
  return static_cast<int64_t>(value * scale);
}

// A positive duration flag (its default when absent); nullopt after explaining on stderr.
std::optional<int64_t> PositiveDurationFlag(const FlagSet& flags, const std::string& name,
                                            const std::string& fallback) {
  const auto value = ParseDurationMs(flags.Get(name, fallback));
  if (!value || *value <= 0) {
    std::fprintf(stderr, "ambient-doctor: --%s needs a positive duration such as %s\n",
                 name.c_str(), fallback.c_str());
    return std::nullopt;
  }
  return value;
}

void AddScanFlags(FlagSet& flags) {
  AddDiscoveryFlags(flags);
  AddNodeSourceFlags(flags);
  AddCommonFlags(flags);
  flags.Add({.name = "workers",
             .value_name = "N",
             .default_text = "2",
             .help = "Threads that inspect netns in parallel (local scans)."});
  flags.Add({.name = "color",
             .value_name = "WHEN",
             .default_text = "auto",
             .help = "Colour: auto (only on a TTY), always, never."});
}

// The engine's configuration from the flags of report/watch; an error message on bad values.
std::optional<std::string> ConfigFromFlags(const FlagSet& flags, EngineConfig& config) {
  DiscoveryOptions& d = config.discovery;
  if (flags.Has("proc-root")) d.proc_root = flags.Get("proc-root");
  if (flags.Has("no-proc")) d.proc_root.clear();
  if (flags.Has("netns-dir")) d.netns_dirs = flags.GetAll("netns-dir");
  if (flags.Has("host-netns")) d.host_netns_path = flags.Get("host-netns");
  if (flags.Has("netns-match")) d.name_glob = flags.Get("netns-match");
  try {
    config.workers = std::max(1, std::stoi(flags.Get("workers", "2")));
  } catch (const std::exception&) {
    return "--workers needs a number";
  }
  const auto threshold = ParseDurationMs(flags.Get("zds-stall-threshold", "30s"));
  if (!threshold) return "--zds-stall-threshold needs a duration such as 30s";
  config.analysis.zds_stall_threshold_ms = *threshold;
  const auto cert_warning = ParseDurationMs(flags.Get("cert-expiry-warning", "1h"));
  if (!cert_warning) return "--cert-expiry-warning needs a duration such as 1h";
  config.analysis.cert_expiry_warning_ms = *cert_warning;

  config.zds = !flags.Has("no-zds");
  config.zds_socket = flags.Get("zds-socket", config.zds_socket);
  config.host_root = flags.Get("host-root");
  // Process fds live under procfs even when discovery skips /proc (--no-proc).
  config.proc_root = flags.Get("proc-root", "/proc");
  try {
    const int port = std::stoi(flags.Get("ztunnel-admin-port", "15000"));
    if (port <= 0 || port > 65535) throw std::out_of_range("port");
    config.ztunnel_admin_port = static_cast<uint16_t>(port);
  } catch (const std::exception&) {
    return "--ztunnel-admin-port needs a port number";
  }
  config.ztunnel_netns = flags.GetAll("ztunnel-netns");
  config.cri = !flags.Has("no-cri");
  config.cri_endpoints = flags.GetAll("cri-endpoint");
  config.probe_conntrack = !flags.Has("no-probe-path");
  const auto probe_threshold = ParseDurationMs(flags.Get("probe-path-threshold", "10s"));
  if (!probe_threshold || *probe_threshold <= 0) {
    return "--probe-path-threshold needs a positive duration such as 10s";
  }
  config.analysis.probe_path_threshold_ms = *probe_threshold;
  const std::string cni_conf_dir = flags.Get("cni-conf-dir", "/etc/cni/net.d");
  if (cni_conf_dir == "off") {
    config.cni_conf_dir.clear();
  } else if (cni_conf_dir.empty() || cni_conf_dir.front() != '/') {
    return "--cni-conf-dir needs an absolute directory (a host path) or off";
  } else {
    config.cni_conf_dir = cni_conf_dir;
  }
  config.nft_userspace = !flags.Has("no-nft-probe");
  return std::nullopt;
}

// Explains on stderr why a scan could not be used.
void ExplainUnusableScan(const NodeSnapshot& snapshot) {
  std::fprintf(
      stderr, "ambient-doctor: scan could not run: %zu netns found, none readable%s\n",
      snapshot.netns.size(),
      ::geteuid() != 0 ? " (run as root: CAP_SYS_ADMIN and CAP_NET_ADMIN are needed)" : "");
  for (const auto& e : snapshot.errors) {
    std::fprintf(stderr, "  %s: %s\n", std::string(e.source()).c_str(), e.message.c_str());
  }
}

void LogSourceChanges(const std::vector<SourceChange>& changes) {
  for (const SourceChange& change : changes) {
    if (change.kind == SourceChange::Kind::kDegraded) {
      spdlog::warn("source degraded: {}: {}", SourceKindName(change.source), change.message);
    } else {
      spdlog::info("source recovered: {}", SourceKindName(change.source));
    }
  }
}

bool UseColor(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  return ::isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
}

// Returns nullopt when the flag set asked for help or failed (after printing), else continues.
std::optional<int> ParseOrExit(FlagSet& flags, const std::vector<std::string>& args,
                               const std::vector<std::string>& formats = {"table", "json"}) {
  if (auto err = flags.Parse(args)) {
    std::fprintf(stderr, "ambient-doctor: %s\n", err->c_str());
    return kExitScanFailed;
  }
  // A flags file (--config, or the lab's own with --lab) is a lower layer: parse it, then the
  // command line again so that its flags win.
  std::optional<std::string> config_file;
  if (flags.Has("config")) {
    config_file = flags.Get("config");
  } else if (flags.Has("lab") || flags.Has("lab-prefix")) {
    config_file = LabFlagsPath(flags.Get("lab-prefix", "adlab"));
  }
  if (config_file && !flags.Has("help")) {
    Result<std::vector<std::string>> file_args = ReadFlagsFile(*config_file);
    if (!file_args.ok()) {
      std::fprintf(stderr, "ambient-doctor: %s\n", file_args.error().message.c_str());
      if (!flags.Has("config")) {
        std::fprintf(stderr, "ambient-doctor: is the lab up? (scripts/lab up --prefix %s)\n",
                     flags.Get("lab-prefix", "adlab").c_str());
      }
      return kExitScanFailed;
    }
    FlagSet layered = flags.EmptyCopy();
    if (auto err = layered.Parse(*file_args)) {
      std::fprintf(stderr, "ambient-doctor: %s: %s\n", config_file->c_str(), err->c_str());
      return kExitScanFailed;
    }
    (void)layered.Parse(args);  // parsed once already
    flags = std::move(layered);
  }
  if (flags.Has("help")) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  std::string out = flags.Get("output", "table");
  if (std::find(formats.begin(), formats.end(), out) == formats.end()) {
    std::string allowed;
    for (const auto& f : formats) allowed += (allowed.empty() ? "" : ", ") + f;
    std::fprintf(stderr, "ambient-doctor: unknown output format \"%s\" (one of: %s)\n", out.c_str(),
                 allowed.c_str());
    return kExitScanFailed;
  }
  return std::nullopt;
}

void AddClientFlags(FlagSet& flags) {
  flags.Add({.name = "local",
             .takes_value = false,
             .help = "Scan locally even when the daemon (serve) answers on --api-socket."});
  flags.Add({.name = "api-socket",
             .value_name = "PATH",
             .default_text = client::kDefaultApiSocket,
             .help = "The daemon's gRPC socket. Used when it exists and answers (within ~2 s); "
                     "else the command scans locally and says why."});
}

// Flags that pick what a scan covers or how it judges. The daemon scans its own configured scope,
// so with any of them on the command line the command scans locally (or, with an explicit
// --api-socket, refuses). --lab and --lab-prefix select the lab node, never the daemon's. A
// --config file is not one of them: it is the node's shared agent flags (the DaemonSet's
// agent.flags, which serve reads too), so its scope is taken to be the daemon's.
constexpr const char* kScanScopeFlags[] = {
    "lab", "lab-prefix", "proc-root", "no-proc", "netns-dir", "host-netns", "netns-match",
    "zds-socket", "host-root", "cri-endpoint", "no-cri", "no-zds", "ztunnel-admin-port",
    "ztunnel-netns", "zds-stall-threshold",
    // Issue 10:
    "no-probe-path", "probe-path-threshold", "cni-conf-dir", "no-nft-probe", "cert-expiry-warning"};

// Whether to ask the daemon: a connected client, or why not (the local scan's note).
struct DaemonChoice {
  std::unique_ptr<client::ApiClient> client;
  std::string socket;           // the socket tried, "" when none was
  std::string fallback_reason;  // why the command scans locally
  bool daemon_failed = false;   // a socket was there but no usable daemon behind it
  bool refused = false;         // contradictory flags: explained on stderr, exit 2
};

// Says why the command works without the daemon: a warning when a socket was there but failed
// (stale, hung, not gRPC), else only at info level (no daemon on this node, --local).
void LogFallback(const DaemonChoice& choice, const std::string& what) {
  if (choice.daemon_failed) {
    spdlog::warn("{} locally: {}", what, choice.fallback_reason);
  } else {
    spdlog::info("{} locally: {}", what, choice.fallback_reason);
  }
}

// `scoped`: the command scans a node (report, watch); rules reads one netns by path. `args` is
// the command line (scope flags count only there, not in a --config file).
DaemonChoice ChooseDaemon(const FlagSet& flags, const std::vector<std::string>& args,
                          const std::string& command, bool scoped = true) {
  DaemonChoice choice;
  if (flags.Has("local")) {
    choice.fallback_reason = "--local";
    return choice;
  }
  FlagSet typed = flags.EmptyCopy();
  (void)typed.Parse(args);  // parsed once already
  std::string scope;
  for (const char* name : kScanScopeFlags) {
    if (scoped && typed.Has(name)) scope += (scope.empty() ? "--" : ", --") + std::string(name);
  }
  if (!scope.empty()) {
    if (typed.Has("api-socket")) {
      std::fprintf(stderr,
                   "ambient-doctor %s: %s set a scan scope, which the daemon does not take (it "
                   "scans its own); drop them to ask the daemon, or drop --api-socket (or add "
                   "--local) to scan locally\n",
                   command.c_str(), scope.c_str());
      choice.refused = true;
      return choice;
    }
    choice.fallback_reason = "scan-scope flags " + scope + " given; the daemon scans its own scope";
    return choice;
  }
  choice.socket = flags.Get("api-socket", client::kDefaultApiSocket);
  client::ClientOptions options;
  options.socket_path = choice.socket;
  Result<std::unique_ptr<client::ApiClient>> connected = client::ApiClient::Connect(options);
  if (!connected.ok()) {
    choice.fallback_reason = connected.error().message;
    choice.daemon_failed = connected.error().error_number != ENOENT;
    return choice;
  }
  choice.client = std::move(connected).value();
  return choice;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int PrintReport(const pb::Report& report, const FlagSet& flags) {
  if (flags.Get("output", "table") == "json") {
    std::fputs(RenderReportJson(report).c_str(), stdout);
  } else {
    RenderOptions render;
    render.color = UseColor(flags.Get("color", "auto"));
    render.show_all_netns = !flags.Has("istio-only");
    std::fputs(RenderReportTable(report, render).c_str(), stdout);
  }
  return ReportExitCode(report);
}

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
  AddScanFlags(flags);
  AddClientFlags(flags);
  flags.Add({.name = "istio-only",
             .takes_value = false,
             .help = "Hide netns without Istio state and without findings."});
  if (auto rc = ParseOrExit(flags, args)) return *rc;
  SetupLogging(flags.Get("log-level", "warn"));

  EngineConfig config;
  if (auto error = ConfigFromFlags(flags, config)) {
    std::fprintf(stderr, "ambient-doctor: %s\n", error->c_str());
    return kExitScanFailed;
  }
  DaemonChoice daemon = ChooseDaemon(flags, args, "report");
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
      return PrintReport(report, flags);
    }
    daemon.fallback_reason = answer.error().message;
    daemon.daemon_failed = true;
  }
  LogFallback(daemon, "scanning");
  if (::geteuid() != 0) {
    spdlog::warn("not running as root: entering other network namespaces will likely fail");
  }
  config.analysis.history_known = false;  // one step: nothing seen before
  Engine engine(std::move(config));
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
  return PrintReport(report, flags);
}

// A finding's identity on the wire: code + netns inode + subject (as FindingIdentity).
std::string WireIdentity(const pb::Finding& f) {
  return f.code() + "|" + std::to_string(f.netns().inode()) + "|" + f.subject();
}

pb::SeverityCounts CountOpen(const std::map<std::string, pb::Finding>& open) {
  pb::SeverityCounts counts;
  for (const auto& [id, f] : open) {
    if (f.severity() == "critical") counts.set_critical(counts.critical() + 1);
    if (f.severity() == "warning") counts.set_warning(counts.warning() + 1);
    if (f.severity() == "info") counts.set_info(counts.info() + 1);
  }
  return counts;
}

// watch through the daemon: its current findings are the first change set (each as opened, like
// a local watch's first scan), then one change set per published result that opened or resolved
// something. Events of one result arrive back to back; a new sequence or a short quiet ends a set.
int WatchViaDaemon(client::ApiClient& api, client::FindingStream& stream, int count, bool json,
                   bool color) {
  constexpr std::chrono::milliseconds kSetQuiet{100};
  std::string node;
  if (Result<pb::Status> status = api.GetStatus(); status.ok()) node = status->node();
  std::map<std::string, pb::Finding> open;  // by WireIdentity
  ChangeSet pending;
  pending.node = node;
  bool have_pending = false;
  uint64_t pending_sequence = 0;
  bool initial = true;
  int sets = 0;
  auto flush = [&] {
    pending.open_findings = CountOpen(open);
    if (initial || !pending.changes.empty()) {
      if (!pending.changes.empty()) {
        const std::string text =
            json ? RenderChangesJson(pending) : RenderChangeLines(pending, color);
        std::fputs(text.c_str(), stdout);
        std::fflush(stdout);
      }
      ++sets;
    }
    pending.changes.clear();
    have_pending = false;
    initial = false;
  };
  while (count == 0 || sets < count) {
    pb::FindingEvent event;
    const auto read = stream.Next(&event, kSetQuiet);
    if (read == client::FindingStream::Read::kEnded) {
      if (have_pending && !initial) flush();
      if (count > 0 && sets >= count) break;
      std::fprintf(stderr, "ambient-doctor watch: the daemon at unix:%s went away (%s)\n",
                   api.socket_path().c_str(), stream.end_error().message.c_str());
      return kExitScanFailed;
    }
    if (read == client::FindingStream::Read::kIdle) {
      if (have_pending && !initial) flush();
      continue;
    }
    if (have_pending && !initial && event.sequence() != pending_sequence) flush();
    pending_sequence = event.sequence();
    pending.taken_at_unix_ms = event.taken_at_unix_ms();
    have_pending = true;
    const std::string id = WireIdentity(event.finding());
    switch (event.kind()) {
      case pb::FindingEvent::KIND_CURRENT:
        if (event.has_finding()) {
          open[id] = event.finding();
          pending.changes.push_back({true, event.finding()});
        }
        if (event.end_of_current()) flush();
        break;
      case pb::FindingEvent::KIND_OPENED:
        open[id] = event.finding();
        pending.changes.push_back({true, event.finding()});
        break;
      case pb::FindingEvent::KIND_UPDATED:  // not a change for watch: same identity
        open[id] = event.finding();
        break;
      case pb::FindingEvent::KIND_RESOLVED:
        open.erase(id);
        pending.changes.push_back({false, event.finding()});
        break;
      default:
        break;
    }
  }
  return ReportExitCode(CountOpen(open));
}

int RunWatch(const std::vector<std::string>& args) {
  FlagSet flags("watch", "[--interval 5s] [--count N] [report flags]",
                "Prints one line per finding opened or resolved; with -o json, one JSON document "
                "(one line, schema ambient-doctor.changes/v1) per set of changes. Follows the "
                "daemon's WatchFindings stream when it answers on --api-socket (its current "
                "findings first, then every change it publishes, with its history); else rescans "
                "the node every --interval with one history of ZDS signals (so a hand-off pending "
                "past --zds-stall-threshold becomes ZDS_STALL).");
  AddScanFlags(flags);
  AddClientFlags(flags);
  flags.Add({.name = "interval",
             .value_name = "DURATION",
             .default_text = "5s",
             .help = "Time between the start of two local scans (the daemon has its own)."});
  flags.Add({.name = "count",
             .value_name = "N",
             .default_text = "0 (until interrupted)",
             .help = "Stop after N scans (with the daemon: N change sets, the first being its "
                     "current findings); the exit code then follows the open findings like "
                     "report."});
  if (auto rc = ParseOrExit(flags, args)) return *rc;
  SetupLogging(flags.Get("log-level", "warn"));

  EngineConfig config;
  if (auto error = ConfigFromFlags(flags, config)) {
    std::fprintf(stderr, "ambient-doctor: %s\n", error->c_str());
    return kExitScanFailed;
  }
  const auto interval = PositiveDurationFlag(flags, "interval", "5s");
  if (!interval) return kExitScanFailed;
  int count = 0;
  try {
    count = std::stoi(flags.Get("count", "0"));
  } catch (const std::exception&) {
    count = -1;
  }
  if (count < 0) {
    std::fprintf(stderr, "ambient-doctor: --count needs a number\n");
    return kExitScanFailed;
  }
  const bool json = flags.Get("output", "table") == "json";
  const bool color = UseColor(flags.Get("color", "auto"));

  DaemonChoice daemon = ChooseDaemon(flags, args, "watch");
  if (daemon.refused) return kExitScanFailed;
  if (daemon.client) {
    Result<std::unique_ptr<client::FindingStream>> stream = daemon.client->WatchFindings();
    if (stream.ok()) {
      spdlog::info("following the daemon at unix:{}", daemon.socket);
      return WatchViaDaemon(*daemon.client, **stream, count, json, color);
    }
    daemon.fallback_reason = stream.error().message;
    daemon.daemon_failed = true;
  }
  LogFallback(daemon, "scanning every " + flags.Get("interval", "5s"));
  if (::geteuid() != 0) {
    spdlog::warn("not running as root: entering other network namespaces will likely fail");
  }

  Engine engine(std::move(config));
  int exit_code = kExitScanFailed;
  bool explained = false;  // a failing scan is explained once, until it recovers
  auto next_scan = std::chrono::steady_clock::now();
  for (int scans = 0; count == 0 || scans < count; ++scans) {
    if (scans > 0) std::this_thread::sleep_until(next_scan);
    next_scan = std::chrono::steady_clock::now() + std::chrono::milliseconds(*interval);
    const EngineStep step = engine.Step();
    LogSourceChanges(step.source_changes);
    if (!step.usable) {
      if (!explained) ExplainUnusableScan(step.snapshot);
      explained = true;
      exit_code = kExitScanFailed;
      continue;
    }
    if (step.scan_recovered) spdlog::info("scan recovered");
    explained = false;
    if (!step.changes.empty()) {
      const ChangeSet set = LocalChangeSet(step.snapshot, step.analysis, step.changes);
      const std::string text = json ? RenderChangesJson(set) : RenderChangeLines(set, color);
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    }
    exit_code = ReportExitCode(engine.open_findings());
  }
  return exit_code;
}

// GetNetnsRules: a netns by path, or by inode through the latest snapshot, read now on a worker
// thread (setns happens on threads made for it, never on a gRPC thread).
api::NetnsReader MakeNetnsReader(std::shared_ptr<const ResultHub> hub) {
  return [hub](const api::NetnsQuery& query) -> Result<NetnsSnapshot> {
    NetnsRecord record;
    if (!query.path.empty()) {
      Result<NetnsRecord> by_path = NetnsRecordForPath(query.path);
      if (!by_path.ok()) return by_path.error();
      record = std::move(by_path).value();
    } else {
      const auto latest = hub->Latest();
      const NetnsSnapshot* known = nullptr;
      if (latest) {
        for (const NetnsSnapshot& netns : latest->step.snapshot.netns) {
          if (netns.netns.inode == query.inode) known = &netns;
        }
      }
      if (known == nullptr) {
        return SourceError{
            SourceKind::kNetns,
            "no netns with inode " + std::to_string(query.inode) + " in the latest scan", ENOENT};
      }
      record = known->netns;
    }
    std::optional<NetnsSnapshot> read;
    NetnsWorkers::Shared().Run([&] { read = MakeKernelInspector(ReadLimits{})->Inspect(record); });
    return std::move(*read);
  };
}

// gRPC's own log lines (e.g. a refused TLS handshake) at debug level, in the daemon's format.
std::atomic<LogFormat> g_serve_log_format{LogFormat::kText};
void LogGrpcLine(std::string_view message) {
  spdlog::debug("{}", NoteLine("grpc: " + std::string(message), g_serve_log_format.load()));
}

// The running daemon, for the signal handler (Stop() is async-signal-safe).
std::atomic<Daemon*> g_daemon{nullptr};

void StopDaemonOnSignal(int) {
  if (Daemon* daemon = g_daemon.load()) daemon->Stop();
}

int RunServe(const std::vector<std::string>& args) {
  FlagSet flags("serve", "[--interval 5s] [--log-format text|json] [report flags]",
                "Runs as the node daemon: scans at start, then re-reads a netns when its "
                "nf_tables or rtnetlink events (or its iptables-legacy fingerprint, checked every "
                "--interval) say it changed, polls the node-wide ZDS, ztunnel and CRI sources "
                "every --interval and resyncs every --resync-interval. Keeps the "
                "history of every finding (first seen, last seen, resolved) and of ZDS signals, "
                "serves the gRPC API on --api-socket (and over TCP with TLS on --api-address), "
                "/metrics and /healthz, and logs one line per finding opened or resolved and per "
                "source degraded or recovered. Runs the eBPF flow tracer (unless --no-flows): "
                "StreamFlows, HBONE_CONNECT_FAILURES / MESH_BYPASS with every scan, or "
                "TRACING_UNAVAILABLE with the reason. SIGTERM or SIGINT stops it.");
  AddScanFlags(flags);
  flags.Add({.name = "interval",
             .value_name = "DURATION",
             .default_text = "5s",
             .help = "Poll interval of the node-wide sources and legacy fingerprints."});
  flags.Add({.name = "log-format",
             .value_name = "FORMAT",
             .default_text = "text",
             .help = "text, or json (one JSON object per line: ts, level, event)."});
  flags.Add({.name = "resync-interval",
             .value_name = "DURATION",
             .default_text = "60s",
             .help = "Resync this often, whatever the change events said: re-read the netns "
                     "whose nf_tables generation or iptables-legacy hash changed, the host "
                     "netns, every netns's listeners and a rolling tenth of the rest in full "
                     "(without events: everything)."});
  flags.Add({.name = "no-events",
             .takes_value = false,
             .help = "Do not subscribe to nf_tables/rtnetlink events: re-read every netns on "
                     "every --interval."});
  flags.Add({.name = "api-socket",
             .value_name = "PATH",
             .default_text = "/run/ambient-doctor/api.sock",
             .help = "Unix socket of the gRPC API (ambientdoctor.v1.AmbientDoctor, health, "
                     "reflection); its directory is created 0700, the socket is 0600. \"off\" "
                     "disables it."});
  flags.Add({.name = "api-address",
             .value_name = "HOST:PORT",
             .help = "Also serve the gRPC API over TCP, only with TLS (needs --api-tls-cert and "
                     "--api-tls-key): an IPv4 or bracketed IPv6 literal and a port, e.g. "
                     "0.0.0.0:9978 or [::]:9978. Same limits as the socket."});
  flags.Add({.name = "api-tls-cert",
             .value_name = "FILE",
             .help = "PEM certificate chain (leaf first) of the TCP listener."});
  flags.Add({.name = "api-tls-key",
             .value_name = "FILE",
             .help = "PEM private key of --api-tls-cert (unencrypted)."});
  flags.Add({.name = "api-tls-client-ca",
             .value_name = "FILE",
             .help = "PEM CA certificate(s): TCP clients must present a certificate signed by "
                     "one of them (mutual TLS)."});
  flags.Add({.name = "metrics-address",
             .value_name = "HOST:PORT",
             .default_text = "0.0.0.0:9977",
             .help = "Where /metrics (Prometheus) and /healthz are served; port 9977 is outside "
                     "Istio's 15000-15099 and kubelet's ports. \"off\" disables it."});
  flags.Add({.name = "metrics-per-pod",
             .takes_value = false,
             .help = "Also export one redirect-state series per pod (the series count then grows "
                     "with the node's pods)."});
  flags.Add({.name = "healthz-stale-after",
             .value_name = "DURATION",
             .default_text = "120s",
             .help = "/healthz fails when the last successful scan is older than this."});
  flags.Add({.name = "no-flows",
             .takes_value = false,
             .help = "Do not run the eBPF flow tracer (no StreamFlows, no HBONE_CONNECT_FAILURES / "
                     "MESH_BYPASS checks, no TRACING_UNAVAILABLE)."});
  flags.Add({.name = "flow-port",
             .repeatable = true,
             .value_name = "PORT",
             .default_text = "15008",
             .help = "Port traced by the flow tracer (either end), up to 8, as `flows --port`; the "
                     "first is the HBONE port of the checks and metrics. MESH_BYPASS needs no "
                     "port here (see --no-flow-bypass)."});
  flags.Add({.name = "flow-attach",
             .value_name = "MODE",
             .default_text = "auto",
             .help = "Flow tracer attach type: auto, tp_btf, raw_tp, tracepoint (as `flows`)."});
  flags.Add({.name = "flow-btf",
             .value_name = "PATH",
             .default_text = "/sys/kernel/btf/vmlinux",
             .help = "Kernel BTF of the flow tracer; a missing file makes tracing unavailable "
                     "(TRACING_UNAVAILABLE) while the daemon keeps serving."});
  flags.Add({.name = "flow-all-connects",
             .takes_value = false,
             .help = "Also trace every outgoing connection of the whole node, any netns (an "
                     "event pair per connect on the node; MESH_BYPASS does not need it)."});
  flags.Add({.name = "no-flow-bypass",
             .takes_value = false,
             .help = "Do not trace the application connects of ambient pods (no MESH_BYPASS "
                     "check). By default every connect of the netns the scan finds ambient, and "
                     "ztunnel's accepts on 15001/15053 there, are traced; other netns pay one "
                     "kernel map lookup per connect."});
  flags.Add({.name = "flow-ring-bytes",
             .value_name = "N",
             .default_text = "262144",
             .help = "Flow tracer ring-buffer size in bytes (rounded up to a power of two; its "
                     "data pages count twice in RSS). Smaller saves memory; lost events are "
                     "counted (ambient_doctor_flow_tracer_lost_events_total)."});
  flags.Add({.name = "flow-window",
             .value_name = "DURATION",
             .default_text = "5m",
             .help = "Closed flows the flow checks judge: those that ended this recently."});
  flags.Add({.name = "flow-live-interval",
             .value_name = "DURATION",
             .default_text = "5s",
             .help = "Refresh the bytes, srtt and retransmits of open flows from sock_diag "
                     "tcp_info this often (StreamFlows \"update\" events, the flow view); only "
                     "netns with open flows are read. 0 turns it off."});
  if (auto rc = ParseOrExit(flags, args)) return *rc;
  const std::string log_format = flags.Get("log-format", "text");
  if (log_format != "text" && log_format != "json") {
    std::fprintf(stderr, "ambient-doctor: --log-format is text or json\n");
    return kExitScanFailed;
  }
  const LogFormat format = log_format == "json" ? LogFormat::kJson : LogFormat::kText;
  SetupLogging(flags.Get("log-level", "info"));
  if (format == LogFormat::kJson) {
    spdlog::set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","event":%v})",
                        spdlog::pattern_time_type::utc);
  }
  DaemonOptions options;
  if (auto error = ConfigFromFlags(flags, options.engine)) {
    std::fprintf(stderr, "ambient-doctor: %s\n", error->c_str());
    return kExitScanFailed;
  }
  const auto interval = PositiveDurationFlag(flags, "interval", "5s");
  if (!interval) return kExitScanFailed;
  options.poll_interval = std::chrono::milliseconds(*interval);
  // The conntrack dump walks the kernel's whole table: about every 15 s (every 3rd poll at 5 s;
  // every poll when the interval is longer), the slack keeps a poll's jitter from skipping one.
  options.engine.probe_conntrack_min_interval_ms = 14'500;
  // Each CLOSE_WAIT dump walks the whole TCP established hash (~1.5 ms a netns, the idle
  // daemon's largest single cost at 15 s): counted about every 30 s (a round of 250 pod netns, 4
  // a collection, then takes ~31 min; growth is judged over 3 rounds, a leak like ztunnel#1629
  // grows over hours; fd pressure is judged at every poll).
  options.engine.close_wait_min_interval_ms = 29'500;
  const auto resync = PositiveDurationFlag(flags, "resync-interval", "60s");
  if (!resync) return kExitScanFailed;
  options.full_resync = std::chrono::milliseconds(*resync);
  options.event_driven = !flags.Has("no-events");
  const auto stale_after = PositiveDurationFlag(flags, "healthz-stale-after", "120s");
  if (!stale_after) return kExitScanFailed;
  // Quiet polls are not published; publish often enough that /healthz never sees a stale result.
  options.max_unpublished =
      std::min(options.max_unpublished, std::chrono::milliseconds(*stale_after / 2));
  const bool with_flows = !flags.Has("no-flows");
  FlowMonitorOptions flow_options;
  if (flags.Has("flow-port")) {
    flow_options.tracer.ports.clear();
    for (const std::string& text : flags.GetAll("flow-port")) {
      char* end = nullptr;
      const long port = std::strtol(text.c_str(), &end, 10);
      if (end == text.c_str() || *end != '\0' || port < 1 || port > 65535 ||
          flow_options.tracer.ports.size() >= 8) {
        std::fprintf(stderr, "ambient-doctor: bad --flow-port \"%s\" (1-65535, at most 8)\n",
                     text.c_str());
        return kExitScanFailed;
      }
      flow_options.tracer.ports.push_back(static_cast<uint16_t>(port));
    }
  }
  if (auto attach = ParseAttachMode(flags.Get("flow-attach", "auto"))) {
    flow_options.tracer.attach = *attach;
  } else {
    std::fprintf(stderr, "ambient-doctor: --flow-attach is auto, tp_btf, raw_tp or tracepoint\n");
    return kExitScanFailed;
  }
  flow_options.tracer.btf_path = flags.Get("flow-btf", flow_options.tracer.btf_path);
  flow_options.tracer.trace_all_connects = flags.Has("flow-all-connects");
  flow_options.tracer.watch_bypass_netns = !flags.Has("no-flow-bypass");
  if (auto bytes = ParseRingBytes(flags.Get("flow-ring-bytes", "262144"))) {
    flow_options.tracer.ring_bytes = *bytes;
  } else {
    std::fprintf(stderr, "ambient-doctor: --flow-ring-bytes must be between 4096 and 1073741824\n");
    return kExitScanFailed;
  }
  const auto flow_window = PositiveDurationFlag(flags, "flow-window", "5m");
  if (!flow_window) return kExitScanFailed;
  const auto flow_live = ParseDurationMs(flags.Get("flow-live-interval", "5s"));
  if (!flow_live) {
    std::fprintf(stderr,
                 "ambient-doctor: --flow-live-interval needs a duration such as 5s (0: off)\n");
    return kExitScanFailed;
  }
  flow_options.live_interval = std::chrono::milliseconds(*flow_live);
  // The live refresh enters the netns of open flows: any netns the discovery can name, not only
  // the scanned ones (--netns-match).
  flow_options.discovery = options.engine.discovery;
  flow_options.discovery.name_glob.clear();
  FlowFindingOptions flow_findings;
  flow_findings.window = std::chrono::milliseconds(*flow_window);
  flow_findings.checks.hbone_port = flow_options.tracer.ports.front();
  auto flow_hub = std::make_shared<FlowHub>();
  // Loaded before the first scan, so its first report already says whether tracing works.
  std::unique_ptr<FlowMonitor> flow_monitor;
  if (with_flows) {
    flow_monitor = std::make_unique<FlowMonitor>(flow_options, flow_hub);
    const FlowTracerStatus tracer = flow_hub->status();
    if (tracer.available) {
      spdlog::info("{}", NoteLine("flow tracer attached (" + tracer.attach_mode + ")", format));
    } else {
      spdlog::warn("{}", NoteLine("flow tracer unavailable: " + tracer.reason, format));
    }
  }
  options.extra_findings = [flow_hub, flow_findings](const NodeSnapshot& snapshot,
                                                     const NodeAnalysis& analysis) {
    const FlowHub::Current current = flow_hub->Latest();
    const FlowTracerStatus status = flow_hub->status();
    // No flow to judge (a quiet node): the checks find nothing, so the pod join is not built
    // (the daemon asks at every poll whether the flow findings changed).
    if (status.enabled && status.available && current.view->open.empty() &&
        current.view->closed.empty()) {
      return std::vector<Finding>{};
    }
    const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    return FlowFindings(status, *current.view, FlowContextOf(snapshot, analysis.netns), now_ns,
                        flow_findings);
  };
  api::ApiServerOptions api_options;
  api_options.socket_path = flags.Get("api-socket", api::kDefaultSocketPath);
  if (api_options.socket_path == "off") api_options.socket_path.clear();
  api_options.tcp_address = flags.Get("api-address");
  api_options.tls = {.cert_file = flags.Get("api-tls-cert"),
                     .key_file = flags.Get("api-tls-key"),
                     .client_ca_file = flags.Get("api-tls-client-ca")};
  api_options.version = kVersion;
  // Flag combinations are refused here; the files are checked when the API starts.
  const bool any_tls =
      flags.Has("api-tls-cert") || flags.Has("api-tls-key") || flags.Has("api-tls-client-ca");
  if (!api_options.tcp_address.empty() &&
      (api_options.tls.cert_file.empty() || api_options.tls.key_file.empty())) {
    std::fprintf(stderr,
                 "ambient-doctor: --api-address serves TCP only with TLS: give --api-tls-cert "
                 "FILE and --api-tls-key FILE (plaintext TCP is refused)\n");
    return kExitScanFailed;
  }
  if (api_options.tcp_address.empty() && any_tls) {
    std::fprintf(stderr,
                 "ambient-doctor: --api-tls-cert, --api-tls-key and --api-tls-client-ca are for "
                 "the TCP listener: give --api-address HOST:PORT\n");
    return kExitScanFailed;
  }
  const std::string metrics_address = flags.Get("metrics-address", "0.0.0.0:9977");
  std::optional<HttpServerOptions> http;
  if (metrics_address != "off") {
    // "HOST:PORT", "[v6]:PORT"
    const size_t colon = metrics_address.rfind(':');
    HttpServerOptions parsed;
    int port = -1;
    if (colon != std::string::npos) {
      try {
        port = std::stoi(metrics_address.substr(colon + 1));
      } catch (const std::exception&) {
        port = -1;
      }
      std::string host = metrics_address.substr(0, colon);
      if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
      }
      parsed.bind_address = host;
    }
    if (port < 0 || port > 65535 || parsed.bind_address.empty()) {
      std::fprintf(stderr, "ambient-doctor: --metrics-address needs HOST:PORT (or off)\n");
      return kExitScanFailed;
    }
    parsed.port = static_cast<uint16_t>(port);
    http = parsed;
  }
  MetricsExporter exporter(MetricsOptions{.version = kVersion,
                                          .per_pod_labels = flags.Has("metrics-per-pod"),
                                          .stale_after_ms = *stale_after,
                                          .hbone_port = flow_findings.checks.hbone_port});
  options.on_step = [&exporter](StepTrigger trigger, double seconds, size_t netns_read) {
    if (trigger != StepTrigger::kStartup && netns_read > 0) exporter.RecordReread(trigger, seconds);
  };
  options.on_event_overflow = [&exporter] { exporter.RecordEventSocketOverflow(); };
  Daemon daemon(std::move(options));
  std::optional<MetricsEndpoint> endpoint;
  if (http) {
    endpoint.emplace(exporter, *http);
    Result<uint16_t> bound = endpoint->Start();
    if (!bound.ok()) {
      std::fprintf(stderr, "ambient-doctor: metrics endpoint: %s\n", bound.error().message.c_str());
      return kExitScanFailed;
    }
    spdlog::info("{}", NoteLine("metrics on " + http->bind_address + ":" + std::to_string(*bound) +
                                    " (/metrics, /healthz)",
                                format));
  }
  std::thread metrics_feed([&exporter, &daemon] {
    NameThisThread("ad-metrics");
    exporter.FollowHub(daemon.hub());
  });
  // Mesh-bypass mode: the tracer watches the netns each published scan finds ambient.
  std::thread bypass_feed;
  if (flow_monitor && flow_monitor->available() && flow_options.tracer.watch_bypass_netns) {
    bypass_feed = std::thread([&daemon, &flow_monitor, format] {
      NameThisThread("ad-bypass-feed");
      bool overflowing = false;
      FollowResultsIntoBypassNetns(daemon.hub(), [&](const std::vector<uint32_t>& inodes) {
        const auto state = flow_monitor->SetBypassNetns(inodes);
        if (!state) return;
        if (!state->ok()) {
          spdlog::warn("{}", NoteLine("mesh-bypass netns map: " + state->error().message, format));
          return;
        }
        const BypassNetnsState& now = state->value();
        if (now.not_watched > 0 && !overflowing) {
          spdlog::warn("{}",
                       NoteLine("mesh-bypass netns map full: " + std::to_string(now.not_watched) +
                                    " ambient netns not watched (" + std::to_string(now.watched) +
                                    " watched): MESH_BYPASS misses their connections",
                                format));
        }
        overflowing = now.not_watched > 0;
      });
    });
  }
  std::thread flow_metrics_feed([&exporter, &daemon, flow_hub] {
    NameThisThread("ad-flow-metrics");
    exporter.FollowFlows(*flow_hub, daemon.hub());
  });
  // gRPC's lines (API server, CRI client) must not break the daemon's log format.
  g_serve_log_format = format;
  api::SetGrpcLogSink(LogGrpcLine);
  std::unique_ptr<api::ApiServer> api_server;
  if (!api_options.socket_path.empty() || !api_options.tcp_address.empty()) {
    auto started = api::ApiServer::Start(api_options, daemon.shared_hub(),
                                         MakeNetnsReader(daemon.shared_hub()), flow_hub);
    if (!started.ok()) {
      spdlog::error("{}", NoteLine("gRPC API: " + started.error().message, format));
      daemon.Stop();
      daemon.hub().Stop();
      flow_hub->Stop();
      metrics_feed.join();
      flow_metrics_feed.join();
      if (bypass_feed.joinable()) bypass_feed.join();
      return kExitScanFailed;
    }
    api_server = std::move(*started);
    if (!api_options.socket_path.empty()) {
      spdlog::info("{}", NoteLine("gRPC API on unix:" + api_options.socket_path, format));
    }
    if (!api_options.tcp_address.empty()) {
      // The bound port: the one chosen when the address asked for port 0.
      const std::string& address = api_options.tcp_address;
      std::string note = "gRPC API on " + address.substr(0, address.rfind(':')) + ":" +
                         std::to_string(api_server->tcp_port()) + " (TLS";
      note += api_options.tls.client_ca_file.empty() ? ")" : ", client certificates required)";
      spdlog::info("{}", NoteLine(note, format));
    }
  }
  g_daemon = &daemon;
  struct sigaction action {};
  action.sa_handler = StopDaemonOnSignal;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  spdlog::info("{}", NoteLine("serving", format));
  daemon.Run(format);  // stops the hub when it returns: the feed thread and streams end too
  g_daemon = nullptr;
  flow_hub->Stop();  // flow streams end too
  if (flow_monitor) flow_monitor->Stop();
  metrics_feed.join();
  flow_metrics_feed.join();
  if (bypass_feed.joinable()) bypass_feed.join();
  if (api_server) api_server->Shutdown();
  if (endpoint) endpoint->Stop();
  spdlog::info("{}",
               NoteLine("stopped after " + std::to_string(daemon.steps()) + " scans", format));
  return 0;
}

int RunRules(const std::vector<std::string>& args) {
  FlagSet flags("rules", "(--netns PATH | --pid PID) [flags]",
                "Prints the normalized rule set of one network namespace: every backend, family, "
                "table and chain, ipsets, policy rules and the routes of table 100. Asks the "
                "daemon (GetNetnsRules, read now by the daemon) when it answers on --api-socket, "
                "else reads the netns itself; the output is the same.");
  flags.Add({.name = "netns",
             .value_name = "PATH",
             .help = "Netns bind mount or /proc/<pid>/ns/net to read."});
  flags.Add({.name = "pid", .value_name = "PID", .help = "Read the netns of this process."});
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .default_text = "/proc",
             .help = "procfs used to resolve --pid (the path is sent to the daemon as is)."});
  AddCommonFlags(flags);
  AddClientFlags(flags);
  if (auto rc = ParseOrExit(flags, args)) return *rc;
  SetupLogging(flags.Get("log-level", "warn"));

  std::string path = flags.Get("netns");
  if (flags.Has("pid")) path = flags.Get("proc-root", "/proc") + "/" + flags.Get("pid") + "/ns/net";
  if (path.empty() || (flags.Has("pid") && flags.Has("netns"))) {
    std::fprintf(stderr, "ambient-doctor rules: give exactly one of --netns PATH or --pid PID\n");
    return kExitScanFailed;
  }
  const bool json = flags.Get("output", "table") == "json";
  auto print = [json](const pb::NetnsRules& rules) {
    std::fputs((json ? RenderRulesJson(rules) : RenderRulesText(rules)).c_str(), stdout);
    return rules.netns().unreadable() ? kExitScanFailed : 0;
  };
  DaemonChoice daemon = ChooseDaemon(flags, args, "rules", /*scoped=*/false);
  if (daemon.client) {
    // The daemon opens the path in its own mount namespace; a relative one means nothing there.
    std::string absolute = path;
    if (!absolute.empty() && absolute[0] != '/') {
      std::error_code error;
      absolute = std::filesystem::absolute(path, error).string();
    }
    Result<pb::NetnsRules> answer = daemon.client->GetNetnsRulesByPath(absolute);
    if (answer.ok()) return print(*answer);
    if (client::IsAnsweredNo(answer.error())) {
      std::fprintf(stderr, "ambient-doctor rules: the daemon at unix:%s: %s\n",
                   daemon.socket.c_str(), answer.error().message.c_str());
      return kExitScanFailed;
    }
    daemon.fallback_reason = answer.error().message;
    daemon.daemon_failed = true;
  }
  LogFallback(daemon, "reading the netns");
  Result<NetnsRecord> found = NetnsRecordForPath(path);
  if (!found.ok()) {
    std::fprintf(stderr, "ambient-doctor rules: %s\n", found.error().message.c_str());
    return kExitScanFailed;
  }
  const NetnsRecord record = std::move(found).value();
  auto inspector = MakeKernelInspector(ReadLimits{});
  const NetnsSnapshot ns = inspector->Inspect(record);
  return print(api::BuildNetnsRules(ns, Classify(ns), NodeAnalysis{}));
}

int RunFindings(const std::vector<std::string>& args) {
  FlagSet flags("findings", "[-o table|json|markdown]",
                "Lists every finding code the agent can emit, with severity, meaning and the alert "
                "(runbook) that pages for it.");
  AddCommonFlags(flags);
  if (auto rc = ParseOrExit(flags, args, {"table", "json", "markdown"})) return *rc;
  std::string out = flags.Get("output", "table");
  if (out == "json") {
    JsonWriter j;
    j.BeginArray();
    for (const auto& c : AllFindingCodes()) {
      j.BeginObject().Field("code", c.name).Field("severity", SeverityName(c.severity));
      j.Field("meaning", c.meaning).Field("hint", c.hint);
      j.Field("alert", AlertForFinding(c.code)).Field("runbook", RunbookForFinding(c.code));
      j.EndObject();
    }
    j.EndArray();
    std::fputs((j.str() + "\n").c_str(), stdout);
  } else if (out == "markdown") {
    std::fputs("| code | severity | meaning | alert (runbook) |\n|---|---|---|---|\n", stdout);
    for (const auto& c : AllFindingCodes()) {
      const std::string_view alert = AlertForFinding(c.code);
      const std::string paged_by =
          alert.empty() ? "–" : "[" + std::string(alert) + "](" + RunbookForFinding(c.code) + ")";
      std::printf("| `%.*s` | %.*s | %.*s | %s |\n", static_cast<int>(c.name.size()), c.name.data(),
                  static_cast<int>(SeverityName(c.severity).size()),
                  SeverityName(c.severity).data(), static_cast<int>(c.meaning.size()),
                  c.meaning.data(), paged_by.c_str());
    }
  } else {
    for (const auto& c : AllFindingCodes()) {
      std::printf("%-22.*s %-9.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                  static_cast<int>(SeverityName(c.severity).size()),
                  SeverityName(c.severity).data(), static_cast<int>(c.meaning.size()),
                  c.meaning.data());
    }
  }
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kTopUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitScanFailed : 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  if (command == "report") return RunReport(args);
  if (command == "watch") return RunWatch(args);
  if (command == "serve") return RunServe(args);
  if (command == "rules") return RunRules(args);
  if (command == "findings") return RunFindings(args);
  if (command == "flows") return RunFlows(args);
  if (command == "version" || command == "--version") {
    std::printf("ambient-doctor %s\n", AgentVersionText().c_str());
    return 0;
  }
  std::fprintf(stderr, "ambient-doctor: unknown command \"%s\"\n\n%s", command.c_str(), kTopUsage);
  return kExitScanFailed;
}

}  // namespace ad::cli
