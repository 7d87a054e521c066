// Desired versus actual enrollment on hand-built snapshots and API views: every row of Istio's
// enrollment predicate, the judging rules, the pod <-> netns pairing, and each desired-state code
// with its controls (young, terminal, IP-less, other node's, excluded, sidecar, hostNetwork and
// opted-out pods, missing data).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/desired_state.h"
#include "unit/analysis_fixtures.h"

namespace ad {
namespace {

using test::EmptyNetns;
using test::HealthyPod;

constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kMinute = 60'000;
const AmbientVariant kBase{};

KubePod Pod(std::string name, std::string uid, std::string ip, std::string ns = "demo") {
  KubePod pod;
  pod.name = std::move(name);
  pod.uid = std::move(uid);
  pod.namespace_name = std::move(ns);
  pod.node_name = "n1";
  pod.phase = "Running";
  pod.pod_ips = {std::move(ip)};
  pod.creation_unix_s = (kNow - 10 * kMinute) / 1000;
  return pod;
}

KubeNamespace Ns(std::string name, std::optional<std::string> mode = std::nullopt) {
  return KubeNamespace{std::move(name), "1", std::move(mode)};
}

// A healthy, synced API source holding `pods`.
KubeSnapshot View(std::vector<KubePod> pods) {
  KubeSnapshot view;
  view.status.enabled = true;
  view.status.node_name = "n1";
  view.status.pods.synced = view.status.namespaces.synced = view.status.node.synced = true;
  view.pods = std::move(pods);
  view.namespaces = {Ns("demo", "ambient"), Ns("plain"), Ns("kube-system", "ambient")};
  view.node = KubeNode{"n1", "1", {}};
  return view;
}

// Node n1 with the host netns and CRI answering.
NodeSnapshot Node() {
  NodeSnapshot node;
  node.node_name = "n1";
  node.taken_at_unix_ms = kNow;
  node.netns.push_back(EmptyNetns("/proc/1/ns/net", 4026531840, true));
  node.netns.back().netns.pids = {1};
  node.cri.available = true;
  node.cri.endpoint = "/run/containerd/containerd.sock";
  return node;
}

// A pod netns without any rule (a pause process lives in it), with `ip` on eth0.
NetnsSnapshot BareNetns(std::string path, uint64_t inode, std::string ip) {
  NetnsSnapshot netns = EmptyNetns(std::move(path), inode);
  netns.netns.pids = {static_cast<int>(inode % 100000)};
  netns.routing.addresses.push_back({"lo", Family::kIpv4, "127.0.0.1", 8, false});
  netns.routing.addresses.push_back({"eth0", Family::kIpv4, std::move(ip), 24, true});
  return netns;
}

NetnsSnapshot RedirectedNetns(std::string path, uint64_t inode, std::string ip) {
  NetnsSnapshot netns = HealthyPod(std::move(path), inode, Backend::kNft, kBase, std::move(ip));
  netns.netns.pids = {static_cast<int>(inode % 100000)};
  return netns;
}

// Adds the netns and the CRI sandbox pairing it with `uid`.
void AddPod(NodeSnapshot& node, NetnsSnapshot netns, std::string uid, std::string name) {
  PodIdentity sandbox = test::CriPod(std::move(uid), std::move(name), netns.netns.inode);
  sandbox.sandbox_id = "sb-" + sandbox.name;
  sandbox.created_at_unix_ms = kNow - 10 * kMinute;
  node.cri.pods.push_back(std::move(sandbox));
  node.netns.push_back(std::move(netns));
}

std::vector<std::string> Codes(const std::vector<Finding>& findings) {
  std::vector<std::string> codes;
  for (const Finding& finding : findings) codes.emplace_back(finding.code_name());
  return codes;
}

std::string Dump(const std::vector<Finding>& findings) {
  std::string text;
  for (const Finding& finding : findings) {
    text += std::string(finding.code_name()) + " " + finding.pod + ": " + finding.summary + "\n";
    for (const std::string& line : finding.evidence) text += "    " + line + "\n";
  }
  return text;
}

DesiredAnalysis Desired(const NodeSnapshot& node, const KubeSnapshot& view,
                        History* history = nullptr, const DesiredOptions& options = {}) {
  std::vector<NetnsClassification> netns;
  for (const NetnsSnapshot& one : node.netns) netns.push_back(Classify(one));
  return AnalyzeDesired(node, netns, view, options, history);
}

bool Contains(const std::vector<std::string>& lines, std::string_view part) {
  return std::any_of(lines.begin(), lines.end(),
                     [part](const std::string& line) { return line.find(part) != line.npos; });
}

// ---- The predicate, row by row (facts §1) ----

struct Row {
  const char* name;
  bool host_network;
  bool sidecar;
  std::optional<std::string> pod_label;
  std::optional<std::string> ns_label;
  const char* ns;
  DesiredState state;
  DesiredReason reason;
};

TEST(DesiredPredicate, EveryRowOfTheTable) {
  using enum DesiredState;
  using enum DesiredReason;
  const std::vector<Row> rows = {
      {"1 hostNetwork beats the pod label", true, false, "ambient", "ambient", "demo", kNotAmbient,
       kHostNetwork},
      {"2 sidecar beats the pod label", false, true, "ambient", "ambient", "demo", kNotAmbient,
       kSidecar},
      {"3 pod label ambient in a plain namespace", false, false, "ambient", std::nullopt, "demo",
       kAmbient, kPodLabelAmbient},
      {"3 pod label ambient, namespace label none", false, false, "ambient", "none", "demo",
       kAmbient, kPodLabelAmbient},
      {"4 namespace ambient, no pod label", false, false, std::nullopt, "ambient", "demo", kAmbient,
       kNamespaceAmbient},
      {"4 namespace ambient, other pod label value", false, false, "foo", "ambient", "demo",
       kAmbient, kNamespaceAmbient},
      {"4 namespace ambient, empty pod label", false, false, "", "ambient", "demo", kAmbient,
       kNamespaceAmbient},
      {"4 namespace ambient, pod opted out", false, false, "none", "ambient", "demo", kNotAmbient,
       kPodOptedOut},
      {"opted out in a plain namespace", false, false, "none", std::nullopt, "demo", kNotAmbient,
       kPodOptedOut},
      {"5 nothing selects", false, false, std::nullopt, std::nullopt, "demo", kNotAmbient,
       kNoSelector},
      {"5 namespace label other value", false, false, std::nullopt, "sidecar", "demo", kNotAmbient,
       kNoSelector},
      {"6 excluded namespace beats every label", false, false, "ambient", "ambient", "kube-system",
       kNotAmbient, kExcludedNamespace},
      {"6 excluded namespace beats hostNetwork", true, false, std::nullopt, std::nullopt,
       "kube-system", kNotAmbient, kExcludedNamespace},
  };
  for (const Row& row : rows) {
    KubePod pod = Pod("p", "u", "10.0.0.5", row.ns);
    pod.host_network = row.host_network;
    pod.has_sidecar_status = row.sidecar;
    pod.dataplane_mode = row.pod_label;
    const KubeNamespace ns = Ns(row.ns, row.ns_label);
    const DesiredVerdict verdict = EvaluateDesired(pod, &ns, DesiredOptions{});
    EXPECT_EQ(verdict.state, row.state) << row.name << ": " << verdict.why;
    EXPECT_EQ(verdict.reason, row.reason) << row.name << ": " << verdict.why;
    EXPECT_FALSE(verdict.why.empty()) << row.name;
  }
}

TEST(DesiredPredicate, ExcludedNamespacesAreConfigurable) {
  DesiredOptions options;
  options.exclude_namespaces = {"infra"};
  KubePod system = Pod("p", "u", "10.0.0.5", "kube-system");
  system.dataplane_mode = "ambient";
  EXPECT_EQ(EvaluateDesired(system, nullptr, options).state, DesiredState::kAmbient);
  KubePod infra = Pod("p", "u", "10.0.0.5", "infra");
  infra.dataplane_mode = "ambient";
  EXPECT_EQ(EvaluateDesired(infra, nullptr, options).reason, DesiredReason::kExcludedNamespace);
}

TEST(DesiredPredicate, AnUnknownNamespaceDecidesOnlyWhatThePodDecides) {
  KubePod pod = Pod("p", "u", "10.0.0.5");
  EXPECT_EQ(EvaluateDesired(pod, nullptr, {}).state, DesiredState::kUnknown);
  EXPECT_EQ(EvaluateDesired(pod, nullptr, {}).reason, DesiredReason::kNamespaceUnknown);
  pod.dataplane_mode = "ambient";
  EXPECT_EQ(EvaluateDesired(pod, nullptr, {}).state, DesiredState::kAmbient);
  pod.dataplane_mode = "none";
  EXPECT_EQ(EvaluateDesired(pod, nullptr, {}).state, DesiredState::kNotAmbient);
}

// ---- Judging ----

TEST(DesiredJudge, OnlyARunningPodWithAnIpPastTheGraceIsJudged) {
  const DesiredOptions options;
  const KubePod ok = Pod("p", "u", "10.0.0.5");
  EXPECT_TRUE(JudgePod(ok, "n1", kNow, 0, options).judgeable());

  auto block = [&](KubePod pod, int64_t sandbox_created = 0) {
    return JudgePod(pod, "n1", kNow, sandbox_created, options).block;
  };
  KubePod pod = ok;
  pod.node_name = "n2";
  EXPECT_EQ(block(pod), JudgeBlock::kOtherNode);
  pod = ok;
  pod.phase = "Succeeded";
  EXPECT_EQ(block(pod), JudgeBlock::kTerminal);
  pod.phase = "Failed";
  pod.pod_ips.clear();  // kubelet may post a terminal status without IP
  EXPECT_EQ(block(pod), JudgeBlock::kTerminal);
  pod = ok;
  pod.deletion_unix_s = kNow / 1000 - 1;
  EXPECT_EQ(block(pod), JudgeBlock::kTerminating);
  pod = ok;
  pod.phase = "Pending";
  EXPECT_EQ(block(pod), JudgeBlock::kNotRunning);
  pod.phase = "";
  EXPECT_EQ(block(pod), JudgeBlock::kNotRunning);
  pod = ok;
  pod.pod_ips.clear();
  EXPECT_EQ(block(pod), JudgeBlock::kNoIp);
  pod = ok;
  pod.creation_unix_s = 0;
  EXPECT_EQ(block(pod), JudgeBlock::kAgeUnknown);
  pod = ok;
  pod.creation_unix_s = (kNow - 29'000) / 1000;
  EXPECT_EQ(block(pod), JudgeBlock::kYoung);
  pod.creation_unix_s = (kNow - 30'000) / 1000;
  EXPECT_EQ(block(pod), JudgeBlock::kNone);
  // An old pod whose sandbox was just re-made is being set up again.
  EXPECT_EQ(block(ok, kNow - 5'000), JudgeBlock::kYoung);
  EXPECT_NE(JudgePod(ok, "n1", kNow, kNow - 5'000, options).why.find("sandbox"), std::string::npos);
}

// ---- Pairing ----

TEST(DesiredPairing, ByTheCriSandboxOfTheUid) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  const NetnsPairing pairing = PairPodNetns(Pod("a", "uid-a", "10.0.0.5"), node);
  EXPECT_EQ(pairing.method, PairMethod::kCriSandbox);
  EXPECT_EQ(pairing.netns_inode, 4026532001u);
  ASSERT_TRUE(pairing.netns_index.has_value());
  EXPECT_EQ(*pairing.netns_index, 1u);
  EXPECT_EQ(pairing.sandbox_id, "sb-a");
  EXPECT_EQ(pairing.netns_path, "/run/netns/a");
}

TEST(DesiredPairing, TheNewestSandboxWins) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/old", 4026532001, "10.0.0.5"), "uid-a", "a");
  AddPod(node, BareNetns("/run/netns/new", 4026532002, "10.0.0.6"), "uid-a", "a");
  node.cri.pods.Mutable()[1].created_at_unix_ms = kNow - kMinute;
  EXPECT_EQ(PairPodNetns(Pod("a", "uid-a", "10.0.0.6"), node).netns_inode, 4026532002u);
}

TEST(DesiredPairing, CriWithoutTheUidOrItsNetnsPairsNothingScanned) {
  NodeSnapshot node = Node();
  node.netns.push_back(BareNetns("/run/netns/a", 4026532001, "10.0.0.5"));
  NetnsPairing pairing = PairPodNetns(Pod("a", "uid-a", "10.0.0.5"), node);
  EXPECT_EQ(pairing.method, PairMethod::kNone);
  EXPECT_NE(pairing.detail.find("no ready sandbox"), std::string::npos) << pairing.detail;
  node.cri.pods.push_back(test::CriPod("uid-a", "a", 4026532999));
  pairing = PairPodNetns(Pod("a", "uid-a", "10.0.0.5"), node);
  EXPECT_EQ(pairing.method, PairMethod::kCriSandbox);
  EXPECT_FALSE(pairing.netns_index.has_value());
}

TEST(DesiredPairing, ByPodIpInsideTheNetnsWhenCriIsSilent) {
  NodeSnapshot node = Node();
  node.cri.available = false;
  node.netns.push_back(BareNetns("/run/netns/a", 4026532001, "10.0.0.5"));
  NetnsSnapshot v6 = BareNetns("/run/netns/b", 4026532002, "10.0.0.6");
  v6.routing.addresses.push_back({"eth0", Family::kIpv6, "fd00::6", 64, true});
  node.netns.push_back(v6);
  NetnsPairing pairing = PairPodNetns(Pod("a", "uid-a", "10.0.0.5"), node);
  EXPECT_EQ(pairing.method, PairMethod::kPodIp);
  EXPECT_EQ(pairing.netns_inode, 4026532001u);
  EXPECT_NE(pairing.detail.find("10.0.0.5 on eth0"), std::string::npos) << pairing.detail;
  // The API server's spelling of an IPv6 address need not be the kernel's.
  pairing = PairPodNetns(Pod("b", "uid-b", "fd00:0::0006"), node);
  EXPECT_EQ(pairing.netns_inode, 4026532002u) << pairing.detail;
  // No netns holds the IP; two netns hold it (a leaked netns with a reused IP).
  EXPECT_EQ(PairPodNetns(Pod("c", "uid-c", "10.0.0.7"), node).method, PairMethod::kNone);
  node.netns.push_back(BareNetns("/run/netns/leak", 4026532003, "10.0.0.5"));
  pairing = PairPodNetns(Pod("a", "uid-a", "10.0.0.5"), node);
  EXPECT_EQ(pairing.method, PairMethod::kNone);
  EXPECT_NE(pairing.detail.find("ambiguous"), std::string::npos) << pairing.detail;
}

// Some runtimes name no netns in the sandbox's verbose status: the pod IP pairs it then.
TEST(DesiredPairing, ByPodIpWhenTheCriSandboxNamesNoNetns) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  node.cri.pods.Mutable()[0].netns_inode = 0;
  const NetnsPairing pairing = PairPodNetns(Pod("a", "uid-a", "10.0.0.5"), node);
  EXPECT_EQ(pairing.method, PairMethod::kPodIp);
  EXPECT_EQ(pairing.netns_inode, 4026532001u);
  EXPECT_EQ(pairing.sandbox_id, "sb-a");
  EXPECT_NE(pairing.detail.find("names no resolvable netns"), std::string::npos) << pairing.detail;
}

TEST(DesiredPairing, HostNetworkPodsLiveInTheHostNetns) {
  const NodeSnapshot node = Node();
  KubePod pod = Pod("h", "uid-h", "192.168.1.10");
  pod.host_network = true;
  const NetnsPairing pairing = PairPodNetns(pod, node);
  EXPECT_EQ(pairing.method, PairMethod::kHostNetwork);
  EXPECT_EQ(pairing.netns_inode, 4026531840u);
}

// ---- POD_NOT_ENROLLED ----

TEST(DesiredChecks, PodNotEnrolled) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  const DesiredAnalysis result = Desired(node, View({Pod("a", "uid-a", "10.0.0.5")}));
  ASSERT_TRUE(result.judged);
  ASSERT_EQ(Codes(result.findings), std::vector<std::string>{"POD_NOT_ENROLLED"})
      << Dump(result.findings);
  const Finding& finding = result.findings[0];
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.pod, "demo/a");
  EXPECT_EQ(finding.netns_inode, 4026532001u);
  EXPECT_EQ(finding.subject, "pod uid-a");
  EXPECT_TRUE(Contains(finding.evidence, "namespace demo has label istio.io/dataplane-mode"))
      << Dump(result.findings);
  EXPECT_TRUE(Contains(finding.evidence, "paired by cri"));
  EXPECT_TRUE(Contains(finding.evidence, "annotation ambient.istio.io/redirection: absent"));
  EXPECT_TRUE(Contains(finding.evidence, "no Istio in-pod ambient rules"));
  EXPECT_FALSE(finding.hint.empty());
  ASSERT_EQ(result.pods.size(), 1u);
  EXPECT_EQ(result.pods[0].finding, FindingCode::kPodNotEnrolled);
  EXPECT_EQ(result.pods[0].verdict.rfind("should be in the mesh but is not", 0), 0u)
      << result.pods[0].verdict;
}

// The API source's node name is the pods' spec.nodeName; the snapshot's may be the host name.
TEST(DesiredChecks, TheApiSourcesNodeNameDecidesWhichPodsAreThisNodes) {
  NodeSnapshot node = Node();
  node.node_name = "host-17.example";
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  EXPECT_EQ(Codes(Desired(node, View({Pod("a", "uid-a", "10.0.0.5")})).findings),
            std::vector<std::string>{"POD_NOT_ENROLLED"});
}

TEST(DesiredChecks, PairedByIpWithoutCri) {
  NodeSnapshot node = Node();
  node.cri.available = false;
  node.netns.push_back(BareNetns("/run/netns/a", 4026532001, "10.0.0.5"));
  const DesiredAnalysis result = Desired(node, View({Pod("a", "uid-a", "10.0.0.5")}));
  ASSERT_EQ(Codes(result.findings), std::vector<std::string>{"POD_NOT_ENROLLED"});
  EXPECT_TRUE(Contains(result.findings[0].evidence, "paired by pod_ip"));
}

TEST(DesiredChecks, AnEnrolledPodIsInTheMesh) {
  NodeSnapshot node = Node();
  AddPod(node, RedirectedNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  KubePod pod = Pod("a", "uid-a", "10.0.0.5");
  pod.redirection = "enabled";
  const DesiredAnalysis result = Desired(node, View({pod}));
  EXPECT_TRUE(result.findings.empty()) << Dump(result.findings);
  EXPECT_EQ(result.pods[0].verdict, "in the mesh");
  EXPECT_EQ(result.pods[0].redirect, RedirectSeen::kRedirected);
}

// Partial rules keep INCOMPLETE_RULESET (rule checks); no desired-state finding on top.
TEST(DesiredChecks, PartialRulesAreNotNotEnrolled) {
  NodeSnapshot node = Node();
  NetnsSnapshot netns = RedirectedNetns("/run/netns/a", 4026532001, "10.0.0.5");
  netns.netfilter.tables[0].chains[0].rules.pop_back();
  AddPod(node, netns, "uid-a", "a");
  EXPECT_TRUE(Desired(node, View({Pod("a", "uid-a", "10.0.0.5")})).findings.empty());
}

TEST(DesiredChecks, ControlsRaiseNothing) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  const KubePod base = Pod("a", "uid-a", "10.0.0.5");
  auto quiet = [&](const KubePod& pod, const char* what) {
    const DesiredAnalysis result = Desired(node, View({pod}));
    EXPECT_TRUE(result.findings.empty()) << what << "\n" << Dump(result.findings);
  };
  KubePod pod = base;
  pod.creation_unix_s = (kNow - 10'000) / 1000;
  quiet(pod, "young pod");
  pod = base;
  pod.phase = "Succeeded";
  quiet(pod, "terminal pod");
  pod = base;
  pod.pod_ips.clear();
  quiet(pod, "pod without IP");
  pod = base;
  pod.node_name = "n2";
  quiet(pod, "another node's pod");
  pod = base;
  pod.namespace_name = "kube-system";
  pod.dataplane_mode = "ambient";
  quiet(pod, "excluded namespace");
  pod = base;
  pod.has_sidecar_status = true;
  quiet(pod, "sidecar pod");
  pod = base;
  pod.dataplane_mode = "none";
  quiet(pod, "opted-out pod without rules");
  pod = base;
  pod.namespace_name = "plain";
  quiet(pod, "unselected pod");
  pod = base;
  pod.namespace_name = "unknown";
  quiet(pod, "namespace not in the view");
  pod = base;
  pod.redirection = "pending";
  quiet(pod, "pending annotation in a one-shot report");
  pod = base;
  pod.host_network = true;
  quiet(pod, "hostNetwork pod");
}

TEST(DesiredChecks, StoriesOfQuietPods) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  KubePod pod = Pod("a", "uid-a", "10.0.0.5");
  pod.dataplane_mode = "none";
  pod.redirection = "disabled";
  DesiredAnalysis result = Desired(node, View({pod}));
  ASSERT_EQ(result.pods.size(), 1u);
  const PodStory& story = result.pods[0];
  EXPECT_EQ(story.verdict, "not in the mesh, as intended");
  EXPECT_EQ(story.desired.reason, DesiredReason::kPodOptedOut);
  EXPECT_EQ(story.pairing.method, PairMethod::kCriSandbox);
  EXPECT_EQ(story.redirect, RedirectSeen::kAbsent);
  EXPECT_FALSE(story.finding.has_value());
  EXPECT_TRUE(Contains(story.notes, "only Istio 1.21 and older read"));
  pod = Pod("a", "uid-a", "10.0.0.5");
  pod.phase = "Pending";
  result = Desired(node, View({pod}));
  EXPECT_EQ(result.pods[0].verdict, "not judged: the pod is Pending");
}

TEST(DesiredChecks, MissingDataRaisesNothing) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  const KubePod pod = Pod("a", "uid-a", "10.0.0.5");

  KubeSnapshot degraded = View({pod});
  degraded.status.reason = KubeApiReason::kUnauthorized;
  degraded.status.message = "HTTP 401";
  DesiredAnalysis result = Desired(node, degraded);
  EXPECT_FALSE(result.judged);
  EXPECT_EQ(result.skip_reason, "the Kubernetes API source is degraded (unauthorized): HTTP 401");
  EXPECT_TRUE(result.findings.empty());
  EXPECT_TRUE(result.pods.empty());
  for (int unsynced = 0; unsynced < 3; ++unsynced) {  // before the first list of each collection
    degraded = View({pod});
    KubeResourceStatus* resources[] = {&degraded.status.pods, &degraded.status.namespaces,
                                       &degraded.status.node};
    resources[unsynced]->synced = false;
    result = Desired(node, degraded);
    EXPECT_FALSE(result.judged) << unsynced;
    EXPECT_TRUE(result.findings.empty()) << unsynced;
  }
  degraded = View({pod});
  degraded.status.enabled = false;
  EXPECT_EQ(Desired(node, degraded).skip_reason, "the Kubernetes API source is off");

  NodeSnapshot unread = node;
  unread.netns[1].reads.legacy_v6 = ReadStatus::kFailed;
  result = Desired(unread, View({pod}));
  EXPECT_TRUE(result.findings.empty()) << Dump(result.findings);
  EXPECT_EQ(result.pods[0].redirect, RedirectSeen::kUnknown);
  EXPECT_EQ(result.pods[0].verdict.rfind("not judged", 0), 0u) << result.pods[0].verdict;

  unread = node;
  unread.netns[1].unreadable = true;
  EXPECT_TRUE(Desired(unread, View({pod})).findings.empty());

  NodeSnapshot unscanned = node;
  unscanned.netns.pop_back();  // CRI names a netns the scan did not read
  EXPECT_TRUE(Desired(unscanned, View({pod})).findings.empty());

  NodeSnapshot no_sandbox = node;
  no_sandbox.cri.pods.clear();  // CRI answered, but not about this pod
  EXPECT_TRUE(Desired(no_sandbox, View({pod})).findings.empty());
}

// ---- ENROLLMENT_ANNOTATION_STALE ----

TEST(DesiredChecks, EnabledAnnotationWithoutRulesIsStaleNotNotEnrolled) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  KubePod pod = Pod("a", "uid-a", "10.0.0.5");
  pod.redirection = "enabled";
  const DesiredAnalysis result = Desired(node, View({pod}));
  ASSERT_EQ(Codes(result.findings), std::vector<std::string>{"ENROLLMENT_ANNOTATION_STALE"})
      << Dump(result.findings);
  EXPECT_EQ(result.findings[0].severity, Severity::kCritical);
  EXPECT_TRUE(Contains(result.findings[0].evidence, "redirection: \"enabled\""));
}

TEST(DesiredChecks, PendingAnnotationIsStaleOnlyPastTheGrace) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  KubePod pod = Pod("a", "uid-a", "10.0.0.5");
  pod.redirection = "pending";
  History history;
  DesiredAnalysis result = Desired(node, View({pod}), &history);
  EXPECT_TRUE(result.findings.empty()) << Dump(result.findings);
  EXPECT_TRUE(Contains(result.pods[0].notes, "within the grace period"));
  node.taken_at_unix_ms = kNow + 20'000;
  EXPECT_TRUE(Desired(node, View({pod}), &history).findings.empty());
  node.taken_at_unix_ms = kNow + 30'000;
  result = Desired(node, View({pod}), &history);
  EXPECT_EQ(Codes(result.findings), std::vector<std::string>{"ENROLLMENT_ANNOTATION_STALE"});
  // Rules back: the age starts again.
  node.taken_at_unix_ms = kNow + 40'000;
  NodeSnapshot healed = node;
  healed.netns[1] = RedirectedNetns("/run/netns/a", 4026532001, "10.0.0.5");
  EXPECT_TRUE(Desired(healed, View({pod}), &history).findings.empty());
  node.taken_at_unix_ms = kNow + 50'000;
  EXPECT_TRUE(Desired(node, View({pod}), &history).findings.empty());
}

// istio-cni removes the rules before the annotation: an `enabled` pod that should no longer be
// ambient is stale only when the annotation outlives the grace.
TEST(DesiredChecks, AnnotationOutlivingARemovalIsStalePastTheGrace) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  KubePod pod = Pod("a", "uid-a", "10.0.0.5", "plain");
  pod.redirection = "enabled";
  EXPECT_TRUE(Desired(node, View({pod})).findings.empty());  // one-shot: age unknown
  History history;
  EXPECT_TRUE(Desired(node, View({pod}), &history).findings.empty());
  node.taken_at_unix_ms = kNow + 31'000;
  EXPECT_EQ(Codes(Desired(node, View({pod}), &history).findings),
            std::vector<std::string>{"ENROLLMENT_ANNOTATION_STALE"});
}

// ---- POD_ENROLLED_AGAINST_INTENT ----

TEST(DesiredChecks, OptedOutSidecarAndExcludedPodsWithRules) {
  struct Case {
    const char* what;
    std::string ns;
    std::optional<std::string> label;
    bool sidecar;
  };
  for (const Case& c :
       {Case{"opted out", "demo", "none", false}, Case{"sidecar", "demo", std::nullopt, true},
        Case{"excluded namespace", "kube-system", "ambient", false}}) {
    NodeSnapshot node = Node();
    AddPod(node, RedirectedNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
    KubePod pod = Pod("a", "uid-a", "10.0.0.5", c.ns);
    pod.dataplane_mode = c.label;
    pod.has_sidecar_status = c.sidecar;
    pod.redirection = "enabled";
    const DesiredAnalysis result = Desired(node, View({pod}));
    ASSERT_EQ(Codes(result.findings), std::vector<std::string>{"POD_ENROLLED_AGAINST_INTENT"})
        << c.what << "\n"
        << Dump(result.findings);
    EXPECT_EQ(result.findings[0].severity, Severity::kWarning);
    EXPECT_EQ(result.pods[0].verdict.rfind("should not be in the mesh but is", 0), 0u);
  }
}

// Clusters may configure other enablement selectors: rules in a pod no default selector matches
// are not against an explicit intent.
TEST(DesiredChecks, UnselectedPodWithRulesRaisesNothing) {
  NodeSnapshot node = Node();
  AddPod(node, RedirectedNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  const DesiredAnalysis result = Desired(node, View({Pod("a", "uid-a", "10.0.0.5", "plain")}));
  EXPECT_TRUE(result.findings.empty()) << Dump(result.findings);
}

TEST(DesiredChecks, HostNetworkPodEnrolledByTheRegression) {
  NodeSnapshot node = Node();
  test::Materialise(
      node.netns[0].netfilter, Backend::kNft,
      istio::BuildInpodRuleset(istio::RulesetBackend::kNft, kBase, test::DefaultSnat()));
  KubePod selected = Pod("agent", "uid-h", "192.168.1.10");  // ambient namespace
  selected.host_network = true;
  KubePod unselected = Pod("other", "uid-o", "192.168.1.10", "plain");
  unselected.host_network = true;
  KubePod system = Pod("kube-proxy", "uid-k", "192.168.1.10", "kube-system");
  system.host_network = true;  // kube-system is labelled ambient in View(), but excluded
  system.dataplane_mode = "ambient";
  const DesiredAnalysis result = Desired(node, View({selected, unselected, system}));
  ASSERT_EQ(Codes(result.findings), std::vector<std::string>{"POD_ENROLLED_AGAINST_INTENT"})
      << Dump(result.findings);
  EXPECT_EQ(result.findings[0].pod, "demo/agent");
  EXPECT_TRUE(Contains(result.findings[0].evidence, "without the hostNetwork rule"));
  EXPECT_NE(result.findings[0].hint.find("istio#61168"), std::string::npos);
}

// ---- ZTUNNEL_NETNS_STALE ----

NodeSnapshot ReplacedSandbox() {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/new", 4026532002, "10.0.0.5"), "uid-a", "a");
  test::AddZdsConnection(node, 200, 300);
  node.processes.push_back(
      test::ProcessWithNetnsFds(300, ProcessRole::kZtunnel, {4026532001}, 4026532500));
  ZtunnelAdminState admin;
  admin.pid = 300;
  admin.netns_inode = 4026532500;
  admin.workload_state.push_back({"uid-a", "Up", "a", "demo", "default"});
  node.ztunnels.push_back(admin);
  return node;
}

TEST(DesiredChecks, ZtunnelServesThePreviousNetns) {
  const NodeSnapshot node = ReplacedSandbox();
  KubePod pod = Pod("a", "uid-a", "10.0.0.5");
  pod.redirection = "enabled";
  const DesiredAnalysis result = Desired(node, View({pod}));
  ASSERT_EQ(Codes(result.findings), std::vector<std::string>{"ZTUNNEL_NETNS_STALE"})
      << Dump(result.findings);
  const Finding& finding = result.findings[0];
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.netns_inode, 4026532002u);
  EXPECT_TRUE(Contains(finding.evidence, "holds netns inode 4026532001"));
  EXPECT_TRUE(Contains(finding.evidence, "workloadState[uid-a] = Up"));
}

TEST(DesiredChecks, ZtunnelHoldingTheCurrentNetnsIsNotStale) {
  NodeSnapshot node = ReplacedSandbox();
  node.processes[0].netns_fd_inodes = {4026532001, 4026532002};
  KubePod pod = Pod("a", "uid-a", "10.0.0.5");
  pod.redirection = "enabled";
  // The current netns has no rules: that is the annotation's story, not ztunnel's.
  EXPECT_EQ(Codes(Desired(node, View({pod})).findings),
            std::vector<std::string>{"ENROLLMENT_ANNOTATION_STALE"});
  // Without the fd inventory ztunnel's side is unknown.
  node = ReplacedSandbox();
  node.processes.clear();
  EXPECT_EQ(Codes(Desired(node, View({pod})).findings),
            std::vector<std::string>{"ENROLLMENT_ANNOTATION_STALE"});
  // The held netns belongs to a live sandbox: not an orphan.
  node = ReplacedSandbox();
  node.cri.pods.push_back(test::CriPod("uid-b", "b", 4026532001));
  EXPECT_EQ(Codes(Desired(node, View({pod})).findings),
            std::vector<std::string>{"ENROLLMENT_ANNOTATION_STALE"});
}

// ---- Entry points and evidence ----

TEST(DesiredChecks, DesiredStateFindingsClassifiesItself) {
  NodeSnapshot node = Node();
  AddPod(node, BareNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  EXPECT_EQ(Codes(DesiredStateFindings(node, View({Pod("a", "uid-a", "10.0.0.5")}), {})),
            std::vector<std::string>{"POD_NOT_ENROLLED"});
}

TEST(DesiredChecks, OtherFindingsOfAPairedNetnsGetTheDesiredState) {
  NodeSnapshot node = Node();
  AddPod(node, RedirectedNetns("/run/netns/a", 4026532001, "10.0.0.5"), "uid-a", "a");
  const DesiredAnalysis result = Desired(node, View({Pod("a", "uid-a", "10.0.0.5")}));
  Finding incomplete;
  incomplete.code = FindingCode::kIncompleteRuleset;
  incomplete.netns_inode = 4026532001;
  Finding elsewhere = incomplete;
  elsewhere.netns_inode = 4026532999;
  Finding own = incomplete;
  own.code = FindingCode::kPodNotEnrolled;  // its evidence tells the story already
  std::vector<Finding> findings = {incomplete, elsewhere, own};
  AddDesiredEvidence(result, findings);
  EXPECT_TRUE(findings[2].evidence.empty());
  ASSERT_EQ(findings[0].evidence.size(), 1u);
  EXPECT_NE(findings[0].evidence[0].find("desired state of pod demo/a (Kubernetes API): ambient"),
            std::string::npos)
      << findings[0].evidence[0];
  EXPECT_TRUE(findings[1].evidence.empty());
}

TEST(DesiredChecks, StoriesByNameAndCountsByDesiredState) {
  NodeSnapshot node = Node();
  KubePod done = Pod("job", "uid-j", "10.0.0.8");
  done.phase = "Succeeded";
  KubePod elsewhere = Pod("far", "uid-f", "10.0.0.9");
  elsewhere.node_name = "n2";
  const DesiredAnalysis result =
      Desired(node, View({Pod("a", "uid-a", "10.0.0.5"), Pod("b", "uid-b", "10.0.0.6", "plain"),
                          Pod("c", "uid-c", "10.0.0.7", "new"), done, elsewhere}));
  ASSERT_NE(FindStory(result, "plain/b"), nullptr);
  EXPECT_EQ(FindStory(result, "plain/b")->uid, "uid-b");
  EXPECT_EQ(FindStory(result, "plain/x"), nullptr);
  const DesiredCounts counts = CountDesired(result);
  EXPECT_EQ(counts.ambient, 1u);
  EXPECT_EQ(counts.not_ambient, 1u);
  EXPECT_EQ(counts.unknown, 1u);  // namespace "new" not known yet
}

TEST(DesiredChecks, TheTableRowsOfTheNewCodes) {
  struct Want {
    FindingCode code;
    const char* name;
    Severity severity;
    const char* alert;
  };
  for (const Want& want :
       {Want{FindingCode::kPodNotEnrolled, "POD_NOT_ENROLLED", Severity::kCritical,
             "AmbientPodNotEnrolled"},
        Want{FindingCode::kEnrollmentAnnotationStale, "ENROLLMENT_ANNOTATION_STALE",
             Severity::kCritical, "AmbientPodNotEnrolled"},
        Want{FindingCode::kPodEnrolledAgainstIntent, "POD_ENROLLED_AGAINST_INTENT",
             Severity::kWarning, ""},
        Want{FindingCode::kZtunnelNetnsStale, "ZTUNNEL_NETNS_STALE", Severity::kCritical,
             "AmbientZtunnelNetnsStale"}}) {
    const FindingCodeInfo& info = FindingCodeDetails(want.code);
    EXPECT_EQ(info.name, want.name);
    EXPECT_EQ(info.severity, want.severity) << want.name;
    EXPECT_EQ(info.alert, want.alert) << want.name;
    EXPECT_EQ(ParseFindingCode(want.name), want.code);
  }
}

}  // namespace
}  // namespace ad
