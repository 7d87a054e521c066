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
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "analysis/analysis.h"
#include "api/api_server.h"
#include "cli/flags.h"
#include "cli/flows_command.h"
#include "cli/report_render.h"
#include "cli/rules_render.h"
#include "daemon/daemon.h"
#include "engine/engine.h"
#include "metrics/metrics_endpoint.h"
#include "model/json.h"
#include "report/report_policy.h"
#include "scan/inspector.h"
#include "sources/netns/discovery.h"

namespace ad::cli {
namespace {

constexpr const char* kVersion = "0.1.0";

constexpr const char* kTopUsage =
    R"(ambient-doctor: is every pod on this node really in the Istio ambient mesh?

Usage: ambient-doctor <command> [flags]

Commands:
  report     Scan every network namespace of the node and print the report (exit 0 healthy,
             1 findings at warning or above, 2 scan failed).
  watch      Rescan periodically and print one line per finding opened or resolved.
  serve      Run as the node daemon: scan at start and on an interval, keep finding history,
             log one line per change (the gRPC API and metrics attach to it).
  rules      Print the normalized netfilter rules and policy routes of one netns.
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
             .help = "Threads that inspect netns in parallel."});
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

int RunReport(const std::vector<std::string>& args) {
  FlagSet flags("report", "[flags]",
                "Scans every network namespace of the node in-process (iptables-legacy, "
                "iptables-nft and nftables; IPv4 and IPv6; policy routes), judges each against "
                "Istio's ambient rule sets, and cross-checks the istio-cni -> ztunnel (ZDS) "
                "hand-off with the kernel's sockets, process fds, ztunnel's admin view and CRI.");
  AddScanFlags(flags);
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
  if (flags.Get("output", "table") == "json") {
    std::fputs(RenderReportJson(step.snapshot, step.analysis).c_str(), stdout);
  } else {
    RenderOptions render;
    render.color = UseColor(flags.Get("color", "auto"));
    render.show_all_netns = !flags.Has("istio-only");
    std::fputs(RenderReportTable(step.snapshot, step.analysis, render).c_str(), stdout);
  }
  return ReportExitCode(step.analysis);
}

int RunWatch(const std::vector<std::string>& args) {
  FlagSet flags("watch", "[--interval 5s] [--count N] [report flags]",
                "Rescans the node periodically with one history of ZDS signals (so a hand-off "
                "pending past --zds-stall-threshold becomes ZDS_STALL) and prints one line per "
                "finding opened or resolved; with -o json, one JSON document (one line, schema "
                "ambient-doctor.changes/v1) per set of changes.");
  AddScanFlags(flags);
  flags.Add({.name = "interval",
             .value_name = "DURATION",
             .default_text = "5s",
             .help = "Time between the start of two scans."});
  flags.Add({.name = "count",
             .value_name = "N",
             .default_text = "0 (until interrupted)",
             .help = "Stop after N scans; the exit code then follows the last scan like report."});
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
      const std::string text =
          json ? RenderChangesJson(step.snapshot, step.analysis, step.changes)
               : RenderChangeLines(step.changes, step.snapshot.taken_at_unix_ms, color);
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
    std::thread worker([&] { read = MakeKernelInspector(ReadLimits{})->Inspect(record); });
    worker.join();
    return std::move(*read);
  };
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
                "every --interval and re-reads everything every --resync-interval. Keeps the "
                "history of every finding (first seen, last seen, resolved) and of ZDS signals, "
                "serves /metrics and /healthz, and logs one line per finding opened or resolved "
                "and per source degraded or recovered. SIGTERM or SIGINT stops it.");
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
             .help = "Re-read every netns this often, whatever the change events said."});
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
  const auto resync = PositiveDurationFlag(flags, "resync-interval", "60s");
  if (!resync) return kExitScanFailed;
  options.full_resync = std::chrono::milliseconds(*resync);
  options.event_driven = !flags.Has("no-events");
  const auto stale_after = PositiveDurationFlag(flags, "healthz-stale-after", "120s");
  if (!stale_after) return kExitScanFailed;
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
                                          .stale_after_ms = *stale_after});
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
  std::thread metrics_feed([&exporter, &daemon] { exporter.FollowHub(daemon.hub()); });
  std::unique_ptr<api::ApiServer> api_server;
  if (const std::string socket = flags.Get("api-socket", api::kDefaultSocketPath);
      socket != "off") {
    api::ApiServerOptions api_options;
    api_options.socket_path = socket;
    api_options.version = kVersion;
    auto started = api::ApiServer::Start(api_options, daemon.shared_hub(),
                                         MakeNetnsReader(daemon.shared_hub()));
    if (!started.ok()) {
      spdlog::error("{}", NoteLine("gRPC API: " + started.error().message, format));
      daemon.Stop();
      daemon.hub().Stop();
      metrics_feed.join();
      return kExitScanFailed;
    }
    api_server = std::move(*started);
    spdlog::info("{}", NoteLine("gRPC API on unix:" + socket, format));
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
  metrics_feed.join();
  if (api_server) api_server->Shutdown();
  if (endpoint) endpoint->Stop();
  spdlog::info("{}",
               NoteLine("stopped after " + std::to_string(daemon.steps()) + " scans", format));
  return 0;
}

int RunRules(const std::vector<std::string>& args) {
  FlagSet flags("rules", "(--netns PATH | --pid PID) [flags]",
                "Prints the normalized rule set of one network namespace: every backend, family, "
                "table and chain, ipsets, policy rules and the routes of table 100.");
  flags.Add({.name = "netns",
             .value_name = "PATH",
             .help = "Netns bind mount or /proc/<pid>/ns/net to read."});
  flags.Add({.name = "pid", .value_name = "PID", .help = "Read the netns of this process."});
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .default_text = "/proc",
             .help = "procfs used to resolve --pid."});
  AddCommonFlags(flags);
  if (auto rc = ParseOrExit(flags, args)) return *rc;
  SetupLogging(flags.Get("log-level", "warn"));

  std::string path = flags.Get("netns");
  if (flags.Has("pid")) path = flags.Get("proc-root", "/proc") + "/" + flags.Get("pid") + "/ns/net";
  if (path.empty() || (flags.Has("pid") && flags.Has("netns"))) {
    std::fprintf(stderr, "ambient-doctor rules: give exactly one of --netns PATH or --pid PID\n");
    return kExitScanFailed;
  }
  Result<NetnsRecord> found = NetnsRecordForPath(path);
  if (!found.ok()) {
    std::fprintf(stderr, "ambient-doctor rules: %s\n", found.error().message.c_str());
    return kExitScanFailed;
  }
  const NetnsRecord record = std::move(found).value();
  auto inspector = MakeKernelInspector(ReadLimits{});
  NetnsSnapshot ns = inspector->Inspect(record);
  NetnsClassification c = Classify(ns);
  if (flags.Get("output", "table") == "json") {
    std::fputs(RenderRulesJson(ns, c).c_str(), stdout);
  } else {
    std::fputs(RenderRulesText(ns, c).c_str(), stdout);
  }
  return ns.unreadable ? kExitScanFailed : 0;
}

int RunFindings(const std::vector<std::string>& args) {
  FlagSet flags("findings", "[-o table|json|markdown]",
                "Lists every finding code the agent can emit, with severity and meaning.");
  AddCommonFlags(flags);
  if (auto rc = ParseOrExit(flags, args, {"table", "json", "markdown"})) return *rc;
  std::string out = flags.Get("output", "table");
  if (out == "json") {
    JsonWriter j;
    j.BeginArray();
    for (const auto& c : AllFindingCodes()) {
      j.BeginObject().Field("code", c.name).Field("severity", SeverityName(c.severity));
      j.Field("meaning", c.meaning).Field("hint", c.hint).EndObject();
    }
    j.EndArray();
    std::fputs((j.str() + "\n").c_str(), stdout);
  } else if (out == "markdown") {
    std::fputs("| code | severity | meaning |\n|---|---|---|\n", stdout);
    for (const auto& c : AllFindingCodes()) {
      std::printf("| `%.*s` | %.*s | %.*s |\n", static_cast<int>(c.name.size()), c.name.data(),
                  static_cast<int>(SeverityName(c.severity).size()),
                  SeverityName(c.severity).data(), static_cast<int>(c.meaning.size()),
                  c.meaning.data());
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
    std::printf("ambient-doctor %s\n", kVersion);
    return 0;
  }
  std::fprintf(stderr, "ambient-doctor: unknown command \"%s\"\n\n%s", command.c_str(), kTopUsage);
  return kExitScanFailed;
}

}  // namespace ad::cli
