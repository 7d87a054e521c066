// report -o json is the proto: the printed document parses back into the same message, keeps
// v1's number shapes and leaves unknown values out.
#include "api/report_proto.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

namespace ad::api {
namespace {

NodeSnapshot Node() {
  NodeSnapshot s;
  s.node_name = "node-a";
  s.taken_at_unix_ms = 1787392800123;
  NetnsSnapshot pod;
  pod.netns.inode = 4026532001;
  pod.netns.paths = {"/run/netns/pod-a"};
  s.netns.push_back(pod);
  s.zds_collected = true;
  s.zds.path = "/var/run/ztunnel/ztunnel.sock";
  ZtunnelAdminState z;
  z.pid = 7;
  z.ready = false;
  s.ztunnels.push_back(z);
  return s;
}

NodeAnalysis Analysis() {
  NodeAnalysis a;
  NetnsClassification c;
  c.netns_inode = 4026532001;
  c.mode = DataplaneMode::kAmbient;
  a.netns.push_back(c);
  Finding f;
  f.code = FindingCode::kZdsStall;
  f.severity = Severity::kCritical;
  f.netns_inode = 4026532001;
  f.subject = "zds";
  f.since_unix_ms = 1787392700000;
  a.findings.push_back(f);
  return a;
}

TEST(ReportProto, JsonIsTheProtoAndKeepsNumbers) {
  const pb::Report report = BuildReport(Node(), Analysis());
  const std::string json = ToJson(report);
  pb::Report parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(report, parsed));

  EXPECT_NE(json.find(R"("inode": 4026532001)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("taken_at_unix_ms": 1787392800123)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("since_unix_ms": 1787392700000)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("mode": "ambient")"), std::string::npos);
  EXPECT_NE(json.find(R"("ready": false)"), std::string::npos) << "known false is printed";
  EXPECT_NE(json.find(R"("evidence": [])"), std::string::npos) << "empty lists are printed";
  EXPECT_EQ(json.find(R"("pod":)"), std::string::npos) << "unknown pod is absent";
  EXPECT_EQ(json.find(R"("variant":)"), std::string::npos);
  EXPECT_EQ(json.find(R"("listener":)"), std::string::npos);
  EXPECT_EQ(json.find(R"("active_proxy_count":)"), std::string::npos);
  EXPECT_EQ(json.find(R"("first_seen_unix_ms":)"), std::string::npos) << "no history here";
  EXPECT_EQ(json.back(), '\n');
}

TEST(ReportProto, HistoryFillsFirstAndLastSeen) {
  const NodeAnalysis analysis = Analysis();
  const std::vector<FindingRecord> records = {{analysis.findings[0], 1000, 2000, 0}};
  const std::vector<FindingRecord> resolved = {{analysis.findings[0], 10, 20, 30}};
  const pb::Report report = BuildReport(Node(), analysis, {&records, &resolved});
  ASSERT_EQ(report.findings_size(), 1);
  EXPECT_EQ(report.findings(0).first_seen_unix_ms(), 1000);
  EXPECT_EQ(report.findings(0).last_seen_unix_ms(), 2000);
  EXPECT_FALSE(report.findings(0).has_resolved_at_unix_ms());
  ASSERT_EQ(report.recently_resolved_size(), 1);
  EXPECT_EQ(report.recently_resolved(0).resolved_at_unix_ms(), 30);
}

}  // namespace
}  // namespace ad::api
