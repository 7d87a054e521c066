// ZDS hand-off checks on hand-built snapshots: every code, its negative cases, and ages across
// successive snapshots with one History.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/history.h"
#include "analysis_fixtures.h"

namespace ad {
namespace {

using test::Codes;
using test::Dump;

constexpr int kCniPid = 100;
constexpr int kZtunnelPid = 200;
constexpr int kSecondZtunnelPid = 201;
constexpr uint64_t kPodInode = 4026532001;
constexpr uint64_t kZtunnelNetnsInode = 4026532500;
constexpr int64_t kT0 = 1787392800000;  // 2026-08-22T10:00:00Z
const AmbientVariant kDefault{true, false, {}, false};

ListeningSocket Listener(uint16_t port, int owner, Family family = Family::kIpv6) {
  ListeningSocket socket;
  socket.family = family;
  socket.address = family == Family::kIpv6 ? "::" : "0.0.0.0";
  socket.port = port;
  socket.mark = 0x539;
  socket.mark_known = true;
  socket.inode = 90000 + port;
  if (owner != 0) socket.owner_pids = {owner};
  return socket;
}

void AddZtunnelListeners(NetnsSnapshot& netns, int owner = kZtunnelPid) {
  for (uint16_t port : {15001, 15006, 15008}) netns.listeners.push_back(Listener(port, owner));
}

ProcessNetnsFds Process(int pid, ProcessRole role, std::vector<uint64_t> netns_fds,
                        uint64_t own_netns = 4026531840) {
  return test::ProcessWithNetnsFds(pid, role, std::move(netns_fds), own_netns, kT0 - 3600000);
}

ZtunnelWorkload HboneWorkload(std::string ip, std::string node = "node-a") {
  ZtunnelWorkload workload;
  workload.uid = "Kubernetes//Pod/demo/echo";
  workload.name = "echo";
  workload.namespace_name = "demo";
  workload.node = std::move(node);
  workload.protocol = "HBONE";
  workload.network_mode = "Standard";
  workload.ips = {std::move(ip)};
  return workload;
}

// A healthy served node: istio-cni and ztunnel both hold the pod netns, ztunnel's listeners are
// in it, ztunnel reports it Up, CRI knows the pod, one ZDS connection from ztunnel.
NodeSnapshot ServedNode() {
  NodeSnapshot node;
  node.node_name = "node-a";
  node.taken_at_unix_ms = kT0;
  node.netns.push_back(test::HealthyHost(Backend::kIptablesNft, false, {"10.244.0.5"}));
  node.netns.push_back(test::HealthyPod("/run/netns/cni-echo", kPodInode, Backend::kIptablesNft,
                                        kDefault, "10.244.0.5"));
  node.netns[1].netns.pids = {4242};
  AddZtunnelListeners(node.netns[1]);
  NetnsSnapshot ztunnel_netns = test::EmptyNetns("/proc/300/ns/net", kZtunnelNetnsInode);
  ztunnel_netns.netns.pids = {kZtunnelPid};
  node.netns.push_back(ztunnel_netns);

  test::AddZdsConnection(node, kCniPid, kZtunnelPid);

  node.processes.push_back(Process(kCniPid, ProcessRole::kIstioCni, {kPodInode}));
  node.processes.push_back(
      Process(kZtunnelPid, ProcessRole::kZtunnel, {kPodInode}, kZtunnelNetnsInode));

  ZtunnelAdminState admin;
  admin.pid = kZtunnelPid;
  admin.netns_inode = kZtunnelNetnsInode;
  admin.admin_reachable = true;
  admin.ready = true;
  admin.workload_state.push_back({"uid-echo", "Up", "echo", "demo", "echo"});
  admin.workloads.push_back(HboneWorkload("10.244.0.5"));
  admin.active_proxy_count = 1;
  node.ztunnels.push_back(admin);

  node.cri.available = true;
  node.cri.endpoint = "unix:///run/containerd/containerd.sock";
  node.cri.pods.push_back(test::CriPod("uid-echo", "echo", kPodInode, {"10.244.0.5"}));
  return node;
}

NetnsSnapshot& Pod(NodeSnapshot& node) { return node.netns[1]; }
ProcessNetnsFds& Ztunnel(NodeSnapshot& node) { return node.processes[1]; }

std::vector<std::string> ZdsCodes(const NodeAnalysis& analysis) {
  std::vector<std::string> codes;
  for (const std::string& code : Codes(analysis)) {
    if (code != "NETNS_UNREADABLE") codes.push_back(code);
  }
  std::sort(codes.begin(), codes.end());
  return codes;
}

const Finding* FindCode(const NodeAnalysis& analysis, std::string_view code) {
  for (const Finding& finding : analysis.findings) {
    if (finding.code_name() == code) return &finding;
  }
  return nullptr;
}

bool EvidenceMentions(const Finding& finding, std::string_view text) {
  return std::any_of(finding.evidence.begin(), finding.evidence.end(),
                     [text](const std::string& line) { return line.find(text) != line.npos; });
}

using Strings = std::vector<std::string>;

TEST(ZdsChecks, HealthyServedPodHasNoFindingsAndIsHandedOff) {
  const NodeAnalysis analysis = Analyze(ServedNode());
  EXPECT_TRUE(analysis.findings.empty()) << Dump(analysis);
  ASSERT_EQ(analysis.netns.size(), 3u);
  EXPECT_EQ(analysis.netns[1].pod, "demo/echo");
  EXPECT_EQ(analysis.netns[1].pod_uid, "uid-echo");
  EXPECT_EQ(analysis.netns[1].zds_state, ZdsState::kHandedOff);
  EXPECT_EQ(analysis.netns[1].ztunnel_listeners, (std::vector<uint16_t>{15001, 15006, 15008}));
  EXPECT_EQ(analysis.netns[1].ztunnel_pids, (std::vector<int>{kZtunnelPid}));
  EXPECT_EQ(analysis.netns[0].zds_state, ZdsState::kNotApplicable);
}

TEST(ZdsChecks, ListenersIdentifiedByMarkWhenOwnersUnknown) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  AddZtunnelListeners(Pod(node), /*owner=*/0);
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_TRUE(analysis.findings.empty()) << Dump(analysis);
  EXPECT_EQ(analysis.netns[1].ztunnel_listeners.size(), 3u);
}

TEST(ZdsChecks, NothingWithoutZdsData) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  Ztunnel(node).netns_fd_inodes.clear();
  node.zds.accepted.clear();
  node.zds_collected = false;
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_TRUE(analysis.findings.empty()) << Dump(analysis);
  EXPECT_EQ(analysis.netns[1].zds_state, ZdsState::kNotApplicable);
  EXPECT_TRUE(analysis.netns[1].ztunnel_listeners.empty());
}

TEST(ZdsChecks, RuleOnlySnapshotsAreUnchanged) {
  NodeSnapshot node;
  node.netns.push_back(test::HealthyHost(Backend::kNft, false, {"10.244.0.5"}));
  node.netns.push_back(
      test::HealthyPod("/run/netns/pod-a", kPodInode, Backend::kNft, kDefault, "10.244.0.5"));
  History history;
  EXPECT_TRUE(Analyze(node, {}, &history).findings.empty());
  EXPECT_EQ(history.size(), 0u);
}

TEST(ZdsChecks, ListenersMissingIsBlackHole) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  Ztunnel(node).netns_fd_inodes.clear();
  node.processes[0].netns_fd_inodes.clear();  // istio-cni forgot it too: no hand-off in flight
  node.ztunnels[0].workload_state.clear();
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZTUNNEL_LISTENERS_MISSING"}) << Dump(analysis);
  const Finding& finding = analysis.findings[0];
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.pod, "demo/echo");
  EXPECT_EQ(finding.netns_inode, kPodInode);
  EXPECT_NE(finding.summary.find("without any ztunnel listener"), std::string::npos);
  EXPECT_TRUE(EvidenceMentions(finding, "missing: 15001/15006/15008")) << Dump(analysis);
}

TEST(ZdsChecks, PartialListenersNameTheMissingPort) {
  NodeSnapshot node = ServedNode();
  auto& listeners = Pod(node).listeners;
  listeners.erase(std::remove_if(listeners.begin(), listeners.end(),
                                 [](const ListeningSocket& l) { return l.port == 15006; }),
                  listeners.end());
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZTUNNEL_LISTENERS_MISSING"}) << Dump(analysis);
  EXPECT_NE(analysis.findings[0].summary.find("15006 missing"), std::string::npos);
}

TEST(ZdsChecks, ForeignListenerOnZtunnelPortDoesNotCount) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  for (uint16_t port : {15001, 15006, 15008}) {
    ListeningSocket envoy = Listener(port, 777);
    envoy.mark_known = false;
    Pod(node).listeners.push_back(envoy);
  }
  Ztunnel(node).netns_fd_inodes.clear();
  node.processes[0].netns_fd_inodes.clear();
  node.ztunnels[0].workload_state.clear();
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZTUNNEL_LISTENERS_MISSING"}) << Dump(analysis);
  EXPECT_TRUE(EvidenceMentions(analysis.findings[0], "non-ztunnel socket"));
}

TEST(ZdsChecks, NoListenerVerdictWhenSocketsCouldNotBeRead) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  Ztunnel(node).netns_fd_inodes.clear();
  node.processes[0].netns_fd_inodes.clear();
  node.ztunnels[0].workload_state.clear();
  Pod(node).errors.push_back({SourceKind::kSockDiag, "inet_diag dump: EPERM", 1});
  Pod(node).reads.listeners = ReadStatus::kFailed;
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{}) << Dump(analysis);
  EXPECT_EQ(Codes(analysis), Strings{"NETNS_UNREADABLE"});
}

TEST(ZdsChecks, RedirectMissingWhenZtunnelServesAPodWithoutRules) {
  NodeSnapshot node = ServedNode();
  Pod(node).netfilter = {};
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"REDIRECT_MISSING"}) << Dump(analysis);
  const Finding& finding = analysis.findings[0];
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.pod, "demo/echo");
  EXPECT_TRUE(EvidenceMentions(finding, "ztunnel listeners on 15001/15006/15008"));
  EXPECT_TRUE(EvidenceMentions(finding, "holds the netns fd"));
  EXPECT_TRUE(EvidenceMentions(finding, "HBONE workload demo/echo for pod IP 10.244.0.5"));
}

TEST(ZdsChecks, RedirectMissingFromHboneWorkloadAloneWithoutCri) {
  NodeSnapshot node = ServedNode();
  Pod(node).netfilter = {};
  Pod(node).listeners.clear();
  Ztunnel(node).netns_fd_inodes.clear();
  node.processes[0].netns_fd_inodes.clear();
  node.cri = {};
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"REDIRECT_MISSING"}) << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].pod, "demo/echo") << "pod named from the XDS workload";
}

TEST(ZdsChecks, NoRedirectMissingForOtherNodesSidecarsOrZtunnelItself) {
  NodeSnapshot node = ServedNode();
  Pod(node).netfilter = {};
  Pod(node).listeners.clear();
  Ztunnel(node).netns_fd_inodes.clear();
  node.processes[0].netns_fd_inodes.clear();
  node.ztunnels[0].workload_state.clear();
  node.ztunnels[0].workloads = {HboneWorkload("10.244.0.5", "node-b")};
  EXPECT_EQ(ZdsCodes(Analyze(node)), Strings{}) << "workload of another node";

  node.ztunnels[0].workloads = {HboneWorkload("10.244.0.5")};
  node.ztunnels[0].workloads[0].protocol = "TCP";
  EXPECT_EQ(ZdsCodes(Analyze(node)), Strings{}) << "not captured";

  // ztunnel's own netns with its self-proxy 15008 listener.
  NodeSnapshot self = ServedNode();
  self.netns[2].listeners.push_back(Listener(15008, kZtunnelPid));
  EXPECT_EQ(ZdsCodes(Analyze(self)), Strings{}) << Dump(Analyze(self));
}

// Without history (a one-shot report) a pending hand-off of a pod that is black-holed now is not
// info: its age is unknown, so it is raised to warning and says so.
TEST(ZdsChecks, OneShotPendingBlackHoleIsAWarningWithUnknownAge) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  Ztunnel(node).netns_fd_inodes.clear();
  node.ztunnels[0].workload_state.clear();
  AnalysisOptions one_shot;
  one_shot.history_known = false;
  const NodeAnalysis analysis = Analyze(node, one_shot);
  ASSERT_EQ(ZdsCodes(analysis), Strings{"ZDS_PENDING"}) << Dump(analysis);
  const Finding& finding = analysis.findings[0];
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_TRUE(std::any_of(finding.evidence.begin(), finding.evidence.end(), [](const auto& line) {
    return line.starts_with("age unknown: no daemon history");
  })) << Dump(analysis);

  // Listeners present (the hand-off is pending but traffic flows): still info.
  NodeSnapshot flowing = ServedNode();
  Ztunnel(flowing).netns_fd_inodes.clear();
  flowing.ztunnels[0].workload_state.clear();
  const NodeAnalysis flowing_analysis = Analyze(flowing, one_shot);
  for (const Finding& f : flowing_analysis.findings) {
    EXPECT_EQ(f.severity, Severity::kInfo) << Dump(flowing_analysis);
  }
}

TEST(ZdsChecks, YoungHandOffIsPendingNotBlackHole) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  Ztunnel(node).netns_fd_inodes.clear();
  node.ztunnels[0].workload_state.clear();
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZDS_PENDING"}) << Dump(analysis);
  const Finding& finding = analysis.findings[0];
  EXPECT_EQ(finding.severity, Severity::kInfo);
  EXPECT_EQ(finding.pod, "demo/echo");
  EXPECT_EQ(finding.since_unix_ms, kT0);
  EXPECT_TRUE(EvidenceMentions(finding, "istio-cni pid 100 holds the netns fd"));
  EXPECT_EQ(analysis.netns[1].zds_state, ZdsState::kPending);
}

TEST(ZdsChecks, PendingBecomesStallExactlyAtTheThreshold) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  Ztunnel(node).netns_fd_inodes.clear();
  node.ztunnels[0].workload_state.clear();
  History history;
  for (int64_t offset : {0, 5000, 29999}) {
    node.taken_at_unix_ms = kT0 + offset;
    const NodeAnalysis analysis = Analyze(node, {}, &history);
    EXPECT_EQ(ZdsCodes(analysis), Strings{"ZDS_PENDING"}) << offset << "\n" << Dump(analysis);
  }
  node.taken_at_unix_ms = kT0 + 30000;
  NodeAnalysis analysis = Analyze(node, {}, &history);
  EXPECT_EQ(ZdsCodes(analysis), (Strings{"ZDS_STALL", "ZTUNNEL_LISTENERS_MISSING"}))
      << Dump(analysis);
  const Finding* stall = FindCode(analysis, "ZDS_STALL");
  ASSERT_NE(stall, nullptr);
  EXPECT_EQ(stall->since_unix_ms, kT0);
  EXPECT_TRUE(EvidenceMentions(*stall, "since 2026-08-22T10:00:00Z (30 s)")) << Dump(analysis);
  EXPECT_EQ(analysis.netns[1].zds_state, ZdsState::kStalled);

  // Resolved: the key is forgotten, a recurrence starts young again.
  NodeSnapshot healthy = ServedNode();
  healthy.taken_at_unix_ms = kT0 + 35000;
  EXPECT_TRUE(Analyze(healthy, {}, &history).findings.empty());
  EXPECT_EQ(history.size(), 0u);
  node.taken_at_unix_ms = kT0 + 40000;
  EXPECT_EQ(ZdsCodes(Analyze(node, {}, &history)), Strings{"ZDS_PENDING"});
}

TEST(ZdsChecks, ThresholdIsAnOption) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  Ztunnel(node).netns_fd_inodes.clear();
  node.ztunnels[0].workload_state.clear();
  AnalysisOptions options;
  options.zds_stall_threshold_ms = 5000;
  History history;
  Analyze(node, options, &history);
  node.taken_at_unix_ms = kT0 + 5000;
  EXPECT_NE(FindCode(Analyze(node, options, &history), "ZDS_STALL"), nullptr);
}

TEST(ZdsChecks, WorkloadStatePendingAges) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  node.ztunnels[0].workload_state[0].state = "Pending";
  History history;
  NodeAnalysis analysis = Analyze(node, {}, &history);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZDS_PENDING"}) << Dump(analysis);
  EXPECT_TRUE(EvidenceMentions(analysis.findings[0], "workloadState Pending for pod uid uid-echo"));
  node.taken_at_unix_ms = kT0 + 60000;
  analysis = Analyze(node, {}, &history);
  EXPECT_EQ(ZdsCodes(analysis), (Strings{"ZDS_STALL", "ZTUNNEL_LISTENERS_MISSING"}))
      << Dump(analysis);
}

TEST(ZdsChecks, PendingWorkloadStateWithoutNetnsIsReportedByPod) {
  NodeSnapshot node = ServedNode();
  node.cri.pods[0].netns_inode = 0;  // runtime gave no resolvable netns
  node.ztunnels[0].workload_state[0].state = "Pending";
  const NodeAnalysis analysis = Analyze(node);
  const Finding* pending = FindCode(analysis, "ZDS_PENDING");
  ASSERT_NE(pending, nullptr) << Dump(analysis);
  EXPECT_EQ(pending->pod, "demo/echo");
}

TEST(ZdsChecks, UnreadZdsDataAndNotReadyZtunnelStallTheNode) {
  NodeSnapshot node = ServedNode();
  node.zds.accepted[0].receive_queue = 2;  // the hello nobody read
  node.ztunnels[0].ready = false;
  node.ztunnels[0].pending_tasks = {"workload proxy manager"};
  History history;
  NodeAnalysis analysis = Analyze(node, {}, &history);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZDS_PENDING"}) << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].netns_inode, node.netns[0].netns.inode);

  node.taken_at_unix_ms = kT0 + 31000;
  analysis = Analyze(node, {}, &history);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZDS_STALL"}) << Dump(analysis);
  const Finding& stall = analysis.findings[0];
  EXPECT_EQ(stall.severity, Severity::kCritical);
  EXPECT_TRUE(EvidenceMentions(stall, "socket inode 5001")) << Dump(analysis);
  EXPECT_TRUE(EvidenceMentions(stall, "not ready, pending: workload proxy manager"));
  EXPECT_TRUE(EvidenceMentions(stall, "since 2026-08-22T10:00:00Z (31 s)"));
  EXPECT_EQ(stall.since_unix_ms, kT0);
}

TEST(ZdsChecks, NotReadyForOtherReasonsIsNoZdsSignal) {
  NodeSnapshot node = ServedNode();
  node.ztunnels[0].ready = false;
  node.ztunnels[0].pending_tasks = {"state manager"};
  EXPECT_EQ(ZdsCodes(Analyze(node)), Strings{});
}

TEST(ZdsChecks, DisconnectedWhenNoZtunnelIsConnected) {
  NodeSnapshot node = ServedNode();
  node.zds.accepted.clear();
  node.zds.clients.clear();
  NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZDS_DISCONNECTED"}) << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].severity, Severity::kCritical);
  EXPECT_TRUE(EvidenceMentions(analysis.findings[0], "0 accepted connections"));
}

TEST(ZdsChecks, DisconnectedWhenNoListenerWhileZtunnelRuns) {
  NodeSnapshot node = ServedNode();
  node.zds.listener_found = false;
  node.zds.accepted.clear();
  node.zds.clients.clear();
  NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZDS_DISCONNECTED"}) << Dump(analysis);
  EXPECT_NE(analysis.findings[0].summary.find("no ZDS listener"), std::string::npos);

  node.zds.errors.push_back({SourceKind::kZds, "sock_diag unix dump: EPERM", 1});
  EXPECT_EQ(ZdsCodes(Analyze(node)), Strings{}) << "unknown is not absent";

  node.zds.errors.clear();
  node.processes.pop_back();
  node.ztunnels.clear();  // istio-cni only remains
  EXPECT_EQ(ZdsCodes(Analyze(node)), Strings{}) << "no ztunnel, no listener: not ambient";
}

TEST(ZdsChecks, ForeignZdsClientIsDisconnectedOnlyWhenOwnersAreKnown) {
  NodeSnapshot node = ServedNode();
  node.zds.clients[0].owner_pids = {31337};
  NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZDS_DISCONNECTED"}) << Dump(analysis);
  EXPECT_TRUE(EvidenceMentions(analysis.findings[0], "pid 31337"));

  node.zds.clients[0].owner_pids.clear();
  EXPECT_EQ(ZdsCodes(Analyze(node)), Strings{});
}

TEST(ZdsChecks, StaleNetnsAndWorkloadState) {
  NodeSnapshot node = ServedNode();
  Ztunnel(node).netns_fd_inodes.push_back(4026539999);  // netns of a deleted pod
  node.ztunnels[0].workload_state.push_back({"uid-gone", "Up", "old", "demo", "default"});
  NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), (Strings{"ZTUNNEL_STALE_WORKLOAD", "ZTUNNEL_STALE_WORKLOAD"}))
      << Dump(analysis);
  bool saw_netns = false;
  bool saw_state = false;
  for (const Finding& finding : analysis.findings) {
    EXPECT_EQ(finding.severity, Severity::kWarning);
    saw_netns = saw_netns || finding.netns_inode == 4026539999;
    saw_state = saw_state || finding.pod == "demo/old";
  }
  EXPECT_TRUE(saw_netns && saw_state) << Dump(analysis);

  node.cri.available = false;
  analysis = Analyze(node);
  ASSERT_EQ(ZdsCodes(analysis), Strings{"ZTUNNEL_STALE_WORKLOAD"})
      << "a uid's existence needs CRI; an unreachable netns does not";
  EXPECT_EQ(analysis.findings[0].netns_inode, 4026539999u);
}

TEST(ZdsChecks, LiveNetnsWithoutCriMatchIsNotStale) {
  NodeSnapshot node = ServedNode();
  node.cri.pods[0].netns_inode = 0;
  EXPECT_EQ(ZdsCodes(Analyze(node)), Strings{}) << Dump(Analyze(node));
}

TEST(ZdsChecks, TwoZtunnelsServingOneNetns) {
  NodeSnapshot node = ServedNode();
  node.processes.push_back(Process(kSecondZtunnelPid, ProcessRole::kZtunnel, {kPodInode}));
  AddZtunnelListeners(Pod(node), kSecondZtunnelPid);
  NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"MULTIPLE_ZTUNNELS"}) << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].severity, Severity::kInfo);
  EXPECT_EQ(analysis.netns[1].ztunnel_pids, (std::vector<int>{kZtunnelPid, kSecondZtunnelPid}));
}

TEST(ZdsChecks, StaleNetnsWithoutCri) {
  NodeSnapshot node = ServedNode();
  node.cri = {};
  Ztunnel(node).netns_fd_inodes.push_back(4026539999);
  NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZTUNNEL_STALE_WORKLOAD"}) << "proc scanned";

  for (NetnsSnapshot& netns : node.netns) netns.netns.pids.clear();  // bind mounts only
  node.processes[0].netns_fd_inodes.push_back(4026539999);           // istio-cni still has it
  EXPECT_EQ(ZdsCodes(Analyze(node)), Strings{}) << Dump(Analyze(node));
  node.processes[0].netns_fd_inodes.pop_back();  // istio-cni dropped it: the pod was deleted
  EXPECT_EQ(ZdsCodes(Analyze(node)), Strings{"ZTUNNEL_STALE_WORKLOAD"});
}

TEST(ZdsChecks, WorkloadStateJoinedByHboneWorkloadWithoutCri) {
  NodeSnapshot node = ServedNode();
  node.cri = {};
  Pod(node).listeners.clear();
  node.ztunnels[0].workload_state[0].state = "Pending";
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{"ZDS_PENDING"}) << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].netns_inode, kPodInode);
  EXPECT_EQ(analysis.netns[1].pod_uid, "uid-echo");
  EXPECT_EQ(analysis.netns[1].pod, "demo/echo");
}

TEST(ZdsChecks, LeftOverConnectionWithoutAnyZtunnelIsDisconnected) {
  NodeSnapshot node = ServedNode();
  node.processes.pop_back();  // ztunnel exited; istio-cni has not closed its side yet
  node.ztunnels.clear();
  node.zds.clients[0].owner_pids.clear();
  NodeAnalysis analysis = Analyze(node);
  const Finding* disconnected = FindCode(analysis, "ZDS_DISCONNECTED");
  ASSERT_NE(disconnected, nullptr) << Dump(analysis);
  EXPECT_TRUE(EvidenceMentions(*disconnected, "no ztunnel process runs"));
}

TEST(ZdsChecks, UnattributableListenersAreNotCalledMissing) {
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  for (uint16_t port : {15001, 15006, 15008}) {
    ListeningSocket socket = Listener(port, 0);
    socket.mark_known = false;  // no CAP_NET_ADMIN, no /proc owner
    Pod(node).listeners.push_back(socket);
  }
  Ztunnel(node).netns_fd_inodes.clear();
  node.processes[0].netns_fd_inodes.clear();
  node.ztunnels[0].workload_state.clear();
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(ZdsCodes(analysis), Strings{}) << Dump(analysis);
  EXPECT_TRUE(analysis.netns[1].ztunnel_listeners.empty()) << "not claimed as ztunnel's either";
}

}  // namespace
}  // namespace ad
