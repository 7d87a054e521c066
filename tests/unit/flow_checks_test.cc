// Flow-based findings (pure): HBONE_CONNECT_FAILURES split by same-node vs remote with the worst
// destinations, MESH_BYPASS for an established app connection without ztunnel's accept or mark,
// and TRACING_UNAVAILABLE.
#include "flows/flow_checks.h"

#include <gtest/gtest.h>

namespace ad {
namespace {

constexpr uint32_t kPodNetns = 4026532300;

FlowAddress V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  FlowAddress address;
  address.bytes = {a, b, c, d};
  return address;
}

Flow Client(uint8_t dst_last, FlowOutcome outcome, uint16_t dst_port = 15008,
            uint16_t src_port = 40000) {
  Flow flow;
  flow.netns_inode = kPodNetns;
  flow.role = FlowRole::kClient;
  flow.tuple.src = V4(10, 1, 0, 5);
  flow.tuple.src_port = src_port;
  flow.tuple.dst = V4(10, 1, dst_last < 100 ? 0 : 1, dst_last);
  flow.tuple.dst_port = dst_port;
  flow.outcome = outcome;
  if (outcome == FlowOutcome::kClosed || outcome == FlowOutcome::kOpen) {
    flow.established_unix_ns = 1'000'000'000;
  }
  return flow;
}

FlowCheckContext Context() {
  FlowCheckContext context;
  context.node_addresses = {V4(10, 1, 0, 7), V4(10, 1, 0, 8)};  // pods on this node
  context.netns_paths[kPodNetns] = "/run/netns/cni-1";
  context.pods[kPodNetns] = "demo/echo";
  context.ambient_netns = {kPodNetns};
  return context;
}

TEST(HboneConnectFailures, RemoteTimeoutsAreOneFindingWithTheWorstDestinations) {
  std::vector<Flow> flows;
  for (int i = 0; i < 5; ++i) flows.push_back(Client(200, FlowOutcome::kTimeout));
  flows.push_back(Client(201, FlowOutcome::kTimeout));
  flows.push_back(Client(202, FlowOutcome::kClosed));
  flows.push_back(Client(7, FlowOutcome::kClosed));  // same-node, fine
  std::vector<Finding> findings = CheckHboneConnectFailures(flows, Context());
  ASSERT_EQ(findings.size(), 1u);
  const Finding& f = findings[0];
  EXPECT_EQ(f.code, FindingCode::kHboneConnectFailures);
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_EQ(f.subject, "remote");
  EXPECT_EQ(f.netns_inode, kPodNetns);
  EXPECT_EQ(f.netns_path, "/run/netns/cni-1");
  EXPECT_EQ(f.pod, "demo/echo");
  EXPECT_EQ(f.summary, "6 of 7 HBONE connections to remote destinations failed (timeout 6)");
  ASSERT_EQ(f.evidence.size(), 2u);
  EXPECT_EQ(f.evidence[0], "10.1.1.200:15008: timeout 5 of 5");
  EXPECT_EQ(f.evidence[1], "10.1.1.201:15008: timeout 1 of 1");
  EXPECT_NE(f.hint.find("NetworkPolicy"), std::string::npos) << f.hint;
}

TEST(HboneConnectFailures, SameNodeOnlyFailuresPointAtTheNodeDatapath) {
  std::vector<Flow> flows;
  for (int i = 0; i < 3; ++i) flows.push_back(Client(7, FlowOutcome::kTimeout));
  flows.push_back(Client(8, FlowOutcome::kRefused));
  for (int i = 0; i < 4; ++i) flows.push_back(Client(200, FlowOutcome::kClosed));
  std::vector<Finding> findings = CheckHboneConnectFailures(flows, Context());
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].subject, "same-node");
  EXPECT_NE(findings[0].hint.find("istio#59754"), std::string::npos);
  EXPECT_EQ(findings[0].summary,
            "4 of 4 HBONE connections to same-node destinations failed (refused 1, timeout 3)");
}

TEST(HboneConnectFailures, BelowThresholdsOrOtherPortsNothing) {
  std::vector<Flow> flows = {Client(200, FlowOutcome::kRefused), Client(200, FlowOutcome::kReset)};
  EXPECT_TRUE(CheckHboneConnectFailures(flows, Context()).empty()) << "2 < min_failures";
  flows.clear();
  for (int i = 0; i < 3; ++i) flows.push_back(Client(200, FlowOutcome::kReset));
  for (int i = 0; i < 20; ++i) flows.push_back(Client(200, FlowOutcome::kClosed));
  EXPECT_TRUE(CheckHboneConnectFailures(flows, Context()).empty()) << "3 of 23 < 20 %";
  flows.clear();
  for (int i = 0; i < 5; ++i) flows.push_back(Client(200, FlowOutcome::kTimeout, 80));
  EXPECT_TRUE(CheckHboneConnectFailures(flows, Context()).empty()) << "not HBONE";
  Flow server = Client(200, FlowOutcome::kTimeout);
  server.role = FlowRole::kServer;
  EXPECT_TRUE(CheckHboneConnectFailures({server, server, server}, Context()).empty());
}

Flow ZtunnelAccept(const Flow& app) {
  Flow accepted;
  accepted.netns_inode = app.netns_inode;
  accepted.role = FlowRole::kServer;
  accepted.tuple.src = V4(127, 0, 0, 1);
  accepted.tuple.src_port = 15001;
  accepted.tuple.dst = app.tuple.src;
  accepted.tuple.dst_port = app.tuple.src_port;
  accepted.outcome = FlowOutcome::kClosed;
  return accepted;
}

TEST(MeshBypass, EstablishedAppConnectionWithoutZtunnelAcceptIsCritical) {
  Flow app = Client(200, FlowOutcome::kClosed, 80, 41000);
  std::vector<Finding> findings = CheckMeshBypass({app}, Context());
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].code, FindingCode::kMeshBypass);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_EQ(findings[0].pod, "demo/echo");
  ASSERT_EQ(findings[0].evidence.size(), 1u);
  EXPECT_EQ(findings[0].evidence[0], "tcp 10.1.0.5:41000 -> 10.1.1.200:80 closed at 1000 ms");
}

TEST(MeshBypass, RedirectedMarkedLoopbackFailedOrNonAmbientFlowsAreFine) {
  Flow app = Client(200, FlowOutcome::kClosed, 80, 41000);
  EXPECT_TRUE(CheckMeshBypass({app, ZtunnelAccept(app)}, Context()).empty()) << "redirected";
  Flow marked = app;
  marked.mark = 0x539;  // ztunnel's own outbound socket
  EXPECT_TRUE(CheckMeshBypass({marked}, Context()).empty());
  Flow loopback = app;
  loopback.tuple.dst = V4(127, 0, 0, 1);
  EXPECT_TRUE(CheckMeshBypass({loopback}, Context()).empty());
  Flow refused = Client(200, FlowOutcome::kRefused, 80, 41001);
  EXPECT_TRUE(CheckMeshBypass({refused}, Context()).empty()) << "never established";
  FlowCheckContext not_ambient = Context();
  not_ambient.ambient_netns.clear();
  EXPECT_TRUE(CheckMeshBypass({app}, not_ambient).empty());
  // An accept for another source port does not cover this connection.
  Flow other = ZtunnelAccept(app);
  other.tuple.dst_port = 41002;
  EXPECT_EQ(CheckMeshBypass({app, other}, Context()).size(), 1u);
}

TEST(MeshBypass, DnsCaptureOwnAddressAndMaskedMarkAreNotBypasses) {
  // TCP :53 with DNS capture goes to ztunnel's DNS proxy, not to 15001.
  Flow dns = Client(200, FlowOutcome::kClosed, 53, 41010);
  Flow proxy = ZtunnelAccept(dns);
  proxy.tuple.src_port = 15053;
  EXPECT_TRUE(CheckMeshBypass({dns, proxy}, Context()).empty());
  // A connect to the pod's own IP is routed over lo, which Istio lets pass.
  Flow own = Client(200, FlowOutcome::kClosed, 8080, 41011);
  own.tuple.dst = own.tuple.src;
  EXPECT_TRUE(CheckMeshBypass({own}, Context()).empty());
  // The rules match ztunnel's mark under 0xfff.
  Flow marked = Client(200, FlowOutcome::kClosed, 80, 41012);
  marked.mark = 0x10539;
  EXPECT_TRUE(CheckMeshBypass({marked}, Context()).empty());
  Flow other_mark = marked;
  other_mark.mark = 0x538;
  EXPECT_EQ(CheckMeshBypass({other_mark}, Context()).size(), 1u);
}

TEST(MeshBypass, AConnectionEstablishedWithinTheSettleTimeIsJudgedLater) {
  Flow app = Client(200, FlowOutcome::kOpen, 80, 41020);  // established at 1 s
  FlowCheckContext context = Context();
  context.now_unix_ns = app.established_unix_ns + 500'000'000;
  EXPECT_TRUE(CheckMeshBypass({app}, context).empty()) << "ztunnel's accept may still come";
  context.now_unix_ns = app.established_unix_ns + 1'000'000'000;
  EXPECT_EQ(CheckMeshBypass({app}, context).size(), 1u);
}

TEST(MeshBypass, EvidenceIsBounded) {
  std::vector<Flow> flows;
  for (uint16_t port = 0; port < 8; ++port) {
    flows.push_back(Client(200, FlowOutcome::kOpen, 443, static_cast<uint16_t>(42000 + port)));
  }
  std::vector<Finding> findings = CheckMeshBypass(flows, Context());
  ASSERT_EQ(findings.size(), 1u);
  ASSERT_EQ(findings[0].evidence.size(), 6u);
  EXPECT_EQ(findings[0].evidence.back(), "… and 3 more");
}

TEST(TracingUnavailable, CarriesTheReason) {
  Finding f = TracingUnavailableFinding("no kernel BTF at /sys/kernel/btf/vmlinux");
  EXPECT_EQ(f.code, FindingCode::kTracingUnavailable);
  EXPECT_EQ(f.severity, Severity::kInfo);
  EXPECT_EQ(f.code_name(), "TRACING_UNAVAILABLE");
  ASSERT_EQ(f.evidence.size(), 1u);
  EXPECT_EQ(f.evidence[0], "no kernel BTF at /sys/kernel/btf/vmlinux");
}

}  // namespace
}  // namespace ad
