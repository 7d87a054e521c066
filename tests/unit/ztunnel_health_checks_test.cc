// ZTUNNEL_RESOURCE_PRESSURE and ZTUNNEL_CERT_UNHEALTHY on hand-built snapshots: each limit, the
// CLOSE_WAIT trend, certificate states and expiry, the identity -> pod join, and the healthy and
// unknown cases that must stay silent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis_fixtures.h"

namespace ad {
namespace {

using test::Dump;

constexpr int kCniPid = 100;
constexpr int kZtunnelPid = 200;
constexpr uint64_t kPodInode = 4026532001;
constexpr uint64_t kSecondPodInode = 4026532002;
constexpr uint64_t kZtunnelNetnsInode = 4026532500;
constexpr int64_t kT0 = 1787392800000;  // 2026-08-22T10:00:00Z
constexpr int64_t kHour = 3'600'000;
constexpr uint64_t kMiB = uint64_t{1} << 20;
const AmbientVariant kDefault{true, false, {}, false};

void AddZtunnelListeners(NetnsSnapshot& netns) {
  for (uint16_t port : {15001, 15006, 15008}) {
    ListeningSocket socket;
    socket.family = Family::kIpv6;
    socket.address = "::";
    socket.port = port;
    socket.mark = 0x539;
    socket.mark_known = true;
    socket.inode = 90000 + port + netns.netns.inode % 100;
    socket.owner_pids = {kZtunnelPid};
    netns.listeners.push_back(socket);
  }
}

ProcessNetnsFds Process(int pid, ProcessRole role, std::vector<uint64_t> netns_fds,
                        uint64_t own_netns) {
  return test::ProcessWithNetnsFds(pid, role, std::move(netns_fds), own_netns, kT0 - kHour);
}

ZtunnelCertificate Certificate(std::string identity, std::string state, int64_t expires) {
  return ZtunnelCertificate{std::move(identity), std::move(state), expires, expires ? 2u : 0u};
}

// Two healthy served pods (demo/echo with sa echo, demo/web with sa web), ztunnel in its own
// netns, CRI naming both, Available certificates for both identities with 20 h left, and a
// ztunnel well within its limits.
NodeSnapshot HealthyNode() {
  NodeSnapshot node;
  node.node_name = "node-a";
  node.taken_at_unix_ms = kT0;
  node.netns.push_back(
      test::HealthyHost(Backend::kIptablesNft, false, {"10.244.0.5", "10.244.0.6"}));
  node.netns.push_back(test::HealthyPod("/run/netns/cni-echo", kPodInode, Backend::kIptablesNft,
                                        kDefault, "10.244.0.5"));
  node.netns.push_back(test::HealthyPod("/run/netns/cni-web", kSecondPodInode,
                                        Backend::kIptablesNft, kDefault, "10.244.0.6"));
  for (size_t i = 1; i <= 2; ++i) {
    node.netns[i].netns.pids = {static_cast<int>(4000 + i)};
    AddZtunnelListeners(node.netns[i]);
  }
  NetnsSnapshot ztunnel_netns = test::EmptyNetns("/proc/200/ns/net", kZtunnelNetnsInode);
  ztunnel_netns.netns.pids = {kZtunnelPid};
  node.netns.push_back(ztunnel_netns);

  test::AddZdsConnection(node, kCniPid, kZtunnelPid);
  node.processes.push_back(
      Process(kCniPid, ProcessRole::kIstioCni, {kPodInode, kSecondPodInode}, 4026531840));
  node.processes.push_back(Process(kZtunnelPid, ProcessRole::kZtunnel, {kPodInode, kSecondPodInode},
                                   kZtunnelNetnsInode));

  ZtunnelAdminState admin;
  admin.pid = kZtunnelPid;
  admin.netns_inode = kZtunnelNetnsInode;
  admin.admin_reachable = true;
  admin.ready = true;
  admin.workload_state.push_back({"uid-echo", "Up", "echo", "demo", "echo"});
  admin.workload_state.push_back({"uid-web", "Up", "web", "demo", "web"});
  admin.has_certificates = true;
  admin.certificates.push_back(
      Certificate("spiffe://cluster.local/ns/demo/sa/echo", "Available", kT0 + 20 * kHour));
  admin.certificates.push_back(
      Certificate("spiffe://cluster.local/ns/demo/sa/web", "Available", kT0 + 20 * kHour));
  admin.active_proxy_count = 2;
  node.ztunnels.push_back(admin);

  node.cri.available = true;
  node.cri.endpoint = "unix:///run/containerd/containerd.sock";
  node.cri.pods.push_back(test::CriPod("uid-echo", "echo", kPodInode));
  node.cri.pods.push_back(test::CriPod("uid-web", "web", kSecondPodInode));

  ZtunnelResourceUsage usage;
  usage.pid = kZtunnelPid;
  usage.open_fds = 120;
  usage.fd_soft_limit = 1048576;
  usage.rss_bytes = 40 * kMiB;
  usage.memory_limit_bytes = 1024 * kMiB;
  usage.cgroup = "/kubepods.slice/ztunnel";
  usage.close_wait_counts = {0, 0, 0, 0};
  usage.close_wait_netns = 3;
  node.ztunnel_resources.push_back(usage);
  return node;
}

std::vector<const Finding*> WithCode(const NodeAnalysis& analysis, FindingCode code) {
  std::vector<const Finding*> out;
  for (const Finding& finding : analysis.findings) {
    if (finding.code == code) out.push_back(&finding);
  }
  return out;
}

bool EvidenceHas(const Finding& finding, std::string_view text) {
  return std::any_of(finding.evidence.begin(), finding.evidence.end(),
                     [text](const std::string& line) { return line.find(text) != line.npos; });
}

TEST(ZtunnelHealthChecksTest, HealthyNodeHasNoFinding) {
  const NodeAnalysis analysis = Analyze(HealthyNode());
  EXPECT_TRUE(analysis.findings.empty()) << Dump(analysis);
}

TEST(ZtunnelHealthChecksTest, FdsAtEightyPercentOfTheSoftLimit) {
  NodeSnapshot node = HealthyNode();
  node.ztunnel_resources[0].fd_soft_limit = 256;
  node.ztunnel_resources[0].open_fds = 204;  // 79.7 %
  EXPECT_TRUE(WithCode(Analyze(node), FindingCode::kZtunnelResourcePressure).empty());
  node.ztunnel_resources[0].open_fds = 205;  // 80.1 %
  const NodeAnalysis analysis = Analyze(node);
  const auto findings = WithCode(analysis, FindingCode::kZtunnelResourcePressure);
  ASSERT_EQ(findings.size(), 1u) << Dump(analysis);
  const Finding& f = *findings[0];
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_EQ(f.subject, "ztunnel pid 200");
  EXPECT_EQ(f.netns_inode, kZtunnelNetnsInode);  // ztunnel's own netns
  EXPECT_EQ(f.netns_path, "/proc/200/ns/net");
  EXPECT_NE(f.summary.find("open fds near the limit"), std::string::npos) << f.summary;
  EXPECT_TRUE(EvidenceHas(f, "open fds 205 / soft limit 256 (80 %")) << Dump(analysis);
  EXPECT_TRUE(EvidenceHas(f, "RSS 40 MiB / cgroup limit 1024 MiB (3 %)")) << Dump(analysis);
  EXPECT_EQ(analysis.findings.size(), 1u) << Dump(analysis);
}

TEST(ZtunnelHealthChecksTest, RssAtNinetyPercentOfTheCgroupLimit) {
  NodeSnapshot node = HealthyNode();
  node.ztunnel_resources[0].rss_bytes = 921 * kMiB;  // 89.9 %
  EXPECT_TRUE(WithCode(Analyze(node), FindingCode::kZtunnelResourcePressure).empty());
  node.ztunnel_resources[0].rss_bytes = 922 * kMiB;
  const NodeAnalysis analysis = Analyze(node);
  const auto findings = WithCode(analysis, FindingCode::kZtunnelResourcePressure);
  ASSERT_EQ(findings.size(), 1u) << Dump(analysis);
  EXPECT_NE(findings[0]->summary.find("memory near the cgroup limit"), std::string::npos);
  EXPECT_TRUE(EvidenceHas(*findings[0], "cgroup /kubepods.slice/ztunnel")) << Dump(analysis);
}

TEST(ZtunnelHealthChecksTest, NoLimitOrUnknownLimitIsNeverPressure) {
  NodeSnapshot node = HealthyNode();
  ZtunnelResourceUsage& usage = node.ztunnel_resources[0];
  usage.open_fds = 1'000'000;
  usage.fd_soft_limit = 0;
  usage.fd_limit_unlimited = true;  // "unlimited" in /proc/<pid>/limits
  usage.rss_bytes = 64ull << 30;
  usage.memory_limit_bytes = 0;
  usage.memory_unlimited = true;  // memory.max "max"
  EXPECT_TRUE(Analyze(node).findings.empty()) << Dump(Analyze(node));
  usage.fd_limit_unlimited = false;  // unreadable: unknown, still no finding
  usage.memory_unlimited = false;
  usage.errors.push_back({SourceKind::kProc, "pid 200: limits: no \"Max open files\" row", 0});
  EXPECT_TRUE(Analyze(node).findings.empty()) << Dump(Analyze(node));
}

TEST(ZtunnelHealthChecksTest, VanishedZtunnelPidIsNoFinding) {
  NodeSnapshot node = HealthyNode();
  ZtunnelResourceUsage gone;
  gone.pid = kZtunnelPid;
  gone.errors.push_back({SourceKind::kProc, "pid 200: pid 200 exited", ESRCH});
  node.ztunnel_resources = {gone};
  EXPECT_TRUE(Analyze(node).findings.empty()) << Dump(Analyze(node));
}

TEST(ZtunnelHealthChecksTest, CloseWaitGrowingAcrossScans) {
  NodeSnapshot node = HealthyNode();
  ZtunnelResourceUsage& usage = node.ztunnel_resources[0];
  // Steady, shrinking, too few scans, or growing but still few: no finding.
  for (const std::vector<uint32_t>& counts :
       std::vector<std::vector<uint32_t>>{{40, 40, 40, 40}, {30, 20, 10}, {10, 20}, {1, 2, 3, 4}}) {
    usage.close_wait_counts = counts;
    EXPECT_TRUE(Analyze(node).findings.empty()) << Dump(Analyze(node));
  }
  usage.close_wait_counts = {3, 10, 20, 30};
  const NodeAnalysis analysis = Analyze(node);
  const auto findings = WithCode(analysis, FindingCode::kZtunnelResourcePressure);
  ASSERT_EQ(findings.size(), 1u) << Dump(analysis);
  EXPECT_NE(findings[0]->summary.find("CLOSE_WAIT sockets growing"), std::string::npos);
  EXPECT_TRUE(EvidenceHas(*findings[0], "3 -> 10 -> 20 -> 30 (3 netns counted)")) << Dump(analysis);
  // One dip in the last three scans ends it.
  usage.close_wait_counts = {10, 20, 15, 30};
  EXPECT_TRUE(Analyze(node).findings.empty()) << Dump(Analyze(node));
}

TEST(ZtunnelHealthChecksTest, UnavailableCertificateNamesItsPodAndNetns) {
  NodeSnapshot node = HealthyNode();
  node.ztunnels[0].certificates[0].state = "Unavailable: failed to fetch certificate: timeout";
  node.ztunnels[0].certificates[0].expires_unix_ms = 0;
  node.ztunnels[0].certificates[0].chain_length = 0;
  const NodeAnalysis analysis = Analyze(node);
  const auto findings = WithCode(analysis, FindingCode::kZtunnelCertUnhealthy);
  ASSERT_EQ(findings.size(), 1u) << Dump(analysis);
  const Finding& f = *findings[0];
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_EQ(f.subject, "spiffe://cluster.local/ns/demo/sa/echo");
  EXPECT_EQ(f.netns_inode, kPodInode);
  EXPECT_EQ(f.pod, "demo/echo");
  EXPECT_TRUE(EvidenceHas(f, "state \"Unavailable: failed to fetch certificate: timeout\""));
  EXPECT_TRUE(EvidenceHas(f, "pods on this node with identity ns/demo/sa/echo: demo/echo"));
  EXPECT_TRUE(EvidenceHas(f, "caches up to 60 s"));
  EXPECT_EQ(analysis.findings.size(), 1u) << Dump(analysis);
}

TEST(ZtunnelHealthChecksTest, ExpiringWithinTheThreshold) {
  NodeSnapshot node = HealthyNode();
  node.ztunnels[0].certificates[1].expires_unix_ms = kT0 + 59 * 60 * 1000;
  NodeAnalysis analysis = Analyze(node);
  auto findings = WithCode(analysis, FindingCode::kZtunnelCertUnhealthy);
  ASSERT_EQ(findings.size(), 1u) << Dump(analysis);
  EXPECT_EQ(findings[0]->netns_inode, kSecondPodInode);
  EXPECT_NE(findings[0]->summary.find("expires within 1 h 0 min"), std::string::npos)
      << findings[0]->summary;
  EXPECT_TRUE(EvidenceHas(*findings[0], "first expiry 2026-08-22T10:59:00Z (in 59 min 0 s)"))
      << Dump(analysis);

  AnalysisOptions options;
  options.cert_expiry_warning_ms = 30 * 60 * 1000;  // --cert-expiry-warning 30m
  EXPECT_TRUE(WithCode(Analyze(node, options), FindingCode::kZtunnelCertUnhealthy).empty());

  node.ztunnels[0].certificates[1].expires_unix_ms = kT0 - 5000;
  analysis = Analyze(node, options);
  findings = WithCode(analysis, FindingCode::kZtunnelCertUnhealthy);
  ASSERT_EQ(findings.size(), 1u) << Dump(analysis);
  EXPECT_NE(findings[0]->summary.find("has expired"), std::string::npos);
  EXPECT_TRUE(EvidenceHas(*findings[0], "(expired 5 s ago)")) << Dump(analysis);
}

TEST(ZtunnelHealthChecksTest, SharedIdentityIsOneNodeFindingListingEveryPod) {
  NodeSnapshot node = HealthyNode();
  node.ztunnels[0].workload_state[1].service_account = "echo";  // web now runs as sa echo
  node.ztunnels[0].certificates[0].state = "Unavailable: no CA";
  const NodeAnalysis analysis = Analyze(node);
  const auto findings = WithCode(analysis, FindingCode::kZtunnelCertUnhealthy);
  ASSERT_EQ(findings.size(), 1u) << Dump(analysis);
  EXPECT_EQ(findings[0]->netns_inode, node.Host()->netns.inode);
  EXPECT_TRUE(findings[0]->pod.empty());
  EXPECT_TRUE(EvidenceHas(*findings[0], ": demo/echo, demo/web")) << Dump(analysis);
}

TEST(ZtunnelHealthChecksTest, IdentitiesOfNoPodOnTheNodeAndOtherStatesAreIgnored) {
  NodeSnapshot node = HealthyNode();
  // ztunnel's own identity, a non-SPIFFE identity, and a certificate still being fetched.
  node.ztunnels[0].certificates.push_back(
      Certificate("spiffe://cluster.local/ns/istio-system/sa/ztunnel", "Unavailable: x", 0));
  node.ztunnels[0].certificates.push_back(Certificate("garbage", "Unavailable: x", 0));
  node.ztunnels[0].certificates[0].state = "Initializing";
  EXPECT_TRUE(Analyze(node).findings.empty()) << Dump(Analyze(node));
}

TEST(ZtunnelHealthChecksTest, WithoutZdsSourcesNothingIsJudged) {
  NodeSnapshot node = HealthyNode();
  node.zds_collected = false;
  node.ztunnel_resources[0].open_fds = node.ztunnel_resources[0].fd_soft_limit;
  node.ztunnels[0].certificates[0].state = "Unavailable: x";
  EXPECT_TRUE(WithCode(Analyze(node), FindingCode::kZtunnelResourcePressure).empty());
  EXPECT_TRUE(WithCode(Analyze(node), FindingCode::kZtunnelCertUnhealthy).empty());
}

}  // namespace
}  // namespace ad
