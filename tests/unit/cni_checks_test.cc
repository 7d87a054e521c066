// CNI_CHAIN_BROKEN and NFT_BACKEND_UNUSABLE on hand-built snapshots (no root, analysis only).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis_fixtures.h"

namespace ad {
namespace {

using test::Codes;
using test::Dump;

constexpr int64_t kT0 = 1787392800000;  // 2026-08-22T10:00:00Z
const AmbientVariant kDefault{true, false, {}, false};
constexpr uint64_t kPodInode = 4026532001;
constexpr uint64_t kPlainInode = 4026532002;

CniConfigState GoodChain() {
  CniConfigState cni;
  cni.collected = true;
  cni.dir = "/host/etc/cni/net.d";
  cni.host_root = "/host";
  cni.dir_readable = true;
  cni.files = {{"10-calico.conflist", ""}};
  cni.active_file = "10-calico.conflist";
  cni.active_mtime_unix_ms = kT0 - 3600000;
  cni.network_name = "k8s-pod-network";
  cni.plugin_types = {"calico", "portmap", "istio-cni"};
  cni.istio_cni_chained = true;
  cni.kubeconfig_path = "/etc/cni/net.d/ZZZ-istio-cni-kubeconfig";
  return cni;
}

CniConfigState BrokenChain() {
  CniConfigState cni = GoodChain();
  cni.plugin_types = {"calico", "portmap"};
  cni.istio_cni_chained = false;
  cni.kubeconfig_path.clear();
  return cni;
}

// Host + one ambient pod + one pod without rules (created at `plain_created`).
NodeSnapshot Node(CniConfigState cni, int64_t plain_created = 0) {
  NodeSnapshot node;
  node.taken_at_unix_ms = kT0;
  node.netns.push_back(test::HealthyHost(Backend::kIptablesNft, false, {"10.0.0.5"}));
  node.netns.push_back(
      test::HealthyPod("/run/netns/cni-a", kPodInode, Backend::kIptablesNft, kDefault, "10.0.0.5"));
  node.netns.push_back(test::EmptyNetns("/run/netns/cni-b", kPlainInode));
  node.cri.available = true;
  PodIdentity ambient;
  ambient.uid = "uid-a";
  ambient.name = "a";
  ambient.namespace_name = "demo";
  ambient.netns_inode = kPodInode;
  ambient.created_at_unix_ms = kT0 - 7200000;
  node.cri.pods.push_back(ambient);
  PodIdentity plain;
  plain.uid = "uid-b";
  plain.name = "b";
  plain.namespace_name = "demo";
  plain.netns_inode = kPlainInode;
  plain.created_at_unix_ms = plain_created;
  node.cri.pods.push_back(plain);
  node.cni = std::move(cni);
  return node;
}

// Copies: the analysis is often a temporary.
std::vector<Finding> Cni(const NodeAnalysis& analysis) {
  std::vector<Finding> found;
  for (const Finding& f : analysis.findings) {
    if (f.code == FindingCode::kCniChainBroken) found.push_back(f);
  }
  return found;
}

bool Mentions(const Finding& finding, std::string_view text) {
  return std::any_of(finding.evidence.begin(), finding.evidence.end(),
                     [text](const std::string& e) { return e.find(text) != std::string::npos; });
}

TEST(CniChecks, GoodChainIsSilent) {
  const NodeAnalysis analysis = Analyze(Node(GoodChain()));
  EXPECT_TRUE(Cni(analysis).empty()) << Dump(analysis);
}

TEST(CniChecks, NotCollectedIsSilent) {
  CniConfigState off;
  const NodeAnalysis analysis = Analyze(Node(off));
  EXPECT_TRUE(Cni(analysis).empty()) << Dump(analysis);
}

TEST(CniChecks, ChainWithoutIstioCniIsCriticalOnTheHost) {
  AnalysisOptions one_shot;
  one_shot.history_known = false;
  const NodeAnalysis analysis = Analyze(Node(BrokenChain()), one_shot);
  const auto found = Cni(analysis);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  const Finding& f = found.front();
  EXPECT_EQ(f.severity, Severity::kCritical);
  EXPECT_EQ(f.subject, "chain");
  EXPECT_EQ(f.netns_inode, 4026531840u);  // node scope: the host netns
  EXPECT_TRUE(Mentions(f, "/host/etc/cni/net.d/10-calico.conflist")) << Dump(analysis);
  EXPECT_TRUE(Mentions(f, "calico -> portmap")) << Dump(analysis);
  EXPECT_TRUE(Mentions(f, "one-shot report: judges the current state only")) << Dump(analysis);
}

TEST(CniChecks, NoAmbientPodsNoFinding) {
  NodeSnapshot node = Node(BrokenChain());
  node.netns.erase(node.netns.begin() + 1);  // only the host and a plain pod
  node.netns.front() = test::EmptyNetns("/proc/1/ns/net", 4026531840, true);
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_TRUE(Cni(analysis).empty()) << Dump(analysis);
}

TEST(CniChecks, MissingDirectoryIsNoConfigAtAll) {
  CniConfigState cni;
  cni.collected = true;
  cni.dir = "/etc/cni/net.d";
  const NodeAnalysis analysis = Analyze(Node(cni));
  const auto found = Cni(analysis);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_EQ(found.front().subject, "chain");
  EXPECT_TRUE(Mentions(found.front(), "does not exist")) << Dump(analysis);
}

TEST(CniChecks, NoLoadableFileNamesTheSkippedOnes) {
  CniConfigState cni;
  cni.collected = true;
  cni.dir = "/etc/cni/net.d";
  cni.dir_readable = true;
  cni.files = {{"05-broken.conflist", "malformed JSON (offset 3: expected ':')"},
               {"10-link.conf", "dangling symlink to /nowhere"}};
  const NodeAnalysis analysis = Analyze(Node(cni));
  const auto found = Cni(analysis);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_TRUE(Mentions(found.front(), "no .conflist, .conf or .json file loads"));
  EXPECT_TRUE(Mentions(found.front(), "05-broken.conflist: malformed JSON"));
  EXPECT_TRUE(Mentions(found.front(), "containerd refuses the whole directory"));
}

TEST(CniChecks, UnreadableDirectoryIsAWarningNotABreak) {
  CniConfigState cni;
  cni.collected = true;
  cni.dir = "/etc/cni/net.d";
  cni.errors.push_back({SourceKind::kCniConfig, "opendir /etc/cni/net.d: Permission denied", 13});
  const NodeAnalysis analysis = Analyze(Node(cni));
  const auto found = Cni(analysis);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_EQ(found.front().subject, "unreadable");
  EXPECT_EQ(found.front().severity, Severity::kWarning);
}

TEST(CniChecks, KubeconfigMissing) {
  CniConfigState cni = GoodChain();
  cni.kubeconfig_error = "/host/etc/cni/net.d/ZZZ-istio-cni-kubeconfig: No such file or directory";
  const NodeAnalysis analysis = Analyze(Node(cni));
  const auto found = Cni(analysis);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_EQ(found.front().subject, "kubeconfig");
  EXPECT_EQ(found.front().severity, Severity::kCritical);
  EXPECT_TRUE(Mentions(found.front(), "No such file or directory"));
}

TEST(CniChecks, DaemonNamesPodsStartedInTheGap) {
  CniConfigState cni = BrokenChain();
  cni.gaps.push_back({kT0 - 60000, 0, "10-calico.conflist"});
  const NodeAnalysis analysis = Analyze(Node(cni, kT0 - 30000));  // b started in the gap
  const auto found = Cni(analysis);
  ASSERT_EQ(found.size(), 2u) << Dump(analysis);
  const Finding* chain = found[0].subject == "chain" ? &found[0] : &found[1];
  const Finding* pod = found[0].subject == "chain" ? &found[1] : &found[0];
  EXPECT_TRUE(Mentions(*chain, "since 2026-08-22T09:59:00Z")) << Dump(analysis);
  EXPECT_TRUE(Mentions(*chain, "pods started since (never handed to istio-cni): demo/b"));
  EXPECT_EQ(pod->subject, "uncaptured");
  EXPECT_EQ(pod->netns_inode, kPlainInode);
  EXPECT_EQ(pod->pod, "demo/b");
  EXPECT_EQ(pod->severity, Severity::kWarning);
  EXPECT_TRUE(Mentions(*pod, "CRI created_at"));
}

TEST(CniChecks, RestoredChainKeepsOnlyThePods) {
  CniConfigState cni = GoodChain();
  cni.gaps.push_back({kT0 - 60000, kT0 - 10000, "10-calico.conflist"});
  const NodeAnalysis analysis = Analyze(Node(cni, kT0 - 30000));
  const auto found = Cni(analysis);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_EQ(found.front().subject, "uncaptured");
  EXPECT_TRUE(Mentions(found.front(), "to 2026-08-22T09:59:50Z"));
}

TEST(CniChecks, PodsOutsideTheGapOptedOutOrCapturedAreNotNamed) {
  CniConfigState cni = GoodChain();
  cni.gaps.push_back({kT0 - 60000, kT0 - 10000, "10-calico.conflist"});
  // Started after the chain was restored.
  EXPECT_TRUE(Cni(Analyze(Node(cni, kT0 - 5000))).empty());
  // Started before the gap.
  EXPECT_TRUE(Cni(Analyze(Node(cni, kT0 - 90000))).empty());
  // Opted out with istio.io/dataplane-mode=none.
  NodeSnapshot opted = Node(cni, kT0 - 30000);
  opted.cri.pods[1].dataplane_mode_label = "none";
  EXPECT_TRUE(Cni(Analyze(opted)).empty());
  // Captured later (it has Istio rules now): the ambient pod started in the gap.
  NodeSnapshot captured = Node(cni, 0);
  captured.cri.pods[0].created_at_unix_ms = kT0 - 30000;
  EXPECT_TRUE(Cni(Analyze(captured)).empty());
}

TEST(CniChecks, OneShotNamesNoPods) {
  CniConfigState cni = BrokenChain();
  cni.gaps.push_back({kT0 - 60000, 0, "10-calico.conflist"});
  AnalysisOptions one_shot;
  one_shot.history_known = false;
  const auto found = Cni(Analyze(Node(cni, kT0 - 30000), one_shot));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found.front().subject, "chain");
}

TEST(CniChecks, PauseProcessStartWithoutCri) {
  CniConfigState cni = BrokenChain();
  cni.gaps.push_back({kT0 - 60000, 0, "10-calico.conflist"});
  cni.netns_starts.push_back({kPlainInode, kT0 - 20000, 4242});
  NodeSnapshot node = Node(cni);
  node.cri = CriState{};
  const auto found = Cni(Analyze(node));
  ASSERT_EQ(found.size(), 2u);
  const Finding* pod = found[0].subject == "uncaptured" ? &found[0] : &found[1];
  EXPECT_TRUE(Mentions(*pod, "pause process 4242 started")) << pod->evidence.front();
}

TEST(CniChecks, EvidenceIsStableAcrossScans) {
  CniConfigState cni = BrokenChain();
  cni.gaps.push_back({kT0 - 60000, 0, "10-calico.conflist"});
  NodeSnapshot first = Node(cni, kT0 - 30000);
  NodeSnapshot later = first;
  later.taken_at_unix_ms = kT0 + 50000;
  const auto a = Cni(Analyze(first));
  const auto b = Cni(Analyze(later));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].evidence, b[i].evidence);
}

// No directory known to be the runtime's (no flag, the runtime silent, /etc/cni/net.d absent):
// ambient pods or not, the chain is not judged, never CNI_CHAIN_BROKEN.
TEST(CniChecks, NotJudgedIsSilentEvenWithAmbientPods) {
  CniConfigState cni;
  cni.collected = true;
  cni.dir_origin = CniDirOrigin::kNone;
  cni.not_judged =
      "no container runtime answered over CRI, and /etc/cni/net.d does not exist: the CNI chain "
      "is not judged. Set --cni-conf-dir ...";
  AnalysisOptions one_shot;
  one_shot.history_known = false;
  EXPECT_TRUE(Cni(Analyze(Node(cni), one_shot)).empty());
  cni.gaps.push_back({kT0 - 60000, 0, ""});  // a gap kept from a directory judged before
  const NodeAnalysis analysis = Analyze(Node(cni, kT0 - 30000));
  EXPECT_TRUE(Cni(analysis).empty()) << Dump(analysis);
}

// The directory the runtime reports is its own: missing there means no CNI config at all.
TEST(CniChecks, RuntimeDirectoryMissingIsNoConfigAndSaysWhoReportedIt) {
  CniConfigState cni;
  cni.collected = true;
  cni.dir = "/host/var/lib/rancher/k3s/agent/etc/cni/net.d";
  cni.host_root = "/host";
  cni.dir_origin = CniDirOrigin::kRuntime;
  cni.runtime = "containerd v1.7.22-k3s1";
  cni.runtime_dir = "/var/lib/rancher/k3s/agent/etc/cni/net.d";
  const NodeAnalysis analysis = Analyze(Node(cni));
  const auto found = Cni(analysis);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_EQ(found.front().severity, Severity::kCritical);
  EXPECT_TRUE(Mentions(found.front(), "does not exist")) << Dump(analysis);
  EXPECT_TRUE(Mentions(found.front(), "the directory containerd v1.7.22-k3s1 reports"))
      << Dump(analysis);
}

// A given directory that is not the one the runtime reports: the evidence says so.
TEST(CniChecks, GivenDirectoryOtherThanTheRuntimesIsNamed) {
  CniConfigState cni = BrokenChain();
  cni.dir_origin = CniDirOrigin::kFlag;
  cni.runtime = "containerd 1.6.20";
  cni.runtime_dir = "/var/lib/rancher/k3s/agent/etc/cni/net.d";
  auto analysis = Analyze(Node(cni));
  ASSERT_EQ(Cni(analysis).size(), 1u) << Dump(analysis);
  EXPECT_TRUE(Mentions(Cni(analysis).front(),
                       "reports its CNI config directory as /var/lib/rancher/k3s/agent/etc/cni"))
      << Dump(analysis);
  cni.runtime_dir = "/etc/cni/net.d";  // the same directory (under the host root): nothing added
  analysis = Analyze(Node(cni));
  ASSERT_EQ(Cni(analysis).size(), 1u) << Dump(analysis);
  EXPECT_FALSE(Mentions(Cni(analysis).front(), "reports its CNI config directory"))
      << Dump(analysis);
}

NodeSnapshot NftNode(NftUserspaceState nft) {
  NodeSnapshot node = Node(GoodChain());
  node.nft_userspace = std::move(nft);
  return node;
}

std::vector<Finding> Nft(const NodeAnalysis& analysis) {
  std::vector<Finding> found;
  for (const Finding& f : analysis.findings) {
    if (f.code == FindingCode::kNftBackendUnusable) found.push_back(f);
  }
  return found;
}

TEST(NftUserspaceChecks, JsonMissingIsInfo) {
  NftUserspaceState nft;
  nft.collected = true;
  nft.binary = "/usr/sbin/nft";
  nft.version = "0.9.8";
  nft.version_source = "dpkg";
  nft.json_support = false;
  nft.json_evidence = "`nft -j list ruleset` in a throwaway netns: JSON support not compiled-in";
  nft.probe_ran = true;
  nft.probe_result = "JSON support not compiled-in (Error: JSON support not compiled-in)";
  const NodeAnalysis analysis = Analyze(NftNode(nft));
  const auto found = Nft(analysis);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_EQ(found.front().severity, Severity::kInfo);
  EXPECT_EQ(found.front().subject, "json");
  EXPECT_TRUE(Mentions(found.front(), "iptables-nft 1"));
  EXPECT_TRUE(Mentions(found.front(), "version 0.9.8 (dpkg)"));
}

TEST(NftUserspaceChecks, JsonWorksOrUnknownIsSilent) {
  NftUserspaceState nft;
  nft.collected = true;
  nft.binary = "/usr/sbin/nft";
  nft.json_support = true;
  EXPECT_TRUE(Nft(Analyze(NftNode(nft))).empty());
  nft.json_support.reset();
  EXPECT_TRUE(Nft(Analyze(NftNode(nft))).empty());
}

TEST(NftUserspaceChecks, AbsentBinaryMattersOnlyForNativeNftPods) {
  NftUserspaceState nft;
  nft.collected = true;
  nft.probe_result = "no nft binary under host root \"\"";
  EXPECT_TRUE(Nft(Analyze(NftNode(nft))).empty());  // iptables-nft pods: nothing to list
  NodeSnapshot node = NftNode(nft);
  node.netns[1] =
      test::HealthyPod("/run/netns/cni-a", kPodInode, Backend::kNft, kDefault, "10.0.0.5");
  const auto found = Nft(Analyze(node));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found.front().subject, "absent");
}

// A node whose pods' Istio nft tables name their creator; the node's nft is 1.0.6 with JSON.
NodeSnapshot CreatorNode(const std::string& creator, size_t pods = 3) {
  NftUserspaceState nft;
  nft.collected = true;
  nft.binary = "/usr/sbin/nft";
  nft.version = "1.0.6";
  nft.version_source = "dpkg";
  nft.json_support = true;
  NodeSnapshot node = NftNode(nft);
  node.netns.resize(1);  // the host only
  for (size_t i = 0; i < pods; ++i) {
    NetnsSnapshot pod =
        test::HealthyPod("/run/netns/cni-" + std::to_string(i), kPodInode + i, Backend::kNft,
                         kDefault, "10.0.0." + std::to_string(5 + i));
    for (Table& table : pod.netfilter.tables) table.userdata.creator_version = creator;
    node.netns.push_back(std::move(pod));
  }
  return node;
}

TEST(NftUserspaceChecks, TablesOfANewerNftAreInfoWithTheVersions) {
  const NodeAnalysis analysis = Analyze(CreatorNode("1.1.1"));
  const auto found = Nft(analysis);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_EQ(found.front().severity, Severity::kInfo);
  EXPECT_EQ(found.front().subject, "version");
  EXPECT_TRUE(Mentions(found.front(),
                       "table inet istio-ambient-nat created by nft 1.1.1, node nft 1.0.6 (dpkg): "
                       "3 netns, e.g. /run/netns/cni-0"))
      << Dump(analysis);
  EXPECT_NE(found.front().summary.find("created by nft 1.1.1"), std::string::npos);
}

TEST(NftUserspaceChecks, SameOrOlderCreatorOrUnknownVersionIsSilent) {
  for (const std::string creator : {"1.0.6", "1.0.5", "0.9.8", "", "garbage"}) {
    EXPECT_TRUE(Nft(Analyze(CreatorNode(creator))).empty()) << creator;
  }
  NodeSnapshot unknown = CreatorNode("1.1.1");
  unknown.nft_userspace.version.clear();  // no package database: nothing to compare with
  EXPECT_TRUE(Nft(Analyze(unknown)).empty());
}

TEST(NftUserspaceChecks, MalformedTableUserdataIsNamedNotGuessed) {
  NodeSnapshot node = CreatorNode("", 1);
  for (Table& table : node.netns[1].netfilter.tables) {
    if (table.name == "istio-ambient-nat") {
      table.userdata.error = "userdata creator version has 3 bytes, expected 4";
    }
  }
  const auto found = Nft(Analyze(node));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found.front().subject, "userdata");
  EXPECT_TRUE(Mentions(found.front(),
                       "table inet istio-ambient-nat: userdata creator version has 3 bytes, "
                       "expected 4: /run/netns/cni-0"))
      << Dump(Analyze(node));
}

}  // namespace
}  // namespace ad
