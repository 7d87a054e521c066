#include "cli/flows_render.h"

#include <cmath>
#include <cstdio>

#include "ambientdoctor/v1/documents.pb.h"
#include "api/report_proto.h"

namespace ad::cli {
namespace {

std::string NetnsLabel(const FlowsReport& report, uint32_t inode) {
  if (auto pod = report.pods.find(inode); pod != report.pods.end()) return pod->second;
  auto it = report.netns_paths.find(inode);
  return it != report.netns_paths.end() ? it->second : "netns:" + std::to_string(inode);
}

namespace pb = ::ambientdoctor::v1;

// Unix ms to the microsecond, the resolution flows/v1 prints.
double Ms(int64_t unix_ns) { return std::round(static_cast<double>(unix_ns) / 1e3) / 1e3; }
double Number(uint64_t count) { return static_cast<double>(count); }

void FillFlow(const FlowsReport& report, const Flow& flow, pb::FlowRecord* out) {
  out->set_flow_id(Number(flow.flow_id));
  out->set_cookie_known(flow.cookie_known);
  pb::FlowNetns* netns = out->mutable_netns();
  netns->set_inode(flow.netns_inode);
  if (auto it = report.netns_paths.find(flow.netns_inode); it != report.netns_paths.end()) {
    netns->set_path(it->second);
  }
  if (auto it = report.pods.find(flow.netns_inode); it != report.pods.end()) {
    netns->set_pod(it->second);
  }
  out->set_role(std::string(FlowRoleName(flow.role)));
  out->set_protocol("tcp");
  out->set_src_ip(flow.tuple.src.ToString());
  out->set_src_port(flow.tuple.src_port);
  out->set_dst_ip(flow.tuple.dst.ToString());
  out->set_dst_port(flow.tuple.dst_port);
  out->set_mark(flow.mark);
  out->set_outcome(std::string(FlowOutcomeName(flow.outcome)));
  if (flow.started_unix_ns != 0) out->set_started_unix_ms(Ms(flow.started_unix_ns));
  if (flow.established_unix_ns != 0) out->set_established_unix_ms(Ms(flow.established_unix_ns));
  if (flow.ended_unix_ns != 0) out->set_ended_unix_ms(Ms(flow.ended_unix_ns));
  if (auto latency = flow.ConnectLatencyUs()) {
    out->set_connect_latency_us(static_cast<double>(*latency));
  }
  out->set_bytes_sent(Number(flow.bytes_sent));
  out->set_bytes_received(Number(flow.bytes_received));
  out->set_srtt_us(flow.srtt_us);
  out->set_retransmits(flow.retransmits);
  out->set_resets_received(flow.resets_received);
  out->set_resets_sent(flow.resets_sent);
  out->set_sk_err(flow.sk_err);
  out->set_seen_late(flow.seen_late);
  out->set_live(flow.live);
}

void FillCounts(const FlowCounts& counts, pb::FlowGroupCounts* out) {
  out->set_opened(Number(counts.opened));
  out->set_open(Number(counts.open));
  out->set_failed(Number(counts.failed()));
  // One field per outcome name (FlowOutcomeCountsHasEveryOutcome tests that none is missing).
  pb::FlowOutcomeCounts* closed = out->mutable_closed();
  for (const auto& [outcome, count] : counts.closed) {
    const auto* field =
        closed->GetDescriptor()->FindFieldByName(std::string(FlowOutcomeName(outcome)));
    if (field != nullptr) closed->GetReflection()->SetDouble(closed, field, Number(count));
  }
  out->set_bytes_sent(Number(counts.bytes_sent));
  out->set_bytes_received(Number(counts.bytes_received));
  out->set_retransmits(Number(counts.retransmits));
  out->set_resets(Number(counts.resets));
}

std::string Bytes(uint64_t value) {
  char text[32];
  if (value < 10'000) {
    std::snprintf(text, sizeof(text), "%llu", static_cast<unsigned long long>(value));
  } else if (value < 10'000'000) {
    std::snprintf(text, sizeof(text), "%.1fk", static_cast<double>(value) / 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%.1fM", static_cast<double>(value) / 1e6);
  }
  return text;
}

void AppendRow(std::string& out, const FlowsReport& report, const Flow& flow) {
  char line[512];
  std::string latency = "-";
  if (auto us = flow.ConnectLatencyUs()) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.2fms", static_cast<double>(*us) / 1000.0);
    latency = text;
  }
  std::snprintf(line, sizeof(line), "%-11s %-6s %-28s %-24s %-24s %9s %7s %7s %6u %4u %3u\n",
                std::string(FlowOutcomeName(flow.outcome)).c_str(),
                std::string(FlowRoleName(flow.role)).c_str(),
                NetnsLabel(report, flow.netns_inode).c_str(),
                Endpoint(flow.tuple.src, flow.tuple.src_port).c_str(),
                Endpoint(flow.tuple.dst, flow.tuple.dst_port).c_str(), latency.c_str(),
                Bytes(flow.bytes_sent).c_str(), Bytes(flow.bytes_received).c_str(), flow.srtt_us,
                flow.retransmits, flow.resets());
  out += line;
}

}  // namespace

std::string Endpoint(const FlowAddress& address, uint16_t port) {
  return (address.ipv6 ? "[" + address.ToString() + "]" : address.ToString()) + ":" +
         std::to_string(port);
}

// One --follow line: `event` ("current", "open", "close", "update") and the flow row, or with
// -o json one {"event", "flow"} object; ends in a newline. The same for the daemon's stream and a
// local trace.
std::string FollowLine(std::string_view event, const Flow& flow, const FlowsReport& names,
                       bool json) {
  if (json) {
    pb::FlowEventLine line;
    line.set_event(std::string(event));
    FillFlow(names, flow, line.mutable_flow());
    return api::ToJson(line, /*compact=*/true) + "\n";
  }
  std::string line(event);
  line += event.size() < 8 ? "\t" : " ";
  AppendRow(line, names, flow);
  return line;
}

std::string RenderFlowsJson(const FlowsReport& report) {
  pb::FlowsDocument doc;
  doc.set_schema(kFlowsSchema);
  doc.set_attach(report.attach_mode);
  for (uint16_t port : report.ports) doc.add_ports(port);
  doc.set_duration_ms(static_cast<double>(report.duration_ms));
  pb::FlowsCounters* counters = doc.mutable_counters();
  counters->set_events(Number(report.events));
  counters->set_lost_events(Number(report.lost_events));
  counters->set_state_full(Number(report.state_full));
  counters->set_late_flows(Number(report.late_flows));
  counters->set_decode_errors(Number(report.decode_errors));
  counters->set_closed_dropped(Number(report.view.closed_dropped));
  counters->set_open_dropped(Number(report.view.open_dropped));
  counters->set_destinations_dropped(Number(report.view.destinations_dropped));
  for (const std::string& error : report.errors) doc.add_errors(error);
  for (const Flow& flow : report.view.open) FillFlow(report, flow, doc.add_open());
  for (const Flow& flow : report.view.closed) FillFlow(report, flow, doc.add_closed());
  for (const NetnsFlowAggregate& netns : report.view.by_netns) {
    pb::NetnsFlowCounts* out = doc.add_by_netns();
    out->set_inode(netns.netns_inode);
    if (auto it = report.netns_paths.find(netns.netns_inode); it != report.netns_paths.end()) {
      out->set_path(it->second);
    }
    FillCounts(netns.client, out->mutable_client());
    FillCounts(netns.server, out->mutable_server());
  }
  for (const DestinationAggregate& destination : report.view.by_destination) {
    pb::DestinationFlowCounts* out = doc.add_by_destination();
    out->set_ip(destination.address.ToString());
    out->set_port(destination.port);
    FillCounts(destination.counts, out->mutable_counts());
    if (destination.connect_latency_samples > 0) {
      // Whole microseconds, as flows/v1 printed the integer mean.
      out->set_connect_latency_us_avg(
          Number(destination.connect_latency_us_sum / destination.connect_latency_samples));
      out->set_connect_latency_us_max(Number(destination.connect_latency_us_max));
    }
  }
  return api::ToJson(doc);  // ends in an empty line, as flows/v1 always did
}

std::string RenderFlowsUnavailableJson(const std::string& reason) {
  pb::FlowsUnavailableDocument doc;
  doc.set_schema(kFlowsSchema);
  doc.set_available(false);
  doc.set_reason(reason);
  return api::ToJson(doc);
}

std::string RenderFlowsTable(const FlowsReport& report) {
  std::string out;
  uint64_t failed = 0;
  for (const Flow& flow : report.view.closed) failed += IsFailedOutcome(flow.outcome) ? 1 : 0;
  std::string ports;
  for (uint16_t port : report.ports) ports += (ports.empty() ? "" : ",") + std::to_string(port);
  char header[512];
  std::snprintf(header, sizeof(header),
                "traced %.1f s with %s on port %s: %zu open, %zu closed (%llu failed), %llu lost "
                "events\n",
                static_cast<double>(report.duration_ms) / 1000.0, report.attach_mode.c_str(),
                ports.c_str(), report.view.open.size(), report.view.closed.size(),
                static_cast<unsigned long long>(failed),
                static_cast<unsigned long long>(report.lost_events));
  out += header;
  if (report.view.closed_dropped > 0) {
    out += "note: " + std::to_string(report.view.closed_dropped) +
           " older closed flows were dropped from the table (bounded ring)\n";
  }
  for (const std::string& error : report.errors) out += "error: " + error + "\n";
  if (report.view.open.empty() && report.view.closed.empty()) return out;
  char columns[512];
  std::snprintf(columns, sizeof(columns), "%-11s %-6s %-28s %-24s %-24s %9s %7s %7s %6s %4s %3s\n",
                "OUTCOME", "ROLE", "NETNS", "SOURCE", "DESTINATION", "CONNECT", "SENT", "RECV",
                "RTT_US", "RETR", "RST");
  out += columns;
  for (const Flow& flow : report.view.open) AppendRow(out, report, flow);
  for (const Flow& flow : report.view.closed) AppendRow(out, report, flow);
  return out;
}

}  // namespace ad::cli
