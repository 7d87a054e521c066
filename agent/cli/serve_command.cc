#include "cli/serve_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "api/api_server.h"
#include "daemon/serve_app.h"
#include "model/host_port.h"
#include "report/report_policy.h"

namespace ad::cli {
namespace {

// The flags of `serve`.
struct ServeConfig {
  ServeConfig() { scan.common.log_level = "info"; }
  ScanConfig scan;
  std::string interval = "5s";
  std::string log_format = "text";
  std::string resync_interval = "60s";
  bool no_events = false;
  std::string api_socket = api::kDefaultSocketPath;
  std::string api_address;
  std::string api_tls_cert;
  std::string api_tls_key;
  std::string api_tls_client_ca;
  std::string metrics_address = "0.0.0.0:" + std::to_string(kDefaultMetricsPort);
  bool metrics_per_pod = false;
  std::string healthz_stale_after = "120s";
  bool no_flows = false;
  std::vector<std::string> flow_ports = PortTexts(TracerOptions{}.ports);
  std::string flow_attach = "auto";
  std::string flow_btf = TracerOptions{}.btf_path;
  bool flow_all_connects = false;
  bool no_flow_bypass = false;
  // A quarter of the tracer's default: the daemon's ring's data pages count twice in its RSS.
  std::string flow_ring_bytes = "262144";
  std::string flow_window = "5m";
  std::string flow_live_interval = "5s";
};

void AddServeFlags(FlagSet& flags, ServeConfig& config) {
  AddScanFlags(flags, config.scan);
  flags.Add({.name = "interval",
             .value_name = "DURATION",
             .help = "Poll interval of the node-wide sources and legacy fingerprints."},
            &config.interval);
  flags.Add({.name = "log-format",
             .value_name = "FORMAT",
             .help = "text, or json (one JSON object per line: ts, level, event)."},
            &config.log_format);
  flags.Add({.name = "resync-interval",
             .value_name = "DURATION",
             .help = "Resync this often, whatever the change events said: re-read the netns "
                     "whose nf_tables generation or iptables-legacy hash changed, the host "
                     "netns, every netns's listeners and a rolling tenth of the rest in full "
                     "(without events: everything)."},
            &config.resync_interval);
  flags.Add({.name = "no-events",
             .help = "Do not subscribe to nf_tables/rtnetlink events: re-read every netns on "
                     "every --interval."},
            &config.no_events);
  flags.Add({.name = "api-socket",
             .value_name = "PATH",
             .help = "Unix socket of the gRPC API (ambientdoctor.v1.AmbientDoctor, health, "
                     "reflection); its directory is created 0700, the socket is 0600. \"off\" "
                     "disables it."},
            &config.api_socket);
  flags.Add({.name = "api-address",
             .value_name = "HOST:PORT",
             .help = "Also serve the gRPC API over TCP, only with TLS (needs --api-tls-cert and "
                     "--api-tls-key): an IPv4 or bracketed IPv6 literal and a port, e.g. "
                     "0.0.0.0:9978 or [::]:9978. Same limits as the socket."},
            &config.api_address);
  flags.Add({.name = "api-tls-cert",
             .value_name = "FILE",
             .help = "PEM certificate chain (leaf first) of the TCP listener."},
            &config.api_tls_cert);
  flags.Add({.name = "api-tls-key",
             .value_name = "FILE",
             .help = "PEM private key of --api-tls-cert (unencrypted)."},
            &config.api_tls_key);
  flags.Add({.name = "api-tls-client-ca",
             .value_name = "FILE",
             .help = "PEM CA certificate(s): TCP clients must present a certificate signed by "
                     "one of them (mutual TLS)."},
            &config.api_tls_client_ca);
  flags.Add({.name = "metrics-address",
             .value_name = "HOST:PORT",
             .help = "Where /metrics (Prometheus) and /healthz are served; port 9977 is outside "
                     "Istio's 15000-15099 and kubelet's ports. \"off\" disables it."},
            &config.metrics_address);
  flags.Add({.name = "metrics-per-pod",
             .help = "Also export one redirect-state series per pod (the series count then grows "
                     "with the node's pods)."},
            &config.metrics_per_pod);
  flags.Add({.name = "healthz-stale-after",
             .value_name = "DURATION",
             .help = "/healthz fails when the last successful scan is older than this."},
            &config.healthz_stale_after);
}

void AddServeFlowFlags(FlagSet& flags, ServeConfig& config) {
  flags.Add({.name = "no-flows",
             .help = "Do not run the eBPF flow tracer (no StreamFlows, no HBONE_CONNECT_FAILURES / "
                     "MESH_BYPASS checks, no TRACING_UNAVAILABLE)."},
            &config.no_flows);
  flags.Add({.name = "flow-port",
             .value_name = "PORT",
             .help = "Port traced by the flow tracer (either end), up to 8, as `flows --port`; the "
                     "first is the HBONE port of the checks and metrics. MESH_BYPASS needs no "
                     "port here (see --no-flow-bypass)."},
            &config.flow_ports);
  flags.Add({.name = "flow-attach",
             .value_name = "MODE",
             .help = "Flow tracer attach type: auto, tp_btf, raw_tp, tracepoint (as `flows`)."},
            &config.flow_attach);
  flags.Add({.name = "flow-btf",
             .value_name = "PATH",
             .help = "Kernel BTF of the flow tracer; a missing file makes tracing unavailable "
                     "(TRACING_UNAVAILABLE) while the daemon keeps serving."},
            &config.flow_btf);
  flags.Add({.name = "flow-all-connects",
             .help = "Also trace every outgoing connection of the whole node, any netns (an "
                     "event pair per connect on the node; MESH_BYPASS does not need it)."},
            &config.flow_all_connects);
  flags.Add({.name = "no-flow-bypass",
             .help = "Do not trace the application connects of ambient pods (no MESH_BYPASS "
                     "check). By default every connect of the netns the scan finds ambient, and "
                     "ztunnel's accepts on 15001/15053 there, are traced; other netns pay one "
                     "kernel map lookup per connect."},
            &config.no_flow_bypass);
  flags.Add({.name = "flow-ring-bytes",
             .value_name = "N",
             .help = "Flow tracer ring-buffer size in bytes (rounded up to a power of two; its "
                     "data pages count twice in RSS). Smaller saves memory; lost events are "
                     "counted (ambient_doctor_flow_tracer_lost_events_total)."},
            &config.flow_ring_bytes);
  flags.Add({.name = "flow-window",
             .value_name = "DURATION",
             .help = "Closed flows the flow checks judge: those that ended this recently."},
            &config.flow_window);
  flags.Add({.name = "flow-live-interval",
             .value_name = "DURATION",
             .help = "Refresh the bytes, srtt and retransmits of open flows from sock_diag "
                     "tcp_info this often (StreamFlows \"update\" events, the flow view); only "
                     "netns with open flows are read. 0 turns it off."},
            &config.flow_live_interval);
}

// The daemon's loop from the flags: intervals, events, the publish cadence.
std::optional<std::string> DaemonFromFlags(ServeConfig& config, DaemonOptions& options,
                                           int64_t stale_after_ms) {
  if (auto error = FinishScanConfig(config.scan)) return error;
  options.engine = config.scan.engine;
  const auto interval = PositiveDuration("interval", config.interval, "5s");
  if (!interval) return "";
  options.poll_interval = std::chrono::milliseconds(*interval);
  // The conntrack dump walks the kernel's whole table: about every 15 s (every 3rd poll at 5 s;
  // every poll when the interval is longer), the slack keeps a poll's jitter from skipping one.
  options.engine.probe_conntrack_min_interval_ms = 14'500;
  // Each CLOSE_WAIT dump walks the whole TCP established hash (~1.5 ms a netns, the idle
  // daemon's largest single cost at 15 s): counted about every 30 s (a round of 250 pod netns, 4
  // a collection, then takes ~31 min; growth is judged over 3 rounds, a leak like ztunnel#1629
  // grows over hours; fd pressure is judged at every poll).
  options.engine.close_wait_min_interval_ms = 29'500;
  const auto resync = PositiveDuration("resync-interval", config.resync_interval, "60s");
  if (!resync) return "";
  options.full_resync = std::chrono::milliseconds(*resync);
  options.event_driven = !config.no_events;
  // Quiet polls are not published; publish often enough that /healthz never sees a stale result.
  options.max_unpublished =
      std::min(options.max_unpublished, std::chrono::milliseconds(stale_after_ms / 2));
  return std::nullopt;
}

// The flow tracer and its checks from the flags.
std::optional<std::string> FlowsFromFlags(const ServeConfig& config, ServeAppOptions& app) {
  app.flows = !config.no_flows;
  TracerOptions& tracer = app.flow.tracer;
  tracer.ports.clear();
  for (const std::string& text : config.flow_ports) {
    char* end = nullptr;
    const long port = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || port < 1 || port > 65535 ||
        tracer.ports.size() >= 8) {
      return "bad --flow-port \"" + text + "\" (1-65535, at most 8)";
    }
    tracer.ports.push_back(static_cast<uint16_t>(port));
  }
  std::optional<AttachMode> attach = ParseAttachMode(config.flow_attach);
  if (!attach) return "--flow-attach is auto, tp_btf, raw_tp or tracepoint";
  tracer.attach = *attach;
  tracer.btf_path = config.flow_btf;
  tracer.trace_all_connects = config.flow_all_connects;
  tracer.watch_bypass_netns = !config.no_flow_bypass;
  std::optional<uint32_t> ring_bytes = ParseRingBytes(config.flow_ring_bytes);
  if (!ring_bytes) return "--flow-ring-bytes must be between 4096 and 1073741824";
  tracer.ring_bytes = *ring_bytes;
  const auto flow_window = PositiveDuration("flow-window", config.flow_window, "5m");
  if (!flow_window) return "";
  const auto flow_live = ParseDurationMs(config.flow_live_interval);
  if (!flow_live) return "--flow-live-interval needs a duration such as 5s (0: off)";
  app.flow.live_interval = std::chrono::milliseconds(*flow_live);
  // The live refresh enters the netns of open flows: any netns the discovery can name, not only
  // the scanned ones (--netns-match).
  app.flow.discovery = app.daemon.engine.discovery;
  app.flow.discovery.name_glob.clear();
  app.flow_findings.window = std::chrono::milliseconds(*flow_window);
  app.flow_findings.checks.hbone_port = tracer.ports.front();
  return std::nullopt;
}

// The API's listeners from the flags; combinations are refused here, the files are checked when
// the API starts.
std::optional<std::string> ApiFromFlags(const ServeConfig& config, api::ApiServerOptions& api) {
  api.socket_path = config.api_socket == "off" ? "" : config.api_socket;
  api.tcp_address = config.api_address;
  api.tls = {.cert_file = config.api_tls_cert,
             .key_file = config.api_tls_key,
             .client_ca_file = config.api_tls_client_ca};
  const bool any_tls =
      !api.tls.cert_file.empty() || !api.tls.key_file.empty() || !api.tls.client_ca_file.empty();
  if (!api.tcp_address.empty() && (api.tls.cert_file.empty() || api.tls.key_file.empty())) {
    return "--api-address serves TCP only with TLS: give --api-tls-cert FILE and --api-tls-key "
           "FILE (plaintext TCP is refused)";
  }
  if (api.tcp_address.empty() && any_tls) {
    return "--api-tls-cert, --api-tls-key and --api-tls-client-ca are for the TCP listener: give "
           "--api-address HOST:PORT";
  }
  return std::nullopt;
}

// Everything serve runs, from the flags; an error for stderr ("" when already explained).
std::optional<std::string> ServeFromFlags(ServeConfig& config, const std::string& version,
                                          ServeAppOptions& app) {
  const std::string& log_format = config.log_format;
  if (log_format != "text" && log_format != "json") return "--log-format is text or json";
  app.log_format = log_format == "json" ? LogFormat::kJson : LogFormat::kText;
  const auto stale_after =
      PositiveDuration("healthz-stale-after", config.healthz_stale_after, "120s");
  if (!stale_after) return "";
  if (auto error = DaemonFromFlags(config, app.daemon, *stale_after)) return error;
  app.kube = config.scan.kube;
  if (auto error = FlowsFromFlags(config, app)) return error;
  if (auto error = ApiFromFlags(config, app.api)) return error;
  Result<std::optional<HttpServerOptions>> metrics = ParseMetricsAddress(config.metrics_address);
  if (!metrics.ok()) return metrics.error().message;
  app.metrics = metrics.value();
  app.api.version = version;
  app.api.capture_flags = ReplayableScanFlags(config.scan.layers.layered_args);
  app.metrics_options = MetricsOptions{.version = version,
                                       .per_pod_labels = config.metrics_per_pod,
                                       .stale_after_ms = *stale_after,
                                       .hbone_port = app.flow_findings.checks.hbone_port};
  return std::nullopt;
}

// The running app, for the signal handler (Stop() is async-signal-safe).
std::atomic<ServeApp*> g_app{nullptr};
void StopOnSignal(int) {
  if (ServeApp* app = g_app.load()) app->Stop();
}

}  // namespace

Result<std::optional<HttpServerOptions>> ParseMetricsAddress(const std::string& text) {
  if (text == "off") return std::optional<HttpServerOptions>{};
  Result<HostPort> parsed = ParseHostPort(text, PortZero::kPickFree);
  if (!parsed.ok()) {
    return SourceError{SourceKind::kHttp,
                       "--metrics-address needs HOST:PORT (or off): " + parsed.error().message,
                       EINVAL};
  }
  return std::optional<HttpServerOptions>{
      HttpServerOptions{.bind_address = parsed->host, .port = parsed->port}};
}

int RunServe(const std::vector<std::string>& args, const std::string& version) {
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
  ServeConfig config;
  AddServeFlags(flags, config);
  AddServeFlowFlags(flags, config);
  if (auto rc = ParseOrExit(flags, args, &config.scan.layers, config.scan.common.output)) {
    return *rc;
  }
  ServeAppOptions options;
  if (auto error = ServeFromFlags(config, version, options)) {
    if (!error->empty()) std::fprintf(stderr, "ambient-doctor: %s\n", error->c_str());
    return kExitScanFailed;
  }
  SetupLogging(config.scan.common.log_level);
  if (options.log_format == LogFormat::kJson) {
    spdlog::set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","event":%v})",
                        spdlog::pattern_time_type::utc);
  }
  const LogFormat format = options.log_format;
  ServeApp app(std::move(options));
  if (auto error = app.Start()) {
    if (!error->empty()) std::fprintf(stderr, "ambient-doctor: %s\n", error->c_str());
    return kExitScanFailed;
  }
  g_app = &app;
  struct sigaction action {};
  action.sa_handler = StopOnSignal;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  const uint64_t scans = app.Run();
  g_app = nullptr;
  spdlog::info("{}", NoteLine("stopped after " + std::to_string(scans) + " scans", format));
  return 0;
}

}  // namespace ad::cli
