// `flows -o json` (ambient-doctor.flows/v1) and the --follow line JSON, written by protobuf's JSON
// printer from FlowsDocument / FlowEventLine, against golden files the hand-written renderer made
// (AD_UPDATE_GOLDEN=1 rewrote them at that commit). The comparison is of parsed JSON: every key the
// hand-written document had keeps its value (as a parser reads it: numbers are doubles) and type;
// keys may be added, their order is free (CHANGELOG.md).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "ambientdoctor/v1/documents.pb.h"
#include "cli/flows_render.h"

namespace ad::cli {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

std::string GoldenPath(const std::string& name) {
  return std::string(AD_SOURCE_DIR) + "/tests/unit/golden/render/" + name;
}

std::string ReadGolden(const std::string& name, const std::string& actual) {
  const std::string path = GoldenPath(name);
  if (std::getenv("AD_UPDATE_GOLDEN") != nullptr) std::ofstream(path, std::ios::binary) << actual;
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Value Parse(const std::string& json) {
  Value value;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &value);
  EXPECT_TRUE(status.ok()) << status.message() << "\n" << json;
  return value;
}

// Every key of `old` is in `now` with the same value.
void ExpectContains(const Value& old, const Value& now, const std::string& path) {
  if (old.has_struct_value()) {
    ASSERT_TRUE(now.has_struct_value()) << path;
    for (const auto& [key, value] : old.struct_value().fields()) {
      const auto it = now.struct_value().fields().find(key);
      ASSERT_NE(it, now.struct_value().fields().end()) << path << "." << key << " missing";
      ExpectContains(value, it->second, path + "." + key);
    }
  } else if (old.has_list_value()) {
    ASSERT_TRUE(now.has_list_value()) << path;
    ASSERT_EQ(old.list_value().values_size(), now.list_value().values_size()) << path;
    for (int i = 0; i < old.list_value().values_size(); ++i) {
      ExpectContains(old.list_value().values(i), now.list_value().values(i),
                     path + "[" + std::to_string(i) + "]");
    }
  } else {
    EXPECT_EQ(old.DebugString(), now.DebugString()) << path;
  }
}

FlowAddress V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  FlowAddress address;
  address.bytes[0] = a;
  address.bytes[1] = b;
  address.bytes[2] = c;
  address.bytes[3] = d;
  return address;
}

Flow MakeFlow(uint64_t id, FlowOutcome outcome, uint32_t netns) {
  Flow flow;
  flow.flow_id = id;
  flow.cookie_known = id < 1000;
  flow.netns_inode = netns;
  flow.tuple.src = V4(10, 0, 0, 5);
  flow.tuple.src_port = 40000;
  flow.tuple.dst = V4(10, 0, 1, 9);
  flow.tuple.dst_port = 15008;
  flow.mark = 0x539;
  flow.outcome = outcome;
  flow.started_unix_ns = 1787392830123456789;
  if (outcome != FlowOutcome::kRefused) flow.established_unix_ns = 1787392830124000000;
  if (outcome != FlowOutcome::kOpen) flow.ended_unix_ns = 1787392831500000001;
  flow.bytes_sent = 5'000'000'000;  // past 2^32
  flow.bytes_received = 1234;
  flow.srtt_us = 250;
  flow.retransmits = 2;
  flow.resets_received = outcome == FlowOutcome::kRefused ? 1 : 0;
  flow.sk_err = outcome == FlowOutcome::kRefused ? 111 : 0;
  flow.live = outcome == FlowOutcome::kOpen;
  return flow;
}

FlowsReport Report() {
  FlowsReport report;
  report.attach_mode = "tp_btf";
  report.ports = {15008, 15001};
  report.duration_ms = 3004;
  report.events = 7;
  report.lost_events = 1;
  report.late_flows = 1;
  report.errors = {"netns 4026532101: setns: Operation not permitted"};
  report.netns_paths = {{4026532101, "/run/netns/pod-a"}};
  report.pods = {{4026532101, "demo/a"}};
  report.view.open.push_back(MakeFlow(17, FlowOutcome::kOpen, 4026532101));
  report.view.closed.push_back(MakeFlow(18, FlowOutcome::kClosed, 4026532101));
  Flow refused = MakeFlow(0xfedcba9876543210, FlowOutcome::kRefused, 4026532199);
  refused.seen_late = true;
  refused.started_unix_ns = 0;
  report.view.closed.push_back(refused);
  report.view.closed_dropped = 3;
  NetnsFlowAggregate a{.netns_inode = 4026532101};
  a.client.opened = 2;
  a.client.open = 1;
  a.client.closed = {{FlowOutcome::kClosed, 1}, {FlowOutcome::kReset, 4}};
  a.client.bytes_sent = 5'000'001'234;
  a.server.closed = {{FlowOutcome::kAborted, 1}};
  report.view.by_netns.push_back(a);
  report.view.by_netns.push_back({.netns_inode = 4026532199});
  DestinationAggregate d{.address = V4(10, 0, 1, 9), .port = 15008};
  d.counts.closed = {{FlowOutcome::kRefused, 2}, {FlowOutcome::kTimeout, 1}};
  d.connect_latency_us_sum = 1001;
  d.connect_latency_samples = 2;
  d.connect_latency_us_max = 700;
  report.view.by_destination.push_back(d);
  report.view.by_destination.push_back({.address = V4(10, 0, 1, 10), .port = 80});
  return report;
}

TEST(FlowsJson, DocumentKeepsTheHandWrittenValues) {
  const std::string now = RenderFlowsJson(Report());
  EXPECT_NE(now.find("\"schema\": \"ambient-doctor.flows/v1\""), std::string::npos) << now;
  ExpectContains(Parse(ReadGolden("flows.json", now)), Parse(now), "$");
  EXPECT_EQ(now.substr(now.size() - 3), "}\n\n") << "an empty line at the end, as before";
}

TEST(FlowsJson, FollowLinesKeepTheHandWrittenValues) {
  const FlowsReport report = Report();
  std::string now;
  for (const Flow& flow : report.view.closed) now += FollowLine("close", flow, report, true);
  now += FollowLine("update", report.view.open[0], report, true);
  const std::string old = ReadGolden("flows_follow.jsonl", now);
  std::istringstream old_lines(old), now_lines(now);
  std::string old_line, now_line;
  int lines = 0;
  while (std::getline(old_lines, old_line)) {
    ASSERT_TRUE(std::getline(now_lines, now_line));
    EXPECT_EQ(now_line.rfind("{\"event\":\"", 0), 0u) << "one compact object per line";
    ExpectContains(Parse(old_line), Parse(now_line), "line " + std::to_string(++lines));
  }
  EXPECT_EQ(lines, 3);
  EXPECT_FALSE(std::getline(now_lines, now_line));
}

}  // namespace
}  // namespace ad::cli

namespace ad::cli {
namespace {

// FlowOutcomeCounts has a field per outcome name: an outcome added to the model without its field
// would be left out of `closed` silently.
TEST(FlowsJson, FlowOutcomeCountsHasEveryOutcome) {
  const auto* descriptor = ::ambientdoctor::v1::FlowOutcomeCounts::descriptor();
  for (int i = 0; i <= static_cast<int>(FlowOutcome::kAborted); ++i) {
    const std::string name(FlowOutcomeName(static_cast<FlowOutcome>(i)));
    EXPECT_NE(descriptor->FindFieldByName(name), nullptr) << name;
  }
  EXPECT_FALSE(ParseFlowOutcome("unknown").has_value()) << "kAborted is the last outcome";
}

TEST(FlowsJson, UnavailableDocument) {
  EXPECT_EQ(
      RenderFlowsUnavailableJson("the kernel has no BTF"),
      "{\n \"schema\": \"ambient-doctor.flows/v1\",\n \"available\": false,\n \"reason\": \"the "
      "kernel has no BTF\"\n}\n\n");
}

}  // namespace
}  // namespace ad::cli
