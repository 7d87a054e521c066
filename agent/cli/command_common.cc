#include "cli/command_common.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "report/report_policy.h"

namespace ad::cli {

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
                               const std::vector<std::string>& formats) {
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
  if (auto error = flags.PositionalError()) {
    std::fprintf(stderr, "ambient-doctor: %s\n", error->c_str());
    return kExitScanFailed;
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

namespace {

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

}  // namespace

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
                          const std::string& command, bool scoped) {
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

}  // namespace ad::cli
