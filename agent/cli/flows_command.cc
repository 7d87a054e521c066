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

#include "cli/flags.h"
#include "cli/flows_render.h"
#include "client/api_client.h"
#include "flows/flow_joins.h"
#include "model/json.h"
#include "tracing/flow_tracer.h"
#include "tracing/live_tcp.h"

namespace ad::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 2;

std::atomic<bool> g_stop_flows{false};
void StopFlowsOnSignal(int) { g_stop_flows = true; }

// "10s", "500ms", "2m", "1h"; a bare number is seconds.
std::optional<int64_t> ParseDurationMs(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 9) return std::nullopt;
  const int64_t value = std::stoll(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  if (unit == "ms") return value;
  if (unit.empty() || unit == "s") return value * 1000;
  if (unit == "m") return value * 60'000;
  if (unit == "h") return value * 3'600'000;
  return std::nullopt;
}

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
  flags.Add({.name = "duration",
             .value_name = "D",
             .default_text = "10s",
             .help = "How long to trace (ms, s, m, h). Ctrl-C ends early."});
  flags.Add({.name = "port",
             .repeatable = true,
             .value_name = "PORT",
             .default_text = "15008",
             .help = "Traced TCP port (either end), up to 8; e.g. 15001 and 15006 for ztunnel's "
                     "in-pod listeners. Filtered in the kernel."});
  flags.Add({.name = "netns",
             .value_name = "PATH",
             .help = "Only flows of this netns (a bind mount or /proc/<pid>/ns/net)."});
  flags.Add({.name = "outcome",
             .value_name = "OUTCOME",
             .help = "Only flows with this outcome: failed (refused, reset, timeout, unreachable), "
                     "open, connecting, closed, refused, reset, timeout, unreachable, aborted."});
  flags.Add({.name = "attach",
             .value_name = "MODE",
             .default_text = "auto",
             .help = "Attach type: auto (tp_btf, then raw_tp, then tracepoint), tp_btf, raw_tp, "
                     "tracepoint (needs tracefs mounted; the agent never mounts it)."});
  flags.Add({.name = "ring-bytes",
             .value_name = "N",
             .default_text = "1048576",
             .help = "Ring-buffer size in bytes (a power of two; lost events are counted)."});
  flags.Add({.name = "all-connects",
             .takes_value = false,
             .help = "Also trace every outgoing connection, any destination port (the application "
                     "side of redirected traffic; an event pair per connect on the node)."});
  flags.Add({.name = "btf",
             .value_name = "PATH",
             .default_text = "/sys/kernel/btf/vmlinux",
             .help = "Kernel BTF the tracer is relocated against (CO-RE)."});
  flags.Add({.name = "no-live",
             .takes_value = false,
             .help = "Do not refresh the byte counts of open flows from sock_diag tcp_info (with a "
                     "local --follow: no update lines)."});
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .default_text = "/proc",
             .help = "procfs used to name netns by path (and for /proc/<pid>/ns/net)."});
  flags.Add({.name = "output",
             .short_name = 'o',
             .value_name = "FORMAT",
             .default_text = "table",
             .help = "Output format: table or json (schema ambient-doctor.flows/v1)."});
  flags.Add({.name = "follow",
             .takes_value = false,
             .help = "Print one line per flow event until interrupted (Ctrl-C, SIGTERM): the "
                     "daemon's stream (the open flows as \"current\", then open/close/update) "
                     "when it answers, else (or with --local) a trace of this process (open/close, "
                     "and update every 5 s for an open flow whose bytes changed, unless "
                     "--no-live). -o json: one {\"event\", \"flow\"} object per line."});
  flags.Add({.name = "pod",
             .value_name = "NS/NAME",
             .help = "Only flows of this pod's netns (pod names from the daemon's report). Needs "
                     "the daemon (serve)."});
  flags.Add(
      {.name = "local",
       .takes_value = false,
       .help = "Trace in this process even when the daemon (serve) answers on --api-socket."});
  flags.Add({.name = "api-socket",
             .value_name = "PATH",
             .default_text = client::kDefaultApiSocket,
             .help = "The daemon's gRPC socket: when it answers, flows come from its tracer "
                     "(StreamFlows) unless a tracer flag (--port, --attach, --ring-bytes, "
                     "--all-connects, --btf) or --local asks for a local trace."});
  flags.Add({.name = "log-level",
             .value_name = "LEVEL",
             .default_text = "warn",
             .help = "Log level on stderr: trace, debug, info, warn, error, off."});
  if (std::optional<std::string> error = flags.Parse(args)) {
    std::fprintf(stderr, "ambient-doctor flows: %s\n\n%s", error->c_str(), flags.Usage().c_str());
    return kExitFailed;
  }
  if (flags.Has("help")) {
    std::fputs(flags.Usage().c_str(), stdout);
    return kExitOk;
  }
  if (auto error = flags.PositionalError()) {
    std::fprintf(stderr, "ambient-doctor flows: %s\n", error->c_str());
    return kExitFailed;
  }
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ambient-doctor flows: %s\n", message.c_str());
    return kExitFailed;
  };
  if (!spdlog::get("ambient-doctor")) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("ambient-doctor"));
  }
  spdlog::set_level(spdlog::level::from_str(flags.Get("log-level", "warn")));
  const std::string output = flags.Get("output", "table");
  if (output != "table" && output != "json") return fail("-o must be table or json");
  std::optional<int64_t> duration_ms = ParseDurationMs(flags.Get("duration", "10s"));
  if (!duration_ms) return fail("bad --duration \"" + flags.Get("duration") + "\"");

  TracerOptions options;
  if (flags.Has("port")) {
    options.ports.clear();
    for (const std::string& text : flags.GetAll("port")) {
      char* end = nullptr;
      const long port = std::strtol(text.c_str(), &end, 10);
      if (end == text.c_str() || *end != '\0' || port < 1 || port > 65535) {
        return fail("bad --port \"" + text + "\"");
      }
      options.ports.push_back(static_cast<uint16_t>(port));
    }
  }
  std::optional<AttachMode> attach = ParseAttachMode(flags.Get("attach", "auto"));
  if (!attach) return fail("--attach must be auto, tp_btf, raw_tp or tracepoint");
  options.attach = *attach;
  options.btf_path = flags.Get("btf", options.btf_path);
  options.trace_all_connects = flags.Has("all-connects");
  if (auto bytes = ParseRingBytes(flags.Get("ring-bytes", "1048576"))) {
    options.ring_bytes = *bytes;
  } else {
    return fail("--ring-bytes must be between 4096 and 1073741824");
  }
  std::optional<uint32_t> only_netns;
  if (flags.Has("netns")) {
    struct stat st {};
    if (::stat(flags.Get("netns").c_str(), &st) != 0) {
      return fail("--netns " + flags.Get("netns") + ": " + std::strerror(errno));
    }
    only_netns = static_cast<uint32_t>(st.st_ino);
  }
  std::optional<FlowOutcome> only_outcome;
  bool only_failed = false;
  if (flags.Has("outcome")) {
    const std::string text = flags.Get("outcome");
    only_failed = text == "failed";
    if (!only_failed) {
      only_outcome = ParseFlowOutcome(text);
      if (!only_outcome) return fail("unknown --outcome \"" + text + "\"");
    }
  }

  // The daemon's tracer when it answers and nothing asks for a tracer of our own.
  bool local = flags.Has("local");
  for (const char* name : {"port", "attach", "ring-bytes", "all-connects", "btf"}) {
    if (flags.Has(name)) local = true;
  }
  std::unique_ptr<client::ApiClient> daemon;
  std::string no_daemon = "--local or a tracer flag given";
  if (!local) {
    client::ClientOptions client_options;
    client_options.socket_path = flags.Get("api-socket", client::kDefaultApiSocket);
    Result<std::unique_ptr<client::ApiClient>> connected =
        client::ApiClient::Connect(client_options);
    if (connected.ok()) {
      daemon = std::move(connected).value();
    } else {
      no_daemon = connected.error().message;
      if (connected.error().error_number != ENOENT) {
        spdlog::warn("tracing locally: {}", no_daemon);
      }
    }
  }
  if (!daemon && flags.Has("pod")) {
    return fail(
        "--pod reads the daemon's flows (pod names come from its report), and no daemon "
        "answers: " +
        no_daemon);
  }
  if (daemon) {
    FlowsReport report;
    Result<client::pb::Status> status = daemon->GetStatus();
    if (status.ok()) report.attach_mode = status->flow_tracer_attach();
    // Pod names (and --pod) from the daemon's latest report.
    if (Result<client::pb::Report> latest = daemon->GetReport(); latest.ok()) {
      for (const client::pb::NetnsEntry& netns : latest->netns()) {
        report.netns_paths[netns.inode()] = netns.path();
        if (netns.has_pod()) report.pods[netns.inode()] = netns.pod();
      }
    }
    if (flags.Has("pod")) {
      const std::string pod = flags.Get("pod");
      std::optional<uint32_t> inode;
      for (const auto& [netns, name] : report.pods) {
        if (name == pod) inode = netns;
      }
      if (!inode) return fail("--pod " + pod + ": no such pod in the daemon's report");
      if (only_netns && *only_netns != *inode)
        return fail("--pod and --netns name different netns");
      only_netns = inode;
    }
    FlowFilter filter{.netns = only_netns, .outcome = only_outcome, .failed = only_failed};
    Result<std::unique_ptr<client::FlowStream>> stream =
        daemon->StreamFlows(only_netns.value_or(0));
    if (!stream.ok()) {
      if (output == "json") {
        JsonWriter j;
        j.BeginObject().Field("schema", "ambient-doctor.flows/v1").Field("available", false);
        j.Field("reason", stream.error().message).EndObject();
        std::fputs((j.str() + "\n").c_str(), stdout);
      }
      return fail("the daemon's flows: " + stream.error().message);
    }
    struct sigaction action {};
    action.sa_handler = StopFlowsOnSignal;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
    if (flags.Has("follow")) return FollowDaemonFlows(**stream, report, filter, output == "json");
    // One shot: the open flows, then what opens and closes for --duration, in a table of our own.
    FlowTable table;
    client::pb::Flow message;
    const auto begin = std::chrono::steady_clock::now();
    const auto deadline = begin + std::chrono::milliseconds(*duration_ms);
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
    std::erase_if(report.view.open, [&](const Flow& flow) { return !filter.Keep(flow); });
    std::erase_if(report.view.closed, [&](const Flow& flow) { return !filter.Keep(flow); });
    const std::string text = output == "json" ? RenderFlowsJson(report) : RenderFlowsTable(report);
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }

  Result<std::unique_ptr<FlowTracer>> started = StartFlowTracer(options);
  if (!started.ok()) {
    if (output == "json") {
      JsonWriter j;
      j.BeginObject().Field("schema", "ambient-doctor.flows/v1").Field("available", false);
      j.Field("reason", started.error().message).EndObject();
      std::fputs((j.str() + "\n").c_str(), stdout);
    }
    return fail("tracing unavailable: " + started.error().message);
  }
  std::unique_ptr<FlowTracer> tracer = std::move(started).value();

  struct sigaction action {};
  action.sa_handler = StopFlowsOnSignal;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  if (flags.Has("follow")) {
    FlowsReport names;
    DiscoveryOptions discovery;
    discovery.proc_root = flags.Get("proc-root", "/proc");
    std::vector<SourceError> warnings;
    names.netns_paths = NetnsPathsByInode(discovery, &warnings);
    if (only_netns) names.netns_paths.emplace(*only_netns, flags.Get("netns"));
    const FlowFilter filter{.netns = only_netns, .outcome = only_outcome, .failed = only_failed};
    const std::chrono::milliseconds live_interval(flags.Has("no-live") ? 0 : 5000);
    return FollowLocalFlows(*tracer, names, discovery, filter, options.ports, live_interval,
                            output == "json");
  }

  FlowTable table;
  FlowsReport report;
  // --netns narrows what the table holds, so its aggregates are that netns's too.
  auto apply = [&](const FlowEvent& event) {
    if (!only_netns || event.flow.netns_inode == *only_netns) table.Apply(event);
  };
  const auto begin = std::chrono::steady_clock::now();
  const auto deadline = begin + std::chrono::milliseconds(*duration_ms);
  while (!g_stop_flows) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    Result<size_t> polled = tracer->Poll(std::min(left, std::chrono::milliseconds(200)), apply);
    if (!polled.ok()) {
      report.errors.push_back(polled.error().message);
      break;
    }
  }
  // What is left in the ring when time is up.
  (void)tracer->Poll(std::chrono::milliseconds(0), apply);

  // Netns paths: for naming and for the live refresh (which has to enter the netns).
  std::vector<SourceError> warnings;
  DiscoveryOptions discovery;
  discovery.proc_root = flags.Get("proc-root", "/proc");
  report.netns_paths = NetnsPathsByInode(discovery, &warnings);
  if (only_netns && !report.netns_paths.contains(*only_netns)) {
    report.netns_paths[*only_netns] = flags.Get("netns");
  }
  if (!flags.Has("no-live")) {
    LiveNetnsRead live = ReadLiveTcpOfNetns(table.OpenNetns(), report.netns_paths, options.ports);
    report.errors.insert(report.errors.end(), live.errors.begin(), live.errors.end());
    table.RefreshLive(live.sockets);
  }

  TracerCounters counters = tracer->Counters();
  report.attach_mode = std::string(AttachModeName(tracer->attach_mode()));
  report.ports = options.ports;
  report.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - begin)
                           .count();
  report.events = counters.events;
  report.lost_events = counters.lost_events;
  report.state_full = counters.state_full;
  report.late_flows = counters.late_flows;
  report.decode_errors = counters.decode_errors;
  report.view = table.View();
  auto keep = [&](const Flow& flow) {
    if (only_netns && flow.netns_inode != *only_netns) return false;
    if (only_failed && !IsFailedOutcome(flow.outcome)) return false;
    if (only_outcome && flow.outcome != *only_outcome) return false;
    return true;
  };
  std::erase_if(report.view.open, [&](const Flow& flow) { return !keep(flow); });
  std::erase_if(report.view.closed, [&](const Flow& flow) { return !keep(flow); });
  const std::string text = output == "json" ? RenderFlowsJson(report) : RenderFlowsTable(report);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace ad::cli
