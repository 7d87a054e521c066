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
  std::string json = RenderReportJson(api::BuildReport(TwoNetnsNode(), OneCriticalFinding()));
  EXPECT_NE(json.find(R"("schema": "ambient-doctor.report/v2")"), std::string::npos);
  EXPECT_NE(json.find(R"("code": "MIXED_BACKEND")"), std::string::npos);
  EXPECT_NE(json.find(R"("severity": "critical")"), std::string::npos);
  EXPECT_NE(json.find(R"("inode": 200)"), std::string::npos);
  EXPECT_NE(json.find(R"("critical": 1)"), std::string::npos);
  EXPECT_NE(json.find(R"("evidence": [)"), std::string::npos);
}

TEST(ReportRender, TableShowsSummaryRowsAndFindingsWithoutColour) {
  std::string table = RenderReportTable(api::BuildReport(TwoNetnsNode(), OneCriticalFinding()), {});
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
  EXPECT_NE(RenderReportTable(api::BuildReport(TwoNetnsNode(), OneCriticalFinding()), options)
                .find("\033["),
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
  const std::string plain =
      RenderReportTable(api::BuildReport(TwoNetnsNode(), OneCriticalFinding()), {});
  EXPECT_EQ(plain.find("ZDS"), std::string::npos);
  EXPECT_EQ(plain.find("POD"), std::string::npos);

  const std::string table = RenderReportTable(api::BuildReport(ZdsNode(), ZdsAnalysis()), {});
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
  const std::string plain =
      RenderReportJson(api::BuildReport(TwoNetnsNode(), OneCriticalFinding()));
  EXPECT_NE(plain.find(R"("zds_collected": false)"), std::string::npos);
  // report/v2: unknown values are absent (report/v1 wrote null).
  EXPECT_EQ(plain.find(R"("zds":)"), std::string::npos);
  EXPECT_NE(plain.find(R"("zds_state": "n.a.")"), std::string::npos);
  EXPECT_EQ(plain.find(R"("since_unix_ms":)"), std::string::npos);

  const std::string json = RenderReportJson(api::BuildReport(ZdsNode(), ZdsAnalysis()));
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
  NodeSnapshot node = ZdsNode();
  const ChangeSet set = LocalChangeSet(node, after, changes);
  const std::string lines = RenderChangeLines(set, false);
  EXPECT_EQ(lines,
            "2026-08-22T10:00:30.000Z critical resolved MIXED_BACKEND /run/netns/pod-a (inode "
            "200): Istio rules in 2 backends\n"
            "2026-08-22T10:00:30.000Z critical opened ZDS_STALL /run/netns/pod-a (inode 200) pod "
            "demo/echo: ZDS hand-off of the pod netns to ztunnel is stalled\n");
  const std::string json = RenderChangesJson(set);
  EXPECT_EQ(json.find('\n'), json.size() - 1) << "one line per document";
  EXPECT_NE(json.find(R"("schema":"ambient-doctor.changes/v1")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("opened":[{"code":"ZDS_STALL")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("resolved":[{"code":"MIXED_BACKEND")"), std::string::npos) << json;
}

}  // namespace
}  // namespace ad::cli

namespace ad::cli {
namespace {

// A report as the daemon answers it: history on every finding, a resolved one, the origin.
pb::Report DaemonReport() {
  pb::Report report = api::BuildReport(ZdsNode(), ZdsAnalysis());
  for (pb::Finding& f : *report.mutable_findings()) {
    f.set_first_seen_unix_ms(1787392800000);  // 30 s before the scan
    f.set_last_seen_unix_ms(1787392830000);
  }
  pb::Finding resolved = report.findings(0);
  resolved.set_resolved_at_unix_ms(1787392825000);
  resolved.set_first_seen_unix_ms(1787392700000);
  *report.add_recently_resolved() = resolved;
  pb::ReportOrigin* origin = report.mutable_origin();
  origin->set_source("daemon");
  origin->set_api_socket("/run/ambient-doctor/api.sock");
  origin->set_sequence(42);
  origin->set_trigger("poll");
  origin->set_age_ms(1200);
  origin->set_history(true);
  return report;
}

TEST(ReportRenderProto, DaemonOriginAndHistory) {
  const std::string table = RenderReportTable(DaemonReport(), {});
  EXPECT_NE(table.find("\nsource daemon unix:/run/ambient-doctor/api.sock  ·  result #42 (poll "
                       "scan), 1.2 s old  ·  with history\n"),
            std::string::npos)
      << table;
  // ZDS_STALL: the condition's age, then how long the finding has been open.
  EXPECT_NE(table.find("    | first seen 2026-08-22T10:00:00Z (30 s ago)\n"
                       "    | open for 30 s: first seen 2026-08-22T10:00:00Z, last seen "
                       "2026-08-22T10:00:30Z\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("RECENTLY RESOLVED (1, newest first)\nresolved 2026-08-22T10:00:25Z  "
                       "critical MIXED_BACKEND  /run/netns/pod-a (inode 200)\n    Istio rules in "
                       "2 backends (was open 2m05s, since 2026-08-22T09:58:20Z)\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(ReportExitCode(DaemonReport()), kExitFindings);
}

TEST(ReportRenderProto, LocalOriginSaysWhy) {
  pb::Report report = api::BuildReport(TwoNetnsNode(), OneCriticalFinding());
  report.mutable_origin()->set_source("local");
  report.mutable_origin()->set_fallback_reason("no daemon socket at /x.sock");
  const std::string table = RenderReportTable(report, {});
  EXPECT_NE(table.find("ms\nsource local scan (no daemon socket at /x.sock)  ·  no daemon "
                       "history\nmodes:"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("RECENTLY RESOLVED"), std::string::npos);
  EXPECT_NE(RenderReportJson(report).find(R"("fallback_reason": "no daemon socket at /x.sock")"),
            std::string::npos);
}

TEST(ReportRenderProto, RecentlyResolvedIsBoundedAndVisible) {
  pb::Report report = DaemonReport();
  report.clear_findings();
  for (int i = 0; i < 30; ++i) {
    pb::Finding* f = report.add_recently_resolved();
    *f = report.recently_resolved(0);
    f->set_resolved_at_unix_ms(1787392000000 + i * 1000.0);
  }
  RenderOptions options;
  options.max_recently_resolved = 5;
  const std::string table = RenderReportTable(report, options);
  EXPECT_NE(table.find("RECENTLY RESOLVED (31, newest first)"), std::string::npos) << table;
  EXPECT_NE(table.find("(26 older resolved findings not shown; -o json lists them all)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("resolved 2026-08-22T10:00:25Z"), std::string::npos) << "newest first";
  EXPECT_EQ(table.find("resolved 2026-08-22T09:46:40Z"), std::string::npos) << "oldest not shown";
}

TEST(ReportRenderProto, ExitCodeAndStatusComeFromTheProto) {
  pb::Report report = api::BuildReport(TwoNetnsNode(), OneCriticalFinding());
  EXPECT_EQ(ReportExitCode(report), kExitFindings);
  EXPECT_EQ(report.netns(1).status(), "critical");
  report.mutable_findings(0)->set_severity("info");
  EXPECT_EQ(ReportExitCode(report), kExitHealthy);
  report.clear_findings();
  EXPECT_EQ(ReportExitCode(report), kExitHealthy);
  pb::SeverityCounts counts;
  EXPECT_EQ(ReportExitCode(counts), kExitHealthy);
  counts.set_warning(1);
  EXPECT_EQ(ReportExitCode(counts), kExitFindings);
}

TEST(ReportRenderProto, Durations) {
  EXPECT_EQ(FormatDuration(0), "0.0 s");
  EXPECT_EQ(FormatDuration(1234), "1.2 s");
  EXPECT_EQ(FormatDuration(95000), "95 s");
  EXPECT_EQ(FormatDuration(185000), "3m05s");
  EXPECT_EQ(FormatDuration(7260000), "2h01m");
  EXPECT_EQ(FormatDuration(273600000), "3d04h");
  EXPECT_EQ(FormatDuration(-5), "0.0 s");
}

TEST(ReportRenderProto, DaemonChangeSetRendersLikeALocalOne) {
  ChangeSet set;
  set.node = "node-a";
  set.taken_at_unix_ms = 1787392830000;
  pb::Finding f = api::BuildFinding(ZdsAnalysis().findings[1]);
  f.set_first_seen_unix_ms(1787392830000);  // history fields stay out of changes/v1
  set.changes.push_back({true, f});
  set.open_findings.set_critical(2);
  EXPECT_EQ(RenderChangeLines(set, false),
            "2026-08-22T10:00:30.000Z critical opened ZDS_STALL /run/netns/pod-a (inode 200) pod "
            "demo/echo: ZDS hand-off of the pod netns to ztunnel is stalled\n");
  const std::string json = RenderChangesJson(set);
  EXPECT_NE(json.find(R"("findings":{"critical":2,"warning":0,"info":0})"), std::string::npos)
      << json;
  EXPECT_EQ(json.find("first_seen"), std::string::npos) << json;
}

}  // namespace
}  // namespace ad::cli
