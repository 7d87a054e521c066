// The exporter's flow tracer metrics: present at 0 with the tracer off, HBONE connections by
// outcome and locality, connect latency, open flows, lost events (as deltas), availability.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <sstream>

#include "flows/flow_joins.h"
#include "metrics/metrics_exporter.h"

namespace ad {
namespace {

std::map<std::string, double> Parse(const std::string& exposition) {
  std::map<std::string, double> series;
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    series[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return series;
}

double Value(const MetricsExporter& exporter, const std::string& series) {
  const auto values = Parse(exporter.Exposition());
  const auto it = values.find(series);
  EXPECT_NE(it, values.end()) << "no series " << series;
  return it == values.end() ? -1 : it->second;
}

FlowEvent Hbone(FlowEventKind kind, const std::string& dst, FlowOutcome outcome,
                int64_t latency_us = 0) {
  FlowEvent event;
  event.kind = kind;
  event.flow.role = FlowRole::kClient;
  event.flow.tuple.dst = *ParseFlowAddress(dst);
  event.flow.tuple.dst_port = 15008;
  event.flow.outcome = outcome;
  if (latency_us > 0) {
    event.flow.started_unix_ns = 1'000'000'000;
    event.flow.established_unix_ns = 1'000'000'000 + latency_us * 1000;
  }
  return event;
}

TEST(FlowMetrics, PresentAtZeroWithoutATracer) {
  MetricsExporter exporter;
  const auto v = Parse(exporter.Exposition());
  for (const char* series :
       {"ambient_doctor_hbone_connections_total{locality=\"same_node\",outcome=\"refused\"}",
        "ambient_doctor_hbone_connections_total{locality=\"remote\",outcome=\"closed\"}",
        "ambient_doctor_hbone_connect_latency_seconds_count{locality=\"remote\"}",
        "ambient_doctor_flows_open", "ambient_doctor_flow_tracer_lost_events_total",
        "ambient_doctor_hbone_flows_opened_total{role=\"client\"}",
        "ambient_doctor_hbone_flows_opened_total{role=\"server\"}",
        "ambient_doctor_hbone_flows_closed_total{outcome=\"reset\",role=\"server\"}",
        "ambient_doctor_hbone_connection_duration_seconds_count{role=\"client\"}",
        "ambient_doctor_hbone_connection_duration_seconds_bucket{role=\"server\",le=\"+Inf\"}",
        "ambient_doctor_hbone_sent_bytes_total{role=\"client\"}",
        "ambient_doctor_hbone_received_bytes_total{role=\"server\"}",
        "ambient_doctor_hbone_retransmits_total{role=\"client\"}",
        "ambient_doctor_hbone_resets_total{direction=\"sent\",role=\"server\"}",
        "ambient_doctor_hbone_resets_total{direction=\"received\",role=\"client\"}",
        "ambient_doctor_flow_tracer_available",
        "ambient_doctor_flow_tracer_attach_info{attach=\"tp_btf\"}"}) {
    ASSERT_TRUE(v.contains(series)) << series << "\n" << exporter.Exposition();
    EXPECT_EQ(v.at(series), 0) << series;
  }
}

TEST(FlowMetrics, ConnectionsByOutcomeAndLocalityLatencyAndTracerState) {
  MetricsExporter exporter;
  const std::set<FlowAddress> node = {*ParseFlowAddress("10.1.0.2")};
  FlowTracerStatus status{.enabled = true, .available = true, .attach_mode = "raw_tp"};
  status.lost_events = 7;
  FlowEvent other_port = Hbone(FlowEventKind::kClose, "10.1.0.2", FlowOutcome::kRefused);
  other_port.flow.tuple.dst_port = 80;
  FlowEvent server = Hbone(FlowEventKind::kClose, "10.1.0.2", FlowOutcome::kRefused);
  server.flow.role = FlowRole::kServer;
  exporter.ConsumeFlows(
      status,
      {Hbone(FlowEventKind::kClose, "10.1.0.2", FlowOutcome::kRefused),
       Hbone(FlowEventKind::kClose, "10.1.0.2", FlowOutcome::kRefused),
       Hbone(FlowEventKind::kClose, "10.9.0.1", FlowOutcome::kTimeout),
       Hbone(FlowEventKind::kOpen, "10.9.0.1", FlowOutcome::kOpen, 2500), other_port, server},
      3, node);
  EXPECT_EQ(Value(exporter,
                  "ambient_doctor_hbone_connections_total{locality=\"same_node\","
                  "outcome=\"refused\"}"),
            2);
  EXPECT_EQ(
      Value(exporter,
            "ambient_doctor_hbone_connections_total{locality=\"remote\",outcome=\"timeout\"}"),
      1);
  EXPECT_EQ(
      Value(exporter,
            "ambient_doctor_hbone_connections_total{locality=\"remote\",outcome=\"refused\"}"),
      0);
  EXPECT_EQ(
      Value(exporter, "ambient_doctor_hbone_connect_latency_seconds_count{locality=\"remote\"}"),
      1);
  EXPECT_DOUBLE_EQ(
      Value(exporter, "ambient_doctor_hbone_connect_latency_seconds_sum{locality=\"remote\"}"),
      0.0025);
  EXPECT_EQ(Value(exporter, "ambient_doctor_flows_open"), 3);
  EXPECT_EQ(Value(exporter, "ambient_doctor_flow_tracer_available"), 1);
  EXPECT_EQ(Value(exporter, "ambient_doctor_flow_tracer_attach_info{attach=\"raw_tp\"}"), 1);
  EXPECT_EQ(Value(exporter, "ambient_doctor_flow_tracer_attach_info{attach=\"tp_btf\"}"), 0);
  EXPECT_EQ(Value(exporter, "ambient_doctor_flow_tracer_lost_events_total"), 7);
  // The tracer's count is cumulative: only the increase is added.
  status.lost_events = 10;
  exporter.ConsumeFlows(status, {}, 0, node);
  EXPECT_EQ(Value(exporter, "ambient_doctor_flow_tracer_lost_events_total"), 10);
  EXPECT_EQ(Value(exporter, "ambient_doctor_flows_open"), 0);
}

// Both ends of HBONE connections by role: opened (established), closed by outcome, duration,
// bytes, retransmits and resets added at close; live updates count nothing (their numbers count
// at the close).
TEST(FlowMetrics, HboneFlowsByRoleCountAtOpenAndClose) {
  MetricsExporter exporter;
  const std::set<FlowAddress> node;
  const FlowTracerStatus status{.enabled = true, .available = true, .attach_mode = "tp_btf"};
  FlowEvent connecting = Hbone(FlowEventKind::kOpen, "10.9.0.1", FlowOutcome::kConnecting);
  FlowEvent open = Hbone(FlowEventKind::kOpen, "10.9.0.1", FlowOutcome::kOpen, 1000);
  FlowEvent update = open;
  update.kind = FlowEventKind::kUpdate;
  update.flow.bytes_sent = 1'000'000;
  update.flow.live = true;
  FlowEvent closed = Hbone(FlowEventKind::kClose, "10.9.0.1", FlowOutcome::kClosed, 1000);
  closed.flow.ended_unix_ns = closed.flow.established_unix_ns + 2'500'000'000;  // 2.5 s
  closed.flow.bytes_sent = 5000;
  closed.flow.bytes_received = 3000;
  closed.flow.retransmits = 2;
  // The accepting end: the HBONE port is its local port.
  FlowEvent accepted = Hbone(FlowEventKind::kOpen, "10.1.0.7", FlowOutcome::kOpen);
  accepted.flow.role = FlowRole::kServer;
  accepted.flow.tuple.src_port = 15008;
  accepted.flow.tuple.dst_port = 41000;
  FlowEvent server_reset = accepted;
  server_reset.kind = FlowEventKind::kClose;
  server_reset.flow.outcome = FlowOutcome::kReset;
  server_reset.flow.resets_sent = 1;
  server_reset.flow.bytes_received = 42;
  // A server socket of another port (its peer's port is the HBONE one): not HBONE.
  FlowEvent other = server_reset;
  other.flow.tuple.src_port = 8080;
  other.flow.tuple.dst_port = 15008;
  exporter.ConsumeFlows(status, {connecting, open, update, accepted, closed, server_reset, other},
                        0, node);
  EXPECT_EQ(Value(exporter, "ambient_doctor_hbone_flows_opened_total{role=\"client\"}"), 1)
      << "connecting, then established: one flow";
  EXPECT_EQ(Value(exporter, "ambient_doctor_hbone_flows_opened_total{role=\"server\"}"), 1);
  EXPECT_EQ(Value(exporter,
                  "ambient_doctor_hbone_flows_closed_total{outcome=\"closed\",role=\"client\"}"),
            1);
  EXPECT_EQ(
      Value(exporter, "ambient_doctor_hbone_flows_closed_total{outcome=\"reset\",role=\"server\"}"),
      1);
  EXPECT_EQ(
      Value(exporter, "ambient_doctor_hbone_flows_closed_total{outcome=\"reset\",role=\"client\"}"),
      0);
  EXPECT_EQ(
      Value(exporter, "ambient_doctor_hbone_connection_duration_seconds_count{role=\"client\"}"),
      1);
  EXPECT_DOUBLE_EQ(
      Value(exporter, "ambient_doctor_hbone_connection_duration_seconds_sum{role=\"client\"}"),
      2.5);
  EXPECT_EQ(
      Value(exporter,
            "ambient_doctor_hbone_connection_duration_seconds_bucket{role=\"client\",le=\"1\"}"),
      0);
  EXPECT_EQ(Value(exporter,
                  "ambient_doctor_hbone_connection_duration_seconds_bucket{role=\"client\","
                  "le=\"10\"}"),
            1);
  EXPECT_EQ(Value(exporter, "ambient_doctor_hbone_sent_bytes_total{role=\"client\"}"), 5000)
      << "the close's bytes, not the live update's";
  EXPECT_EQ(Value(exporter, "ambient_doctor_hbone_received_bytes_total{role=\"client\"}"), 3000);
  EXPECT_EQ(Value(exporter, "ambient_doctor_hbone_received_bytes_total{role=\"server\"}"), 42);
  EXPECT_EQ(Value(exporter, "ambient_doctor_hbone_retransmits_total{role=\"client\"}"), 2);
  EXPECT_EQ(
      Value(exporter, "ambient_doctor_hbone_resets_total{direction=\"sent\",role=\"server\"}"), 1);
  EXPECT_EQ(
      Value(exporter, "ambient_doctor_hbone_resets_total{direction=\"received\",role=\"server\"}"),
      0);
  EXPECT_EQ(Value(exporter,
                  "ambient_doctor_hbone_connections_total{locality=\"remote\",outcome=\"closed\"}"),
            1)
      << "the client-side series are unchanged";
}

}  // namespace
}  // namespace ad
