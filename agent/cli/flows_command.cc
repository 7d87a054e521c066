#include "cli/flows_command.h"

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include "cli/command_common.h"
#include "cli/flags.h"
#include "cli/flows_render.h"
#include "client/api_client.h"
#include "flows/flow_joins.h"
#include "tracing/flow_tracer.h"
#include "tracing/live_tcp.h"

namespace ad::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 2;

std::atomic<bool> g_stop_flows{false};
void StopFlowsOnSignal(int) { g_stop_flows = true; }

// A flow of the daemon's StreamFlows as the table's event (the daemon spells addresses as text).
std::optional<FlowEvent> EventOf(const client::pb::Flow& message) {
  FlowEvent event;
  event.kind = message.event() == "close"    ? FlowEventKind::kClose
               : message.event() == "update" ? FlowEventKind::kUpdate
                                             : FlowEventKind::kOpen;
  Flow& flow = event.flow;
  std::optional<FlowAddress> src = ParseFlowAddress(message.tuple().src_ip());
  std::optional<FlowAddress> dst = ParseFlowAddress(message.tuple().dst_ip());
  if (!src || !dst) return std::nullopt;
  flow.tuple = {*src, static_cast<uint16_t>(message.tuple().src_port()), *dst,
                static_cast<uint16_t>(message.tuple().dst_port())};
  flow.flow_id = message.socket_cookie();
  flow.cookie_known = message.socket_cookie() != 0;
  flow.netns_inode = message.netns_inode();
  flow.role = message.role() == "server" ? FlowRole::kServer : FlowRole::kClient;
  flow.mark = message.mark();
  flow.started_unix_ns = static_cast<int64_t>(message.started_unix_ms() * 1e6);
  flow.ended_unix_ns = static_cast<int64_t>(message.ended_unix_ms() * 1e6);
  if (message.connect_latency_us() > 0 && flow.started_unix_ns != 0) {
    flow.established_unix_ns =
        flow.started_unix_ns + static_cast<int64_t>(message.connect_latency_us() * 1000);
  }
  flow.bytes_sent = message.bytes_sent();
  flow.bytes_received = message.bytes_received();
  flow.srtt_us = message.srtt_us();
  flow.retransmits = message.retransmits();
  flow.resets_received = message.resets();
  flow.outcome = ParseFlowOutcome(message.outcome()).value_or(FlowOutcome::kOpen);
  flow.live = message.live();
  if (flow.flow_id == 0) {
    // Without a cookie the table still needs one id per flow: the tuple and netns identify it.
    flow.flow_id = std::hash<std::string>{}(std::to_string(flow.netns_inode) + " " +
                                            Endpoint(*src, flow.tuple.src_port) + " " +
                                            Endpoint(*dst, flow.tuple.dst_port));
  }
  return event;
}

struct FlowFilter {
  std::optional<uint32_t> netns;
  std::optional<FlowOutcome> outcome;
  bool failed = false;
  bool Keep(const Flow& flow) const {
    if (netns && flow.netns_inode != *netns) return false;
    if (failed && !IsFailedOutcome(flow.outcome)) return false;
    if (outcome && flow.outcome != *outcome) return false;
    return true;
  }
};

void PrintFollowLine(std::string_view event, const Flow& flow, const FlowsReport& names,
                     bool json) {
  std::fputs(FollowLine(event, flow, names, json).c_str(), stdout);
  std::fflush(stdout);
}

// --follow: one line per flow message (table) or one JSON object per line, until interrupted.
int FollowDaemonFlows(client::FlowStream& stream, const FlowsReport& names,
                      const FlowFilter& filter, bool json) {
  client::pb::Flow message;
  while (!g_stop_flows) {
    const client::FlowStream::Read read = stream.Next(&message, std::chrono::milliseconds(200));
    if (read == client::FlowStream::Read::kIdle) continue;
    if (read == client::FlowStream::Read::kEnded) {
      std::fprintf(stderr, "ambient-doctor flows: %s\n", stream.end_error().message.c_str());
      return kExitFailed;
    }
    if (message.tuple().dst_ip().empty()) continue;  // an empty current set's marker
    std::optional<FlowEvent> event = EventOf(message);
    if (!event || !filter.Keep(event->flow)) continue;
    PrintFollowLine(message.event(), event->flow, names, json);
  }
  return kExitOk;
}

// --follow without the daemon: this process's tracer, one line per open/close event (and per
// live refresh that changed an open flow's numbers, every `live_interval`; 0: none) until
// interrupted. Netns are named by path as the one-shot form does; one first seen later is looked
// up then (NetnsPathCache: at most one discovery per unknown netns and minute).
int FollowLocalFlows(FlowTracer& tracer, FlowsReport& names, const DiscoveryOptions& discovery,
                     const FlowFilter& filter, const std::vector<uint16_t>& ports,
                     std::chrono::milliseconds live_interval, bool json) {
  NetnsPathCache paths(discovery);
  FlowTable table;
  auto name = [&](uint32_t inode) {
    if (names.netns_paths.contains(inode)) return;
    for (auto& [known, path] : paths.Resolve({inode})) names.netns_paths[known] = path;
  };
  auto print = [&](const FlowEvent& event) {
    if (!filter.Keep(event.flow)) return;
    name(event.flow.netns_inode);
    PrintFollowLine(FlowEventKindName(event.kind), event.flow, names, json);
  };
  auto next_live = std::chrono::steady_clock::now() + live_interval;
  while (!g_stop_flows) {
    Result<size_t> polled = tracer.Poll(std::chrono::milliseconds(200), [&](const FlowEvent& e) {
      // Only the --netns flows: the live refresh then enters that netns alone.
      if (!filter.netns || e.flow.netns_inode == *filter.netns) table.Apply(e);
      print(e);
    });
    if (!polled.ok()) {
      std::fprintf(stderr, "ambient-doctor flows: %s\n", polled.error().message.c_str());
      return kExitFailed;
    }
    if (live_interval.count() == 0 || std::chrono::steady_clock::now() < next_live) continue;
    next_live = std::chrono::steady_clock::now() + live_interval;
    const std::set<uint32_t> open = table.OpenNetns();
    if (open.empty()) continue;
    LiveNetnsRead live = ReadLiveTcpOfNetns(open, paths.Resolve(open), ports);
    for (const std::string& error : live.errors) spdlog::warn("live refresh: {}", error);
    std::vector<FlowEvent> updates;
    table.RefreshLive(live.sockets, &updates);
    for (const FlowEvent& update : updates) print(update);
  }
  return kExitOk;
}

// The flags of `flows`.
struct FlowsConfig {
  std::string duration = "10s";
  std::vector<std::string> ports = PortTexts(TracerOptions{}.ports);
  std::string netns;
  std::string outcome;
  std::string attach = "auto";
  std::string ring_bytes = std::to_string(TracerOptions{}.ring_bytes);
  bool all_connects = false;
  std::string btf = TracerOptions{}.btf_path;
  bool no_live = false;
  std::string proc_root = "/proc";
  std::string output = "table";
  bool follow = false;
  std::string pod;
  bool local = false;
  std::string api_socket = client::kDefaultApiSocket;
  std::string log_level = "warn";
};

void AddFlowsFlags(FlagSet& flags, FlowsConfig& config) {
  flags.Add({.name = "duration",
             .value_name = "D",
             .help = "How long to trace (ms, s, m, h). Ctrl-C ends early."},
            &config.duration);
  flags.Add({.name = "port",
             .value_name = "PORT",
             .help = "Traced TCP port (either end), up to 8; e.g. 15001 and 15006 for ztunnel's "
                     "in-pod listeners. Filtered in the kernel."},
            &config.ports);
  flags.Add({.name = "netns",
             .value_name = "PATH",
             .help = "Only flows of this netns (a bind mount or /proc/<pid>/ns/net)."},
            &config.netns);
  flags.Add({.name = "outcome",
             .value_name = "OUTCOME",
             .help = "Only flows with this outcome: failed (refused, reset, timeout, unreachable), "
                     "open, connecting, closed, refused, reset, timeout, unreachable, aborted."},
            &config.outcome);
  flags.Add({.name = "attach",
             .value_name = "MODE",
             .help = "Attach type: auto (tp_btf, then raw_tp, then tracepoint), tp_btf, raw_tp, "
                     "tracepoint (needs tracefs mounted; the agent never mounts it)."},
            &config.attach);
  flags.Add({.name = "ring-bytes",
             .value_name = "N",
             .help = "Ring-buffer size in bytes (a power of two; lost events are counted)."},
            &config.ring_bytes);
  flags.Add({.name = "all-connects",
             .help = "Also trace every outgoing connection, any destination port (the application "
                     "side of redirected traffic; an event pair per connect on the node)."},
            &config.all_connects);
  flags.Add({.name = "btf",
             .value_name = "PATH",
             .help = "Kernel BTF the tracer is relocated against (CO-RE)."},
            &config.btf);
  flags.Add({.name = "no-live",
             .help = "Do not refresh the byte counts of open flows from sock_diag tcp_info (with a "
                     "local --follow: no update lines)."},
            &config.no_live);
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .help = "procfs used to name netns by path (and for /proc/<pid>/ns/net)."},
            &config.proc_root);
  flags.Add({.name = "output",
             .short_name = 'o',
             .value_name = "FORMAT",
             .help = "Output format: table or json (schema ambient-doctor.flows/v1)."},
            &config.output);
  flags.Add({.name = "follow",
             .help = "Print one line per flow event until interrupted (Ctrl-C, SIGTERM): the "
                     "daemon's stream (the open flows as \"current\", then open/close/update) "
                     "when it answers, else (or with --local) a trace of this process (open/close, "
                     "and update every 5 s for an open flow whose bytes changed, unless "
                     "--no-live). -o json: one {\"event\", \"flow\"} object per line."},
            &config.follow);
  flags.Add({.name = "pod",
             .value_name = "NS/NAME",
             .help = "Only flows of this pod's netns (pod names from the daemon's report). Needs "
                     "the daemon (serve)."},
            &config.pod);
  flags.Add({.name = "local",
             .help = "Trace in this process even when the daemon (serve) answers on --api-socket."},
            &config.local);
  flags.Add({.name = "api-socket",
             .value_name = "PATH",
             .help = "The daemon's gRPC socket: when it answers, flows come from its tracer "
                     "(StreamFlows) unless a tracer flag (--port, --attach, --ring-bytes, "
                     "--all-connects, --btf) or --local asks for a local trace."},
            &config.api_socket);
  flags.Add({.name = "log-level",
             .value_name = "LEVEL",
             .help = "Log level on stderr: trace, debug, info, warn, error, off."},
            &config.log_level);
}

// What the flags ask for, checked.
struct FlowsPlan {
  TracerOptions tracer;
  int64_t duration_ms = 0;
  FlowFilter filter;
  bool json = false;
  bool local = false;  // a trace of this process, even when the daemon answers
};

std::optional<std::string> PlanFlows(const FlagSet& flags, const FlowsConfig& config,
                                     FlowsPlan& plan) {
  if (config.output != "table" && config.output != "json") return "-o must be table or json";
  plan.json = config.output == "json";
  std::optional<int64_t> duration_ms = ParseDurationMs(config.duration);
  if (!duration_ms) return "bad --duration \"" + config.duration + "\"";
  plan.duration_ms = *duration_ms;
  plan.tracer.ports.clear();
  for (const std::string& text : config.ports) {
    char* end = nullptr;
    const long port = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || port < 1 || port > 65535) {
      return "bad --port \"" + text + "\"";
    }
    plan.tracer.ports.push_back(static_cast<uint16_t>(port));
  }
  std::optional<AttachMode> attach = ParseAttachMode(config.attach);
  if (!attach) return "--attach must be auto, tp_btf, raw_tp or tracepoint";
  plan.tracer.attach = *attach;
  plan.tracer.btf_path = config.btf;
  plan.tracer.trace_all_connects = config.all_connects;
  std::optional<uint32_t> bytes = ParseRingBytes(config.ring_bytes);
  if (!bytes) return "--ring-bytes must be between 4096 and 1073741824";
  plan.tracer.ring_bytes = *bytes;
  if (!config.netns.empty()) {
    struct stat st {};
    if (::stat(config.netns.c_str(), &st) != 0) {
      return "--netns " + config.netns + ": " + std::strerror(errno);
    }
    plan.filter.netns = static_cast<uint32_t>(st.st_ino);
  }
  if (!config.outcome.empty()) {
    plan.filter.failed = config.outcome == "failed";
    if (!plan.filter.failed) {
      plan.filter.outcome = ParseFlowOutcome(config.outcome);
      if (!plan.filter.outcome) return "unknown --outcome \"" + config.outcome + "\"";
    }
  }
  // The daemon's tracer when it answers and nothing asks for a tracer of our own.
  plan.local = config.local;
  for (const char* name : {"port", "attach", "ring-bytes", "all-connects", "btf"}) {
    if (flags.Given(name)) plan.local = true;
  }
  return std::nullopt;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "ambient-doctor flows: %s\n", message.c_str());
  return kExitFailed;
}

void StopOnSignals() {
  struct sigaction action {};
  action.sa_handler = StopFlowsOnSignal;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

// With -o json, the document that says why no flows could be read.
void PrintUnavailable(bool json, const std::string& reason) {
  if (json) std::fputs(RenderFlowsUnavailableJson(reason).c_str(), stdout);
}

void PrintFlowsReport(FlowsReport& report, const FlowFilter& filter, bool json) {
  std::erase_if(report.view.open, [&](const Flow& flow) { return !filter.Keep(flow); });
  std::erase_if(report.view.closed, [&](const Flow& flow) { return !filter.Keep(flow); });
  const std::string text = json ? RenderFlowsJson(report) : RenderFlowsTable(report);
  std::fputs(text.c_str(), stdout);
}

}  // namespace

namespace {

// Flows from the daemon's tracer (StreamFlows): --follow, or one shot of --duration in a table of
// our own. Pod names (and --pod) come from the daemon's latest report.
int DaemonFlows(client::ApiClient& daemon, const FlowsConfig& config, FlowsPlan& plan) {
  FlowsReport report;
  Result<client::pb::Status> status = daemon.GetStatus();
  if (status.ok()) report.attach_mode = status->flow_tracer_attach();
  if (Result<client::pb::Report> latest = daemon.GetReport(); latest.ok()) {
    for (const client::pb::NetnsEntry& netns : latest->netns()) {
      report.netns_paths[netns.inode()] = netns.path();
      if (netns.has_pod()) report.pods[netns.inode()] = netns.pod();
    }
  }
  if (!config.pod.empty()) {
    std::optional<uint32_t> inode;
    for (const auto& [netns, name] : report.pods) {
      if (name == config.pod) inode = netns;
    }
    if (!inode) return Fail("--pod " + config.pod + ": no such pod in the daemon's report");
    if (plan.filter.netns && *plan.filter.netns != *inode) {
      return Fail("--pod and --netns name different netns");
    }
    plan.filter.netns = inode;
  }
  Result<std::unique_ptr<client::FlowStream>> stream =
      daemon.StreamFlows(plan.filter.netns.value_or(0));
  if (!stream.ok()) {
    PrintUnavailable(plan.json, stream.error().message);
    return Fail("the daemon's flows: " + stream.error().message);
  }
  StopOnSignals();
  if (config.follow) return FollowDaemonFlows(**stream, report, plan.filter, plan.json);
  // One shot: the open flows, then what opens and closes for --duration, in a table of our own.
  FlowTable table;
  client::pb::Flow message;
  const auto begin = std::chrono::steady_clock::now();
  const auto deadline = begin + std::chrono::milliseconds(plan.duration_ms);
  while (!g_stop_flows && std::chrono::steady_clock::now() < deadline) {
    const auto read = (*stream)->Next(&message, std::chrono::milliseconds(200));
    if (read == client::FlowStream::Read::kEnded) {
      report.errors.push_back((*stream)->end_error().message);
      break;
    }
    if (read != client::FlowStream::Read::kFlow || message.tuple().dst_ip().empty()) continue;
    if (std::optional<FlowEvent> event = EventOf(message)) {
      ++report.events;
      table.Apply(*event);
    }
  }
  if (status.ok()) report.lost_events = status->flow_tracer_lost_events();
  report.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - begin)
                           .count();
  report.view = table.View();
  PrintFlowsReport(report, plan.filter, plan.json);
  return kExitOk;
}

// One shot of this process's tracer: --duration of events, then the live refresh and the table.
int TraceLocalFlows(FlowTracer& tracer, const FlowsConfig& config, const FlowsPlan& plan) {
  FlowTable table;
  FlowsReport report;
  const std::optional<uint32_t> only_netns = plan.filter.netns;
  // --netns narrows what the table holds, so its aggregates are that netns's too.
  auto apply = [&](const FlowEvent& event) {
    if (!only_netns || event.flow.netns_inode == *only_netns) table.Apply(event);
  };
  const auto begin = std::chrono::steady_clock::now();
  const auto deadline = begin + std::chrono::milliseconds(plan.duration_ms);
  while (!g_stop_flows) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    Result<size_t> polled = tracer.Poll(std::min(left, std::chrono::milliseconds(200)), apply);
    if (!polled.ok()) {
      report.errors.push_back(polled.error().message);
      break;
    }
  }
  // What is left in the ring when time is up.
  (void)tracer.Poll(std::chrono::milliseconds(0), apply);

  // Netns paths: for naming and for the live refresh (which has to enter the netns).
  std::vector<SourceError> warnings;
  DiscoveryOptions discovery;
  discovery.proc_root = config.proc_root;
  report.netns_paths = NetnsPathsByInode(discovery, &warnings);
  if (only_netns && !report.netns_paths.contains(*only_netns)) {
    report.netns_paths[*only_netns] = config.netns;
  }
  if (!config.no_live) {
    LiveNetnsRead live =
        ReadLiveTcpOfNetns(table.OpenNetns(), report.netns_paths, plan.tracer.ports);
    report.errors.insert(report.errors.end(), live.errors.begin(), live.errors.end());
    table.RefreshLive(live.sockets);
  }
  TracerCounters counters = tracer.Counters();
  report.attach_mode = std::string(AttachModeName(tracer.attach_mode()));
  report.ports = plan.tracer.ports;
  report.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - begin)
                           .count();
  report.events = counters.events;
  report.lost_events = counters.lost_events;
  report.state_full = counters.state_full;
  report.late_flows = counters.late_flows;
  report.decode_errors = counters.decode_errors;
  report.view = table.View();
  PrintFlowsReport(report, plan.filter, plan.json);
  return kExitOk;
}

// Flows from a tracer of this process: --follow, or one shot of --duration.
int LocalFlows(const FlowsConfig& config, const FlowsPlan& plan) {
  Result<std::unique_ptr<FlowTracer>> started = StartFlowTracer(plan.tracer);
  if (!started.ok()) {
    PrintUnavailable(plan.json, started.error().message);
    return Fail("tracing unavailable: " + started.error().message);
  }
  std::unique_ptr<FlowTracer> tracer = std::move(started).value();
  StopOnSignals();
  if (!config.follow) return TraceLocalFlows(*tracer, config, plan);
  FlowsReport names;
  DiscoveryOptions discovery;
  discovery.proc_root = config.proc_root;
  std::vector<SourceError> warnings;
  names.netns_paths = NetnsPathsByInode(discovery, &warnings);
  if (plan.filter.netns) names.netns_paths.emplace(*plan.filter.netns, config.netns);
  const std::chrono::milliseconds live_interval(config.no_live ? 0 : 5000);
  return FollowLocalFlows(*tracer, names, discovery, plan.filter, plan.tracer.ports, live_interval,
                          plan.json);
}

}  // namespace

int RunFlows(const std::vector<std::string>& args) {
  FlagSet flags("flows",
                "[--duration 10s | --follow] [--port 15008]... [--netns PATH] [--pod NS/NAME] "
                "[--outcome failed|OUTCOME] [--local] [-o table|json]",
                "Traces TCP connections to and from the HBONE port (15008) on the whole node with "
                "the eBPF flow tracer for --duration, then prints the open flows (with live byte "
                "counts from sock_diag) and the ones that closed meanwhile, with their outcome: "
                "closed, refused, reset, timeout, unreachable, aborted. Needs CAP_BPF and "
                "CAP_PERFMON (or root) and kernel BTF; exits 2 with the reason otherwise.");
  FlowsConfig config;
  AddFlowsFlags(flags, config);
  if (std::optional<std::string> error = flags.Parse(args)) {
    std::fprintf(stderr, "ambient-doctor flows: %s\n\n%s", error->c_str(), flags.Usage().c_str());
    return kExitFailed;
  }
  if (flags.help()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return kExitOk;
  }
  if (auto error = flags.PositionalError()) return Fail(*error);
  if (!spdlog::get("ambient-doctor")) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("ambient-doctor"));
  }
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  FlowsPlan plan;
  if (auto error = PlanFlows(flags, config, plan)) return Fail(*error);

  std::unique_ptr<client::ApiClient> daemon;
  std::string no_daemon = "--local or a tracer flag given";
  if (!plan.local) {
    client::ClientOptions client_options;
    client_options.socket_path = config.api_socket;
    Result<std::unique_ptr<client::ApiClient>> connected =
        client::ApiClient::Connect(client_options);
    if (connected.ok()) {
      daemon = std::move(connected).value();
    } else {
      no_daemon = connected.error().message;
      if (connected.error().error_number != ENOENT) spdlog::warn("tracing locally: {}", no_daemon);
    }
  }
  if (daemon) return DaemonFlows(*daemon, config, plan);
  if (!config.pod.empty()) {
    return Fail(
        "--pod reads the daemon's flows (pod names come from its report), and no daemon "
        "answers: " +
        no_daemon);
  }
  return LocalFlows(config, plan);
}

}  // namespace ad::cli
