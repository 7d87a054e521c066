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
  f.code = FindingCode::kMixedBackend;
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
  EXPECT_NE(json.find(R"("schema": "ambient-doctor.report/v2")"), std::string::npos);
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

NodeSnapshot ZdsNode() {
  NodeSnapshot s = TwoNetnsNode();
  s.taken_at_unix_ms = 1787392830000;  // 2026-08-22T10:00:30Z
  s.zds_collected = true;
  s.zds.path = "/var/run/ztunnel/ztunnel.sock";
  s.zds.listener_found = true;
  s.zds.listener.inode = 5000;
  s.zds.listener.owner_pids = {100};
  UnixSocket accepted;
  accepted.inode = 5001;
  accepted.peer_inode = 5002;
  accepted.receive_queue = 2;
  accepted.owner_pids = {100};
  s.zds.accepted = {accepted};
  UnixSocket client;
  client.inode = 5002;
  client.peer_inode = 5001;
  client.owner_pids = {200};
  s.zds.clients = {client};
  ProcessNetnsFds cni;
  cni.pid = 100;
  cni.comm = "istio-cni";
  cni.role = ProcessRole::kIstioCni;
  cni.netns_fd_inodes = {200};
  ProcessNetnsFds ztunnel;
  ztunnel.pid = 200;
  ztunnel.comm = "ztunnel";
  ztunnel.role = ProcessRole::kZtunnel;
  s.processes = {cni, ztunnel};
  ZtunnelAdminState admin;
  admin.pid = 200;
  admin.admin_reachable = true;
  admin.ready = false;
  admin.pending_tasks = {"workload proxy manager"};
  s.ztunnels = {admin};
  s.cri.available = true;
  s.cri.runtime = "containerd 1.7.24";
  s.cri.endpoint = "unix:///run/containerd/containerd.sock";
  return s;
}

NodeAnalysis ZdsAnalysis() {
  NodeAnalysis a = OneCriticalFinding();
  a.netns[1].pod = "demo/echo";
  a.netns[1].pod_uid = "uid-echo";
  a.netns[1].zds_state = ZdsState::kStalled;
  a.netns[1].ztunnel_listeners = {15001, 15008};
  a.netns[1].ztunnel_pids = {200};
  Finding stall;
  stall.code = FindingCode::kZdsStall;
  stall.severity = Severity::kCritical;
  stall.netns_path = "/run/netns/pod-a";
  stall.netns_inode = 200;
  stall.pod = "demo/echo";
  stall.summary = "ZDS hand-off of the pod netns to ztunnel is stalled";
  stall.since_unix_ms = 1787392800000;
  a.findings.push_back(stall);
  return a;
}

TEST(ReportRender, ZdsColumnsAndNodeSectionOnlyWhenCollected) {
  const std::string plain = RenderReportTable(TwoNetnsNode(), OneCriticalFinding(), {});
  EXPECT_EQ(plain.find("ZDS"), std::string::npos);
  EXPECT_EQ(plain.find("POD"), std::string::npos);

  const std::string table = RenderReportTable(ZdsNode(), ZdsAnalysis(), {});
  EXPECT_NE(table.find("POD"), std::string::npos) << table;
  EXPECT_NE(table.find("ZTUNNEL LISTENERS"), std::string::npos);
  EXPECT_NE(table.find("demo/echo"), std::string::npos);
  EXPECT_NE(table.find("stalled"), std::string::npos);
  EXPECT_NE(table.find("15001,15008"), std::string::npos);
  EXPECT_NE(table.find("ZDS socket /var/run/ztunnel/ztunnel.sock: listener istio-cni pid 100, 1 "
                       "connection(s), accept backlog 0"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("connection 5001 <-> 5002: istio-cni pid 100 <-> ztunnel pid 200, recv-q "
                       "2, send-q 0"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("ztunnel pid 200: not ready (pending: workload proxy manager)"),
            std::string::npos);
  EXPECT_NE(table.find("istio-cni pid 100: holds 1 netns"), std::string::npos);
  EXPECT_NE(table.find("CRI containerd 1.7.24 at unix:///run/containerd/containerd.sock"),
            std::string::npos);
  EXPECT_NE(table.find("first seen 2026-08-22T10:00:00Z"), std::string::npos);
  EXPECT_NE(table.find("pod demo/echo"), std::string::npos);
}

TEST(ReportRender, JsonZdsFieldsAreAdditive) {
  const std::string plain = RenderReportJson(TwoNetnsNode(), OneCriticalFinding());
  EXPECT_NE(plain.find(R"("zds_collected": false)"), std::string::npos);
  // report/v2: unknown values are absent (report/v1 wrote null).
  EXPECT_EQ(plain.find(R"("zds":)"), std::string::npos);
  EXPECT_NE(plain.find(R"("zds_state": "n.a.")"), std::string::npos);
  EXPECT_EQ(plain.find(R"("since_unix_ms":)"), std::string::npos);

  const std::string json = RenderReportJson(ZdsNode(), ZdsAnalysis());
  EXPECT_NE(json.find(R"("schema": "ambient-doctor.report/v2")"), std::string::npos);
  EXPECT_NE(json.find(R"("zds_state": "stalled")"), std::string::npos);
  EXPECT_NE(json.find(R"("pod": "demo/echo")"), std::string::npos);
  EXPECT_NE(json.find(R"("pod_uid": "uid-echo")"), std::string::npos);
  EXPECT_NE(json.find(R"("ztunnel_listeners": [)"), std::string::npos);
  EXPECT_NE(json.find(R"("listener_found": true)"), std::string::npos);
  EXPECT_NE(json.find(R"("receive_queue": 2)"), std::string::npos);
  EXPECT_NE(json.find(R"("role": "ztunnel")"), std::string::npos);
  EXPECT_NE(json.find(R"("ready": false)"), std::string::npos);
  EXPECT_NE(json.find(R"("since_unix_ms": 1787392800000)"), std::string::npos);
  EXPECT_NE(json.find(R"("available": true)"), std::string::npos);
}

TEST(ReportRender, WatchChangeLinesAndJson) {
  const NodeAnalysis after = ZdsAnalysis();
  const std::vector<FindingChange> changes = {
      {FindingChange::Kind::kResolved, OneCriticalFinding().findings[0]},
      {FindingChange::Kind::kOpened, after.findings[1]}};
  const std::string lines = RenderChangeLines(changes, 1787392830000, false);
  EXPECT_EQ(lines,
            "2026-08-22T10:00:30.000Z critical resolved MIXED_BACKEND /run/netns/pod-a (inode "
            "200): Istio rules in 2 backends\n"
            "2026-08-22T10:00:30.000Z critical opened ZDS_STALL /run/netns/pod-a (inode 200) pod "
            "demo/echo: ZDS hand-off of the pod netns to ztunnel is stalled\n");
  const std::string json = RenderChangesJson(ZdsNode(), after, changes);
  EXPECT_EQ(json.find('\n'), json.size() - 1) << "one line per document";
  EXPECT_NE(json.find(R"("schema":"ambient-doctor.changes/v1")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("opened":[{"code":"ZDS_STALL")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("resolved":[{"code":"MIXED_BACKEND")"), std::string::npos) << json;
}

}  // namespace
}  // namespace ad::cli
