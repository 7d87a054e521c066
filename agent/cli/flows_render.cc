#include "cli/flows_render.h"

#include <cstdio>

#include "model/json.h"

namespace ad::cli {
namespace {

std::string NetnsLabel(const FlowsReport& report, uint32_t inode) {
  if (auto pod = report.pods.find(inode); pod != report.pods.end()) return pod->second;
  auto it = report.netns_paths.find(inode);
  return it != report.netns_paths.end() ? it->second : "netns:" + std::to_string(inode);
}

double Ms(int64_t unix_ns) { return static_cast<double>(unix_ns) / 1e6; }

void WriteFlow(JsonWriter& j, const FlowsReport& report, const Flow& flow) {
  j.BeginObject();
  j.Field("flow_id", flow.flow_id).Field("cookie_known", flow.cookie_known);
  j.Key("netns").BeginObject().Field("inode", flow.netns_inode);
  if (auto it = report.netns_paths.find(flow.netns_inode); it != report.netns_paths.end()) {
    j.Field("path", it->second);
  }
  if (auto it = report.pods.find(flow.netns_inode); it != report.pods.end()) {
    j.Field("pod", it->second);
  }
  j.EndObject();
  j.Field("role", FlowRoleName(flow.role)).Field("protocol", "tcp");
  j.Field("src_ip", flow.tuple.src.ToString()).Field("src_port", uint32_t{flow.tuple.src_port});
  j.Field("dst_ip", flow.tuple.dst.ToString()).Field("dst_port", uint32_t{flow.tuple.dst_port});
  j.Field("mark", flow.mark).Field("outcome", FlowOutcomeName(flow.outcome));
  if (flow.started_unix_ns != 0) j.Field("started_unix_ms", Ms(flow.started_unix_ns));
  if (flow.established_unix_ns != 0) j.Field("established_unix_ms", Ms(flow.established_unix_ns));
  if (flow.ended_unix_ns != 0) j.Field("ended_unix_ms", Ms(flow.ended_unix_ns));
  if (auto latency = flow.ConnectLatencyUs()) j.Field("connect_latency_us", *latency);
  j.Field("bytes_sent", flow.bytes_sent).Field("bytes_received", flow.bytes_received);
  j.Field("srtt_us", flow.srtt_us).Field("retransmits", flow.retransmits);
  j.Field("resets_received", flow.resets_received).Field("resets_sent", flow.resets_sent);
  j.Field("sk_err", int64_t{flow.sk_err});
  j.Field("seen_late", flow.seen_late).Field("live", flow.live);
  j.EndObject();
}

void WriteCounts(JsonWriter& j, std::string_view key, const FlowCounts& counts) {
  j.Key(key).BeginObject();
  j.Field("opened", counts.opened).Field("open", counts.open).Field("failed", counts.failed());
  j.Key("closed").BeginObject();
  for (const auto& [outcome, count] : counts.closed) j.Field(FlowOutcomeName(outcome), count);
  j.EndObject();
  j.Field("bytes_sent", counts.bytes_sent).Field("bytes_received", counts.bytes_received);
  j.Field("retransmits", counts.retransmits).Field("resets", counts.resets);
  j.EndObject();
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
    JsonWriter j(/*pretty=*/false);
    j.BeginObject().Field("event", event).Key("flow");
    WriteFlow(j, names, flow);
    j.EndObject();
    return j.str() + "\n";
  }
  std::string line(event);
  line += event.size() < 8 ? "\t" : " ";
  AppendRow(line, names, flow);
  return line;
}

std::string RenderFlowsJson(const FlowsReport& report) {
  JsonWriter j;
  j.BeginObject().Field("schema", "ambient-doctor.flows/v1");
  j.Field("attach", report.attach_mode);
  j.Key("ports").BeginArray();
  for (uint16_t port : report.ports) j.Uint(port);
  j.EndArray();
  j.Field("duration_ms", report.duration_ms);
  j.Key("counters").BeginObject();
  j.Field("events", report.events).Field("lost_events", report.lost_events);
  j.Field("state_full", report.state_full).Field("late_flows", report.late_flows);
  j.Field("decode_errors", report.decode_errors);
  j.Field("closed_dropped", report.view.closed_dropped);
  j.Field("open_dropped", report.view.open_dropped);
  j.Field("destinations_dropped", report.view.destinations_dropped);
  j.EndObject();
  j.StringArray("errors", report.errors);
  j.Key("open").BeginArray();
  for (const Flow& flow : report.view.open) WriteFlow(j, report, flow);
  j.EndArray();
  j.Key("closed").BeginArray();
  for (const Flow& flow : report.view.closed) WriteFlow(j, report, flow);
  j.EndArray();
  j.Key("by_netns").BeginArray();
  for (const NetnsFlowAggregate& netns : report.view.by_netns) {
    j.BeginObject().Field("inode", netns.netns_inode);
    if (auto it = report.netns_paths.find(netns.netns_inode); it != report.netns_paths.end()) {
      j.Field("path", it->second);
    }
    WriteCounts(j, "client", netns.client);
    WriteCounts(j, "server", netns.server);
    j.EndObject();
  }
  j.EndArray();
  j.Key("by_destination").BeginArray();
  for (const DestinationAggregate& destination : report.view.by_destination) {
    j.BeginObject().Field("ip", destination.address.ToString());
    j.Field("port", uint32_t{destination.port});
    WriteCounts(j, "counts", destination.counts);
    if (destination.connect_latency_samples > 0) {
      j.Field("connect_latency_us_avg",
              destination.connect_latency_us_sum / destination.connect_latency_samples);
      j.Field("connect_latency_us_max", destination.connect_latency_us_max);
    }
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.str() + "\n";
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
