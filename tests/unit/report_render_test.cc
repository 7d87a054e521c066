#include "cli/report_render.h"

#include <gtest/gtest.h>

namespace ad::cli {
namespace {

NodeSnapshot TwoNetnsNode() {
  NodeSnapshot s;
  s.node_name = "node-a";
  s.scan_ms = 1.2;
  NetnsSnapshot host;
  host.netns.inode = 100;
  host.netns.paths = {"/proc/1/ns/net"};
  host.netns.is_host = true;
  NetnsSnapshot pod;
  pod.netns.inode = 200;
  pod.netns.paths = {"/run/netns/pod-a"};
  s.netns = {host, pod};
  return s;
}

NodeAnalysis OneCriticalFinding() {
  NodeAnalysis a;
  NetnsClassification host;
  host.netns_inode = 100;
  host.is_host = true;
  host.host_rules_present = true;
  host.host_backends = {Backend::kIptablesNft};
  NetnsClassification pod;
  pod.netns_inode = 200;
  pod.mode = DataplaneMode::kAmbient;
  pod.ambient_backends = {Backend::kIptablesLegacy, Backend::kIptablesNft};
  pod.families = {Family::kIpv4};
  pod.variant = AmbientVariant{.dns_capture = true};
  a.netns = {host, pod};
  Finding f;
  f.code = "MIXED_BACKEND";
  f.severity = Severity::kCritical;
  f.netns_path = "/run/netns/pod-a";
  f.netns_inode = 200;
  f.summary = "Istio rules in 2 backends";
  f.evidence = {"iptables-legacy ipv4 nat ISTIO_OUTPUT: -A ISTIO_OUTPUT -j ACCEPT"};
  f.hint = "restart with FORCE_IPTABLES_BINARY";
  a.findings = {f};
  return a;
}

TEST(ReportRender, JsonHasStableSchemaAndFields) {
  std::string json = RenderReportJson(TwoNetnsNode(), OneCriticalFinding());
  EXPECT_NE(json.find(R"("schema": "ambient-doctor.report/v1")"), std::string::npos);
  EXPECT_NE(json.find(R"("code": "MIXED_BACKEND")"), std::string::npos);
  EXPECT_NE(json.find(R"("severity": "critical")"), std::string::npos);
  EXPECT_NE(json.find(R"("inode": 200)"), std::string::npos);
  EXPECT_NE(json.find(R"("critical": 1)"), std::string::npos);
  EXPECT_NE(json.find(R"("evidence": [)"), std::string::npos);
}

TEST(ReportRender, TableShowsSummaryRowsAndFindingsWithoutColour) {
  std::string table = RenderReportTable(TwoNetnsNode(), OneCriticalFinding(), {});
  EXPECT_EQ(table.find("\033["), std::string::npos) << "no colour unless asked";
  EXPECT_NE(table.find("2 netns scanned"), std::string::npos);
  EXPECT_NE(table.find("/proc/1/ns/net (host)"), std::string::npos);
  EXPECT_NE(table.find("iptables-legacy,iptables-nft"), std::string::npos);
  EXPECT_NE(table.find("CRITICAL"), std::string::npos);
  EXPECT_NE(table.find("hint: restart"), std::string::npos);
}

TEST(ReportRender, ColourOnlyWhenRequested) {
  RenderOptions options;
  options.color = true;
  EXPECT_NE(RenderReportTable(TwoNetnsNode(), OneCriticalFinding(), options).find("\033["),
            std::string::npos);
}

TEST(ReportRender, ExitCodeFollowsWorstSeverity) {
  NodeAnalysis a = OneCriticalFinding();
  EXPECT_EQ(ReportExitCode(a), 1);
  a.findings[0].severity = Severity::kInfo;
  EXPECT_EQ(ReportExitCode(a), 0);
  a.findings.clear();
  EXPECT_EQ(ReportExitCode(a), 0);
  EXPECT_EQ(NetnsStatus(a, 200), "ok");
}

}  // namespace
}  // namespace ad::cli
