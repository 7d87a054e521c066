#include "cli/command_common.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>

#include "report/report_policy.h"

namespace ad::cli {

std::vector<std::string> PortTexts(const std::vector<uint16_t>& ports) {
  std::vector<std::string> texts;
  for (uint16_t port : ports) texts.push_back(std::to_string(port));
  return texts;
}

// Where `scripts/lab up` writes the flags that scan its node (the lab's concern, not ours: the
// agent only knows this one path, for --lab).
std::string LabFlagsPath(const std::string& prefix) {
  return "/run/ambient-lab/" + prefix + ".flags";
}

void SetupLogging(const std::string& level) {
  // Once per process; a second command parsed in the same process (tests) keeps the logger.
  auto logger = spdlog::get("ambient-doctor");
  if (!logger) logger = spdlog::stderr_color_mt("ambient-doctor");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

namespace {

void AddLogLevelFlag(FlagSet& flags, CommonConfig& config) {
  flags.Add({.name = "log-level",
             .value_name = "LEVEL",
             .help = "Log level on stderr: trace, debug, info, warn, error, off."},
            &config.log_level);
}

}  // namespace

void AddCommonFlags(FlagSet& flags, CommonConfig& config) {
  flags.Add({.name = "output",
             .short_name = 'o',
             .value_name = "FORMAT",
             .help = "Output format: table or json."},
            &config.output);
  AddLogLevelFlag(flags, config);
}

void AddFromFlag(FlagSet& flags, LayerConfig& layers) {
  flags.Add({.name = "from",
             .value_name = "FILE",
             .help = "Judge a capture (ambient-doctor capture -o FILE) instead of this node: "
                     "anywhere, without root, nothing read from the kernel or asked of a daemon "
                     "or the Kubernetes API. The capture's own scan flags apply; analysis flags "
                     "given here (thresholds, --enrollment-grace, ...) override them."},
            &layers.from);
}

std::vector<std::string> ReplayableScanFlags(const std::vector<std::string>& layered_args) {
  ScanConfig scratch;
  FlagSet report("report", "", "");
  AddScanFlags(report, scratch);
  static const std::set<std::string> kNotReplayed = {
      "-o", "--output", "--log-level", "--config", "--lab", "--lab-prefix", "--color"};
  std::vector<std::string> kept;
  for (size_t i = 0; i < layered_args.size(); ++i) {
    const std::string& arg = layered_args[i];
    const std::string name = arg.substr(0, arg.find('='));
    const std::optional<bool> takes_value = report.TakesValue(name);
    const bool has_value =
        takes_value.value_or(false) && name == arg && i + 1 < layered_args.size();
    if (takes_value && !kNotReplayed.contains(name)) {
      kept.push_back(arg);
      if (has_value) kept.push_back(layered_args[i + 1]);
    }
    if (has_value) ++i;
  }
  return kept;
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) return ErrnoError(SourceKind::kCapture, partial);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return ErrnoError(SourceKind::kCapture, partial);
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(partial.c_str());
    return ErrnoError(SourceKind::kCapture, path, err);
  }
  return {};
}

Result<capture::Capture> ReadCaptureFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(SourceKind::kCapture, path);
  // Read in chunks up to one past the cap (a pipe or /dev/stdin has no size to ask first): a
  // larger file is not a capture this reader takes, and memory grows only with what is there.
  std::string bytes;
  std::array<char, 1 << 16> chunk;
  while (in && bytes.size() <= capture::kMaxFileBytes) {
    in.read(chunk.data(), chunk.size());
    bytes.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  if (bytes.size() > capture::kMaxFileBytes) {
    return SourceError{SourceKind::kCapture, path + ": larger than a capture can be (" +
                                                 std::to_string(capture::kMaxFileBytes >> 20) +
                                                 " MiB)"};
  }
  Result<capture::Capture> decoded = capture::Decode(bytes);
  if (!decoded.ok()) {
    return SourceError{SourceKind::kCapture, path + ": " + decoded.error().message};
  }
  return decoded;
}

namespace {

void AddDiscoveryFlags(FlagSet& flags, ScanConfig& config) {
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .help = "procfs to scan for process netns (use /host/proc in a pod)."},
            &config.engine.discovery.proc_root);
  flags.Add({.name = "no-proc", .help = "Do not scan processes for netns; only netns bind mounts."},
            &config.no_proc);
  flags.Add({.name = "netns-dir", .value_name = "DIR", .help = "Directory of netns bind mounts."},
            &config.engine.discovery.netns_dirs);
  flags.Add({.name = "host-netns",
             .value_name = "PATH",
             .default_text = "<proc-root>/1/ns/net",
             .help = "The node's host network namespace."},
            &config.engine.discovery.host_netns_path);
  flags.Add({.name = "netns-match",
             .value_name = "GLOB",
             .help = "Only bind mounts whose file name matches this glob."},
            &config.engine.discovery.name_glob);
  flags.Add(
      {.name = "config",
       .value_name = "FILE",
       .help = "Read flags from FILE first (one flag per line, \"--name value\"; # comments); "
               "flags on the command line override it."},
      &config.layers.config);
  flags.Add({.name = "lab",
             .help = "Scan the embedded lab node (scripts/lab up): shorthand for --config "
                     "/run/ambient-lab/<lab-prefix>.flags, the flags the lab wrote for itself."},
            &config.layers.lab);
  flags.Add({.name = "lab-prefix",
             .value_name = "NAME",
             .help = "Name prefix of the lab node to scan (implies --lab)."},
            &config.layers.lab_prefix);
}

void AddNodeSourceFlags(FlagSet& flags, ScanConfig& config) {
  flags.Add({.name = "zds-socket",
             .value_name = "PATH",
             .help = "istio-cni's ZDS socket, observed through sock_diag only (never connected)."},
            &config.engine.zds_socket);
  flags.Add({.name = "host-root",
             .value_name = "PATH",
             .default_text = "\"\"",
             .help = "Prefix for host paths (ZDS socket, CRI socket, netns pins) when the node's / "
                     "is mounted elsewhere, e.g. /host in a pod."},
            &config.engine.host_root);
  flags.Add({.name = "cri-endpoint",
             .value_name = "unix://PATH",
             .default_text = "probe containerd, CRI-O, cri-dockerd sockets",
             .help = "CRI runtime socket used to name the pods of each netns."},
            &config.engine.cri_endpoints);
  flags.Add({.name = "no-cri", .help = "Do not ask the container runtime."}, &config.no_cri);
  flags.Add({.name = "no-probe-path",
             .help = "Skip the host netns conntrack read (kernel-filtered ctnetlink dump of "
                     "unreplied kubelet probe connections) and PROBE_PATH_BROKEN."},
            &config.no_probe_path);
  flags.Add({.name = "probe-path-threshold",
             .value_name = "DURATION",
             .help = "How long probe connections to a pod must stay unreplied before "
                     "PROBE_PATH_BROKEN (across scans, or by the conntrack entry's age)."},
            &config.probe_path_threshold);
  flags.Add({.name = "cni-conf-dir",
             .value_name = "DIR",
             .help = "The node's CNI config directory (a host path, read under --host-root), "
                     "checked for istio-cni in the chain the runtime uses (CNI_CHAIN_BROKEN). "
                     "`auto`: the directory the runtime reports (containerd's CRI Status, "
                     "CRI-O's config), else /etc/cni/net.d if it holds a config, else the chain "
                     "is not judged; `off` skips the check."},
            &config.cni_conf_dir);
  flags.Add({.name = "no-nft-probe",
             .help = "Skip the nftables userspace check (NFT_BACKEND_UNUSABLE): package version, "
                     "JSON support and `nft -j list ruleset` in a throwaway netns."},
            &config.no_nft_probe);
  flags.Add({.name = "no-zds",
             .help = "Skip the ZDS socket, process fd inventory and ztunnel admin sources (and "
                     "every ZDS check)."},
            &config.no_zds);
  flags.Add({.name = "ztunnel-admin-port",
             .value_name = "PORT",
             .help = "ztunnel admin port for /config_dump (read-only GETs)."},
            &config.ztunnel_admin_port);
  flags.Add({.name = "ztunnel-netns",
             .value_name = "PATH",
             .help = "A further netns where a ztunnel admin listens (besides the netns of every "
                     "ztunnel process found)."},
            &config.engine.ztunnel_netns);
  flags.Add(
      {.name = "zds-stall-threshold",
       .value_name = "DURATION",
       .help = "How long a ZDS hand-off may stay pending before it is a stall (ms, s, m, h)."},
      &config.zds_stall_threshold);
  flags.Add({.name = "cert-expiry-warning",
             .value_name = "DURATION",
             .help = "ZTUNNEL_CERT_UNHEALTHY when ztunnel's certificate of a pod identity on the "
                     "node expires within this long (or is Unavailable)."},
            &config.cert_expiry_warning);
}

}  // namespace

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

// A positive duration flag's value; nullopt after explaining on stderr.
std::optional<int64_t> PositiveDuration(const std::string& name, const std::string& text,
                                        const std::string& example) {
  const auto value = ParseDurationMs(text);
  if (!value || *value <= 0) {
    std::fprintf(stderr, "ambient-doctor: --%s needs a positive duration such as %s\n",
                 name.c_str(), example.c_str());
    return std::nullopt;
  }
  return value;
}

// The Kubernetes API source and the desired-state checks.
void AddKubeFlags(FlagSet& flags, ScanConfig& config) {
  flags.Add(
      {.name = "kubeconfig",
       .value_name = "FILE",
       .default_text = "in-cluster",
       .help = "Read the Kubernetes API with this kubeconfig (its current context) instead of "
               "the in-cluster service account (KUBERNETES_SERVICE_HOST/_PORT and "
               "/var/run/secrets/kubernetes.io/serviceaccount). Only GET requests are sent. On "
               "the command line it overrides a --no-kube-api from --config or --lab."},
      &config.kube.kubeconfig);
  flags.Add({.name = "node-name",
             .value_name = "NAME",
             .default_text = "$NODE_NAME, else the hostname",
             .help = "This node's name in the Kubernetes API (its pods are listed with "
                     "spec.nodeName=NAME)."},
            &config.engine.node_name);
  flags.Add({.name = "no-kube-api",
             .help = "Do not read the Kubernetes API: no desired state (POD_NOT_ENROLLED, "
                     "ENROLLMENT_ANNOTATION_STALE, POD_ENROLLED_AGAINST_INTENT, "
                     "ZTUNNEL_NETNS_STALE) and no `explain pod`."},
            &config.no_kube_api);
  flags.Add({.name = "enrollment-grace",
             .value_name = "DURATION",
             .help = "Judge a pod's enrollment only once it (and its sandbox) is this old, so a "
                     "pod being set up is not a finding."},
            &config.enrollment_grace);
  flags.Add({.name = "exclude-namespaces",
             .value_name = "NS",
             .default_text = "kube-system",
             .help = "Namespaces istio-cni never enrolls (its EXCLUDE_NAMESPACES; repeat or "
                     "comma-separate). Giving the flag replaces the default."},
            &config.engine.desired.exclude_namespaces);
}

void AddScanFlags(FlagSet& flags, ScanConfig& config, bool output_format) {
  AddDiscoveryFlags(flags, config);
  AddNodeSourceFlags(flags, config);
  AddKubeFlags(flags, config);
  if (output_format) {
    AddCommonFlags(flags, config.common);
  } else {
    AddLogLevelFlag(flags, config.common);
  }
  flags.Add({.name = "workers",
             .value_name = "N",
             .help = "Threads that inspect netns in parallel (local scans)."},
            &config.engine.workers);
  flags.Add({.name = "color",
             .value_name = "WHEN",
             .help = "Colour: auto (only on a TTY), always, never."},
            &config.color);
}

// The engine's configuration from the scan flags; an error message on bad values.
std::optional<std::string> FinishScanConfig(ScanConfig& scan) {
  EngineConfig& config = scan.engine;
  // Process fds live under procfs even when discovery skips /proc (--no-proc).
  config.proc_root = config.discovery.proc_root;
  if (scan.no_proc) config.discovery.proc_root.clear();
  config.workers = std::max(1, config.workers);
  const auto threshold = ParseDurationMs(scan.zds_stall_threshold);
  if (!threshold) return "--zds-stall-threshold needs a duration such as 30s";
  config.analysis.zds_stall_threshold_ms = *threshold;
  const auto cert_warning = ParseDurationMs(scan.cert_expiry_warning);
  if (!cert_warning) return "--cert-expiry-warning needs a duration such as 1h";
  config.analysis.cert_expiry_warning_ms = *cert_warning;
  config.zds = !scan.no_zds;
  if (scan.ztunnel_admin_port <= 0 || scan.ztunnel_admin_port > 65535) {
    return "--ztunnel-admin-port needs a port number";
  }
  config.ztunnel_admin_port = static_cast<uint16_t>(scan.ztunnel_admin_port);
  config.cri = !scan.no_cri;
  config.probe_conntrack = !scan.no_probe_path;
  const auto probe_threshold = ParseDurationMs(scan.probe_path_threshold);
  if (!probe_threshold || *probe_threshold <= 0) {
    return "--probe-path-threshold needs a positive duration such as 10s";
  }
  config.analysis.probe_path_threshold_ms = *probe_threshold;
  if (scan.cni_conf_dir == "off") {
    config.cni_conf_dir.clear();
  } else if (scan.cni_conf_dir == "auto") {
    config.cni_conf_dir_given = false;  // EngineConfig's default directory is the fallback
  } else if (scan.cni_conf_dir.empty() || scan.cni_conf_dir.front() != '/') {
    return "--cni-conf-dir needs an absolute directory (a host path), auto or off";
  } else {
    config.cni_conf_dir = scan.cni_conf_dir;
    config.cni_conf_dir_given = true;
  }
  config.nft_userspace = !scan.no_nft_probe;
  const auto grace = ParseDurationMs(scan.enrollment_grace);
  if (!grace || *grace < 0) return "--enrollment-grace needs a duration such as 30s";
  config.desired.enrollment_grace_ms = *grace;
  std::vector<std::string> excluded;  // "a,b" and repeated flags alike
  for (const std::string& value : config.desired.exclude_namespaces) {
    for (size_t start = 0; start <= value.size();) {
      const size_t comma = std::min(value.find(',', start), value.size());
      if (comma > start) excluded.push_back(value.substr(start, comma - start));
      start = comma + 1;
    }
  }
  config.desired.exclude_namespaces = std::move(excluded);
  scan.kube.enabled = !scan.no_kube_api || scan.layers.kubeconfig_on_command_line;
  scan.kube.node_name = config.node_name;
  return std::nullopt;
}

namespace {

// The capture's replay: the same engine, fed the capture's snapshot at its time.
LocalScan ReplayCapture(ScanConfig& scan) {
  const capture::Capture& taken = *scan.layers.capture;
  scan.engine.analysis.history_known = ReplaysDaemonHistory(scan);
  Engine engine = Engine::Replay(std::move(scan.engine), taken.snapshot, taken.memory);
  return {.kube = nullptr, .step = engine.Step()};
}

}  // namespace

bool ReplaysDaemonHistory(const ScanConfig& scan) {
  return scan.layers.capture && scan.layers.capture->manifest.origin == "daemon";
}

LocalScan ScanLocally(ScanConfig& scan) {
  if (scan.layers.capture) return ReplayCapture(scan);
  if (::geteuid() != 0) {
    spdlog::warn("not running as root: entering other network namespaces will likely fail");
  }
  scan.engine.analysis.history_known = false;  // one step: nothing seen before
  // The lists fail (hung, unreachable) before the wait ends, so the report can say why.
  KubeSourceConfig kube = scan.kube;
  kube.list_deadline = kKubeSyncWait - std::chrono::seconds(2);
  LocalScan local{.kube = KubeLink::Start(kube)};
  (void)local.kube->WaitSynced(kKubeSyncWait);  // the report says why when it did not sync
  Engine engine(std::move(scan.engine));
  engine.set_kube_view([kube = local.kube.get()] { return kube->View(); });
  local.step = engine.Step();
  return local;
}

void SetLocalOrigin(const ScanConfig& scan, const DaemonChoice& daemon,
                    ::ambientdoctor::v1::ReportOrigin& origin) {
  if (!scan.layers.capture) {
    origin.set_source("local");
    origin.set_api_socket(daemon.socket);
    origin.set_fallback_reason(daemon.fallback_reason);
    return;
  }
  const capture::Manifest& manifest = scan.layers.capture->manifest;
  origin.set_source("capture");
  origin.set_capture_file(scan.layers.from);
  origin.set_captured_by(manifest.agent_version);
  origin.set_captured_from(manifest.origin);
  origin.set_history(ReplaysDaemonHistory(scan));
  origin.set_age_ms(
      static_cast<double>(std::max<int64_t>(0, NowUnixMs() - manifest.taken_at_unix_ms)));
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
                               LayerConfig* layers, const std::string& output,
                               const std::vector<std::string>& formats) {
  if (auto err = flags.Parse(args)) {
    std::fprintf(stderr, "ambient-doctor: %s\n", err->c_str());
    return kExitScanFailed;
  }
  // A flags file (--config, or the lab's own with --lab) is a lower layer: parse it, then the
  // command line again so that its flags win.
  if (layers != nullptr) {
    layers->kubeconfig_on_command_line = flags.Given("kubeconfig") && !flags.Given("no-kube-api");
  }
  std::optional<std::string> config_file;
  std::optional<std::vector<std::string>> lower_args;  // the flags file's, or the capture's
  if (layers != nullptr && !layers->from.empty() && !flags.help()) {
    if (!layers->config.empty() || layers->lab || flags.Given("lab-prefix")) {
      std::fprintf(stderr,
                   "ambient-doctor: --from judges a capture with the flags it was taken with; "
                   "--config, --lab and --lab-prefix do not apply to it\n");
      return kExitScanFailed;
    }
    Result<capture::Capture> loaded = ReadCaptureFile(layers->from);
    if (!loaded.ok()) {
      std::fprintf(stderr, "ambient-doctor: %s\n", loaded.error().message.c_str());
      return kExitScanFailed;
    }
    layers->capture = std::make_shared<const capture::Capture>(std::move(loaded).value());
    lower_args = layers->capture->manifest.agent_flags;
  } else if (layers != nullptr && !layers->config.empty()) {
    config_file = layers->config;
  } else if (layers != nullptr && (layers->lab || flags.Given("lab-prefix"))) {
    config_file = LabFlagsPath(layers->lab_prefix);
  }
  if (config_file && !flags.help()) {
    Result<std::vector<std::string>> file_args = ReadFlagsFile(*config_file);
    if (!file_args.ok()) {
      std::fprintf(stderr, "ambient-doctor: %s\n", file_args.error().message.c_str());
      if (layers->config.empty()) {
        std::fprintf(stderr, "ambient-doctor: is the lab up? (scripts/lab up --prefix %s)\n",
                     layers->lab_prefix.c_str());
      }
      return kExitScanFailed;
    }
    lower_args = std::move(file_args).value();
  }
  if (lower_args) {
    const std::string where = config_file ? *config_file : layers->from + " (its scan flags)";
    if (auto err = flags.Parse(*lower_args)) {
      std::fprintf(stderr, "ambient-doctor: %s: %s\n", where.c_str(), err->c_str());
      return kExitScanFailed;
    }
    (void)flags.Parse(args);  // parsed once already
  }
  if (layers != nullptr) {
    layers->layered_args = lower_args.value_or(std::vector<std::string>{});
    layers->layered_args.insert(layers->layered_args.end(), args.begin(), args.end());
  }
  if (flags.help()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  if (auto error = flags.PositionalError()) {
    std::fprintf(stderr, "ambient-doctor: %s\n", error->c_str());
    return kExitScanFailed;
  }
  if (std::find(formats.begin(), formats.end(), output) == formats.end()) {
    std::string allowed;
    for (const auto& f : formats) allowed += (allowed.empty() ? "" : ", ") + f;
    std::fprintf(stderr, "ambient-doctor: unknown output format \"%s\" (one of: %s)\n",
                 output.c_str(), allowed.c_str());
    return kExitScanFailed;
  }
  return std::nullopt;
}

std::optional<int> ParseScanCommand(FlagSet& flags, const std::vector<std::string>& args,
                                    ScanConfig& config) {
  if (auto rc = ParseOrExit(flags, args, &config.layers, config.common.output)) return rc;
  SetupLogging(config.common.log_level);
  if (auto error = FinishScanConfig(config)) {
    std::fprintf(stderr, "ambient-doctor: %s\n", error->c_str());
    return kExitScanFailed;
  }
  return std::nullopt;
}

void AddClientFlags(FlagSet& flags, ClientConfig& config) {
  flags.Add({.name = "local",
             .help = "Scan locally even when the daemon (serve) answers on --api-socket."},
            &config.local);
  flags.Add({.name = "api-socket",
             .value_name = "PATH",
             .help = "The daemon's gRPC socket. Used when it exists and answers (within ~2 s); "
                     "else the command scans locally and says why."},
            &config.api_socket);
}

namespace {

// Flags that pick what a scan covers or how it judges. The daemon scans its own configured scope,
// so with any of them on the command line the command scans locally (or, with an explicit
// --api-socket, refuses). --lab and --lab-prefix select the lab node, never the daemon's. A
// --config file is not one of them: it is the node's shared agent flags (the DaemonSet's
// agent.flags, which serve reads too), so its scope is taken to be the daemon's.
constexpr const char* kScanScopeFlags[] = {"lab",
                                           "lab-prefix",
                                           "proc-root",
                                           "no-proc",
                                           "netns-dir",
                                           "host-netns",
                                           "netns-match",
                                           "zds-socket",
                                           "host-root",
                                           "cri-endpoint",
                                           "no-cri",
                                           "no-zds",
                                           "ztunnel-admin-port",
                                           "ztunnel-netns",
                                           "zds-stall-threshold",
                                           "no-probe-path",
                                           "probe-path-threshold",
                                           "cni-conf-dir",
                                           "no-nft-probe",
                                           "cert-expiry-warning",
                                           "kubeconfig",
                                           "node-name",
                                           "no-kube-api",
                                           "enrollment-grace",
                                           "exclude-namespaces"};

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
DaemonChoice ChooseDaemon(const FlagSet& flags, const ClientConfig& config,
                          const std::string& command, bool scoped) {
  DaemonChoice choice;
  if (config.local) {
    choice.fallback_reason = "--local";
    return choice;
  }
  std::string scope;
  for (const char* name : kScanScopeFlags) {
    if (scoped && flags.Given(name)) scope += (scope.empty() ? "--" : ", --") + std::string(name);
  }
  if (!scope.empty()) {
    if (flags.Given("api-socket")) {
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
  choice.socket = config.api_socket;
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
