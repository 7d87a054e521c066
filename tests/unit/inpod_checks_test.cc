// DNS_CAPTURE_BROKEN and INPOD_PROXY_BLOCKED on hand-built snapshots (no root): each cause, its
// negative cases, the reads they must not judge without, and how INPOD_PROXY_BLOCKED names itself
// in the symptom findings of the same netns.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/history.h"
#include "analysis_fixtures.h"

namespace ad {
namespace {

using test::Dump;

constexpr int kCniPid = 100;
constexpr int kZtunnelPid = 200;
constexpr uint64_t kPodInode = 4026532001;
constexpr uint64_t kZtunnelNetnsInode = 4026532500;
constexpr int64_t kT0 = 1787392800000;  // 2026-08-22T10:00:00Z
const AmbientVariant kDns{true, false, {}, false};
const AmbientVariant kDnsV6{true, false, {}, true};
const AmbientVariant kNoDns{false, false, {}, false};

ListeningSocket Socket(uint8_t protocol, Family family, std::string address, uint16_t port,
                       int owner = kZtunnelPid) {
  ListeningSocket socket;
  socket.protocol = protocol;
  socket.family = family;
  socket.address = std::move(address);
  socket.port = port;
  socket.mark = 0x539;
  socket.mark_known = true;
  socket.inode = 90000 + port * 4 + protocol + (family == Family::kIpv6 ? 1 : 0);
  if (owner != 0) socket.owner_pids = {owner};
  return socket;
}

void AddProxyListeners(NetnsSnapshot& netns) {
  for (uint16_t port : {15001, 15006, 15008}) {
    netns.listeners.push_back(Socket(6, Family::kIpv6, "::", port));
  }
}

void AddDnsListeners(NetnsSnapshot& netns, bool v6) {
  netns.listeners.push_back(Socket(6, Family::kIpv4, "127.0.0.1", 15053));
  netns.listeners.push_back(Socket(17, Family::kIpv4, "127.0.0.1", 15053));
  if (v6) {
    netns.listeners.push_back(Socket(6, Family::kIpv6, "::1", 15053));
    netns.listeners.push_back(Socket(17, Family::kIpv6, "::1", 15053));
  }
}

// What the kernel readers give for a healthy pod: lo up with 127.0.0.1 and ::1, IPv6 enabled.
void HealthyLoopback(NetnsSnapshot& netns) {
  netns.routing.loopback = {.known = true, .found = true, .up = true, .flags = 0x49};
  netns.routing.addresses.push_back({"lo", Family::kIpv6, "::1", 128, false});
  netns.routing.ipv6_disabled = false;
  netns.reads.dns_udp = ReadStatus::kOk;
}

// A served node with one DNS-capturing pod: both ZDS peers hold its netns, ztunnel's listeners
// (15001/15006/15008 and DNS) are in it, ztunnel reports it Up.
NodeSnapshot ServedNode(Backend backend = Backend::kIptablesNft,
                        const AmbientVariant& variant = kDns) {
  NodeSnapshot node;
  node.node_name = "node-a";
  node.taken_at_unix_ms = kT0;
  node.netns.push_back(test::HealthyHost(backend, variant.ipv6, {"10.244.0.5"}, {"fd00::5"}));
  node.netns.push_back(test::HealthyPod("/run/netns/cni-echo", kPodInode, backend, variant,
                                        "10.244.0.5", variant.ipv6 ? "fd00::5" : ""));
  NetnsSnapshot& pod = node.netns[1];
  pod.netns.pids = {4242};
  HealthyLoopback(pod);
  AddProxyListeners(pod);
  AddDnsListeners(pod, /*v6=*/true);  // ztunnel binds ::1 wherever IPv6 is enabled
  NetnsSnapshot ztunnel_netns = test::EmptyNetns("/proc/300/ns/net", kZtunnelNetnsInode);
  ztunnel_netns.netns.pids = {kZtunnelPid};
  node.netns.push_back(ztunnel_netns);

  test::AddZdsConnection(node, kCniPid, kZtunnelPid);

  node.processes.push_back(
      test::ProcessWithNetnsFds(kCniPid, ProcessRole::kIstioCni, {kPodInode}, 4026531840));
  node.processes.push_back(test::ProcessWithNetnsFds(kZtunnelPid, ProcessRole::kZtunnel,
                                                     {kPodInode}, kZtunnelNetnsInode));

  ZtunnelAdminState admin;
  admin.pid = kZtunnelPid;
  admin.netns_inode = kZtunnelNetnsInode;
  admin.admin_reachable = true;
  admin.ready = true;
  admin.workload_state.push_back({"uid-echo", "Up", "echo", "demo", "echo"});
  node.ztunnels.push_back(admin);

  node.cri.available = true;
  node.cri.pods.push_back(test::CriPod("uid-echo", "echo", kPodInode, {"10.244.0.5"}));
  return node;
}

NetnsSnapshot& Pod(NodeSnapshot& node) { return node.netns[1]; }

// The pod is Pending in ztunnel and has no listeners: what ztunnel leaves after a failed bind.
void MakePending(NodeSnapshot& node) {
  Pod(node).listeners.clear();
  node.ztunnels[0].workload_state[0].state = "Pending";
  node.ztunnels[0].ready = false;
  node.ztunnels[0].pending_tasks = {"workload proxy manager"};
}

void RemoveLoopbackV6(NetnsSnapshot& netns) {
  auto& addresses = netns.routing.addresses;
  addresses.erase(std::remove_if(addresses.begin(), addresses.end(),
                                 [](const InterfaceAddress& a) {
                                   return a.ifname == "lo" && a.address == "::1";
                                 }),
                  addresses.end());
}

void RemoveListener(NetnsSnapshot& netns, uint8_t protocol, Family family) {
  auto& listeners = netns.listeners;
  listeners.erase(std::remove_if(listeners.begin(), listeners.end(),
                                 [&](const ListeningSocket& s) {
                                   return s.port == 15053 && s.protocol == protocol &&
                                          s.family == family;
                                 }),
                  listeners.end());
}

// Drops the nat rules redirecting `protocol`/53 to 15053 from every table of the pod.
void RemoveDnsRedirect(NetnsSnapshot& netns, uint32_t protocol, Family family) {
  for (Table& table : netns.netfilter.tables) {
    if (table.family != family && table.family != Family::kInet) continue;
    for (Chain& chain : table.chains) {
      std::erase_if(chain.rules, [&](const Rule& rule) {
        if (rule.sem.action.kind != ActionKind::kRedirect || rule.sem.action.value != 15053) {
          return false;
        }
        return std::any_of(rule.sem.matches.begin(), rule.sem.matches.end(), [&](const Match& m) {
          return m.kind == MatchKind::kProtocol && m.value == protocol;
        });
      });
    }
  }
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

NodeAnalysis Judge(const NodeSnapshot& node) {
  AnalysisOptions options;
  options.history_known = false;  // a one-shot report
  return Analyze(node, options);
}

TEST(InpodChecksTest, HealthyServedPodHasNoFinding) {
  for (Backend backend : {Backend::kIptablesLegacy, Backend::kIptablesNft, Backend::kNft}) {
    for (const AmbientVariant& variant : {kDns, kDnsV6, kNoDns}) {
      const NodeAnalysis analysis = Judge(ServedNode(backend, variant));
      EXPECT_TRUE(analysis.findings.empty())
          << BackendName(backend) << " " << variant.Describe() << "\n"
          << Dump(analysis);
    }
  }
}

TEST(InpodChecksTest, MissingUdpDnsListenerIsDnsCaptureBroken) {
  NodeSnapshot node = ServedNode();
  RemoveListener(Pod(node), 17, Family::kIpv4);
  const NodeAnalysis analysis = Judge(node);
  const auto found = WithCode(analysis, FindingCode::kDnsCaptureBroken);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_EQ(analysis.findings.size(), 1u) << Dump(analysis);
  EXPECT_EQ(found[0]->severity, Severity::kCritical);
  EXPECT_EQ(found[0]->subject, "listeners");
  EXPECT_EQ(found[0]->pod, "demo/echo");
  EXPECT_EQ(found[0]->netns_inode, kPodInode);
  EXPECT_TRUE(EvidenceHas(*found[0], "no ztunnel socket listens on UDP 127.0.0.1:15053"))
      << Dump(analysis);
  EXPECT_TRUE(EvidenceHas(*found[0], "present: TCP 127.0.0.1:15053")) << Dump(analysis);
}

TEST(InpodChecksTest, NoDnsListenerAtAllNamesBothProtocols) {
  for (Backend backend : {Backend::kIptablesLegacy, Backend::kIptablesNft, Backend::kNft}) {
    NodeSnapshot node = ServedNode(backend);
    RemoveListener(Pod(node), 17, Family::kIpv4);
    RemoveListener(Pod(node), 6, Family::kIpv4);
    const NodeAnalysis analysis = Judge(node);
    const auto found = WithCode(analysis, FindingCode::kDnsCaptureBroken);
    ASSERT_EQ(found.size(), 1u) << BackendName(backend) << "\n" << Dump(analysis);
    EXPECT_EQ(analysis.findings.size(), 1u) << Dump(analysis);
    EXPECT_TRUE(EvidenceHas(*found[0], "UDP 127.0.0.1:15053, TCP 127.0.0.1:15053") ||
                EvidenceHas(*found[0], "TCP 127.0.0.1:15053, UDP 127.0.0.1:15053"))
        << Dump(analysis);
  }
}

TEST(InpodChecksTest, Ipv6DnsRulesNeedTheIpv6Listener) {
  NodeSnapshot node = ServedNode(Backend::kIptablesNft, kDnsV6);
  RemoveListener(Pod(node), 17, Family::kIpv6);
  const NodeAnalysis analysis = Judge(node);
  const auto found = WithCode(analysis, FindingCode::kDnsCaptureBroken);
  ASSERT_EQ(found.size(), 1u) << Dump(analysis);
  EXPECT_TRUE(EvidenceHas(*found[0], "UDP [::1]:15053")) << Dump(analysis);

  // IPv4-only rules do not need [::1] (no IPv6 DNS is redirected), nor does a netns with IPv6
  // disabled.
  NodeSnapshot v4 = ServedNode(Backend::kIptablesNft, kDns);
  RemoveListener(Pod(v4), 17, Family::kIpv6);
  RemoveListener(Pod(v4), 6, Family::kIpv6);
  EXPECT_TRUE(Judge(v4).findings.empty()) << Dump(Judge(v4));
  NodeSnapshot disabled = ServedNode(Backend::kIptablesNft, kDnsV6);
  Pod(disabled).routing.ipv6_disabled = true;
  RemoveLoopbackV6(Pod(disabled));
  RemoveListener(Pod(disabled), 17, Family::kIpv6);
  RemoveListener(Pod(disabled), 6, Family::kIpv6);
  EXPECT_TRUE(WithCode(Judge(disabled), FindingCode::kDnsCaptureBroken).empty())
      << Dump(Judge(disabled));
}

TEST(InpodChecksTest, WildcardOrNonZtunnelDnsSockets) {
  // A dual-stack wildcard socket of ztunnel accepts the redirected DNS.
  NodeSnapshot wildcard = ServedNode();
  RemoveListener(Pod(wildcard), 17, Family::kIpv4);
  Pod(wildcard).listeners.push_back(Socket(17, Family::kIpv6, "::", 15053));
  EXPECT_TRUE(Judge(wildcard).findings.empty()) << Dump(Judge(wildcard));
  // Another process's socket on 15053 is not ztunnel's DNS proxy.
  NodeSnapshot foreign = ServedNode();
  RemoveListener(Pod(foreign), 17, Family::kIpv4);
  Pod(foreign).listeners.push_back(Socket(17, Family::kIpv4, "127.0.0.1", 15053, 777));
  EXPECT_EQ(WithCode(Judge(foreign), FindingCode::kDnsCaptureBroken).size(), 1u)
      << Dump(Judge(foreign));
}

TEST(InpodChecksTest, NoJudgementWithoutTheUdpReadOrWithoutZtunnelListeners) {
  // UDP read skipped or failed: absence proves nothing.
  for (ReadStatus status : {ReadStatus::kNotRead, ReadStatus::kFailed}) {
    NodeSnapshot node = ServedNode();
    RemoveListener(Pod(node), 17, Family::kIpv4);
    Pod(node).reads.dns_udp = status;
    EXPECT_TRUE(WithCode(Judge(node), FindingCode::kDnsCaptureBroken).empty()) << Dump(Judge(node));
  }
  // TCP listener read failed.
  NodeSnapshot failed = ServedNode();
  RemoveListener(Pod(failed), 17, Family::kIpv4);
  Pod(failed).reads.listeners = ReadStatus::kFailed;
  EXPECT_TRUE(WithCode(Judge(failed), FindingCode::kDnsCaptureBroken).empty());
  // No ztunnel listener at all: ZTUNNEL_LISTENERS_MISSING only, never both.
  NodeSnapshot none = ServedNode();
  Pod(none).listeners.clear();
  const NodeAnalysis analysis = Judge(none);
  EXPECT_TRUE(WithCode(analysis, FindingCode::kDnsCaptureBroken).empty()) << Dump(analysis);
  EXPECT_EQ(WithCode(analysis, FindingCode::kZtunnelListenersMissing).size(), 1u) << Dump(analysis);
  // Only part of 15001/15006/15008: ZTUNNEL_LISTENERS_MISSING says it, not DNS.
  NodeSnapshot partial = ServedNode();
  std::erase_if(Pod(partial).listeners, [](const ListeningSocket& s) { return s.port != 15001; });
  EXPECT_TRUE(WithCode(Judge(partial), FindingCode::kDnsCaptureBroken).empty())
      << Dump(Judge(partial));
  // A pod without DNS capture needs no DNS listener.
  NodeSnapshot no_dns = ServedNode(Backend::kIptablesNft, kNoDns);
  RemoveListener(Pod(no_dns), 17, Family::kIpv4);
  RemoveListener(Pod(no_dns), 6, Family::kIpv4);
  EXPECT_TRUE(Judge(no_dns).findings.empty()) << Dump(Judge(no_dns));
}

TEST(InpodChecksTest, HalfPresentDnsRules) {
  for (Backend backend : {Backend::kIptablesLegacy, Backend::kIptablesNft, Backend::kNft}) {
    NodeSnapshot node = ServedNode(backend);
    RemoveDnsRedirect(Pod(node), 6, Family::kIpv4);  // udp kept, tcp gone
    const NodeAnalysis analysis = Judge(node);
    const auto found = WithCode(analysis, FindingCode::kDnsCaptureBroken);
    ASSERT_EQ(found.size(), 1u) << BackendName(backend) << "\n" << Dump(analysis);
    EXPECT_EQ(found[0]->subject, "rules");
    EXPECT_TRUE(EvidenceHas(*found[0], "present for udp/ipv4; missing for tcp/ipv4"))
        << Dump(analysis);
    // The generic rule check names the same gap; this one says what it breaks.
    EXPECT_EQ(WithCode(analysis, FindingCode::kIncompleteRuleset).size(), 1u) << Dump(analysis);
  }
  // IPv4 rules with DNS, the IPv6 table without (iptables: one table per family).
  NodeSnapshot v6 = ServedNode(Backend::kIptablesNft, kDnsV6);
  RemoveDnsRedirect(Pod(v6), 17, Family::kIpv6);
  RemoveDnsRedirect(Pod(v6), 6, Family::kIpv6);
  const NodeAnalysis v6_analysis = Judge(v6);
  const auto found = WithCode(v6_analysis, FindingCode::kDnsCaptureBroken);
  ASSERT_EQ(found.size(), 1u) << Dump(v6_analysis);
  EXPECT_TRUE(EvidenceHas(*found[0], "missing for udp/ipv6, tcp/ipv6")) << Dump(v6_analysis);
  // Rules unreadable in one backend: no claim about them.
  NodeSnapshot unreadable = ServedNode();
  RemoveDnsRedirect(Pod(unreadable), 6, Family::kIpv4);
  Pod(unreadable).reads.legacy_v6 = ReadStatus::kFailed;
  const NodeAnalysis unreadable_analysis = Judge(unreadable);
  for (const Finding* f : WithCode(unreadable_analysis, FindingCode::kDnsCaptureBroken)) {
    EXPECT_NE(f->subject, "rules") << Dump(unreadable_analysis);
  }
}

TEST(InpodChecksTest, NoLoopbackV6IsInpodProxyBlocked) {
  NodeSnapshot node = ServedNode();
  MakePending(node);
  RemoveLoopbackV6(Pod(node));
  const NodeAnalysis analysis = Judge(node);
  const auto blocked = WithCode(analysis, FindingCode::kInpodProxyBlocked);
  ASSERT_EQ(blocked.size(), 1u) << Dump(analysis);
  EXPECT_EQ(blocked[0]->severity, Severity::kCritical);
  EXPECT_EQ(blocked[0]->subject, "no ::1 on lo");
  EXPECT_EQ(blocked[0]->pod, "demo/echo");
  EXPECT_TRUE(EvidenceHas(*blocked[0], "lo has no ::1 while IPv6 is enabled")) << Dump(analysis);
  EXPECT_TRUE(EvidenceHas(*blocked[0], "EADDRNOTAVAIL")) << Dump(analysis);
  EXPECT_TRUE(EvidenceHas(*blocked[0], "workloadState[uid-echo] = Pending")) << Dump(analysis);
  // The symptom stays, names its cause and points at it; no DNS finding on top of it.
  const auto pending = WithCode(analysis, FindingCode::kZdsPending);
  ASSERT_FALSE(pending.empty()) << Dump(analysis);
  const Finding* netns_pending = nullptr;
  for (const Finding* f : pending) {
    if (f->netns_inode == kPodInode) netns_pending = f;
  }
  ASSERT_NE(netns_pending, nullptr) << Dump(analysis);
  EXPECT_TRUE(EvidenceHas(*netns_pending, "cause: INPOD_PROXY_BLOCKED (no ::1 on lo)"))
      << Dump(analysis);
  EXPECT_NE(netns_pending->hint.find("INPOD_PROXY_BLOCKED"), std::string::npos);
  EXPECT_TRUE(WithCode(analysis, FindingCode::kDnsCaptureBroken).empty()) << Dump(analysis);
}

TEST(InpodChecksTest, LoopbackDownOrMissing) {
  NodeSnapshot down = ServedNode();
  MakePending(down);
  Pod(down).routing.loopback = {.known = true, .found = true, .up = false, .flags = 0x8};
  RemoveLoopbackV6(Pod(down));  // the kernel drops ::1 with lo
  const NodeAnalysis down_analysis = Judge(down);
  auto blocked = WithCode(down_analysis, FindingCode::kInpodProxyBlocked);
  ASSERT_EQ(blocked.size(), 1u) << Dump(down_analysis);
  EXPECT_EQ(blocked[0]->subject, "lo down");
  EXPECT_TRUE(EvidenceHas(*blocked[0], "lo is down (link flags 0x8")) << Dump(down_analysis);

  NodeSnapshot missing = ServedNode();
  MakePending(missing);
  Pod(missing).routing.loopback = {.known = true, .found = false};
  Pod(missing).routing.addresses.clear();
  const NodeAnalysis missing_analysis = Judge(missing);
  blocked = WithCode(missing_analysis, FindingCode::kInpodProxyBlocked);
  ASSERT_EQ(blocked.size(), 1u) << Dump(missing_analysis);
  EXPECT_EQ(blocked[0]->subject.rfind("no lo", 0), 0u) << blocked[0]->subject;
}

TEST(InpodChecksTest, AbsentProxyWithoutPendingStateStillNamesTheCause) {
  // ztunnel holds the netns, no workloadState, no listener: ZTUNNEL_LISTENERS_MISSING + cause.
  NodeSnapshot node = ServedNode();
  Pod(node).listeners.clear();
  node.ztunnels[0].workload_state.clear();
  RemoveLoopbackV6(Pod(node));
  const NodeAnalysis analysis = Judge(node);
  ASSERT_EQ(WithCode(analysis, FindingCode::kInpodProxyBlocked).size(), 1u) << Dump(analysis);
  const auto missing = WithCode(analysis, FindingCode::kZtunnelListenersMissing);
  ASSERT_EQ(missing.size(), 1u) << Dump(analysis);
  EXPECT_TRUE(EvidenceHas(*missing[0], "cause: INPOD_PROXY_BLOCKED")) << Dump(analysis);
}

TEST(InpodChecksTest, NoBlockWhenServedDisabledOrUnknown) {
  // A served proxy: a missing ::1 did not stop it (an older ztunnel binding v4 only).
  NodeSnapshot served = ServedNode();
  RemoveLoopbackV6(Pod(served));
  EXPECT_TRUE(WithCode(Judge(served), FindingCode::kInpodProxyBlocked).empty());
  // IPv6 disabled in the netns: no ::1 is expected (ztunnel#1611).
  NodeSnapshot disabled = ServedNode();
  MakePending(disabled);
  RemoveLoopbackV6(Pod(disabled));
  Pod(disabled).routing.ipv6_disabled = true;
  EXPECT_TRUE(WithCode(Judge(disabled), FindingCode::kInpodProxyBlocked).empty())
      << Dump(Judge(disabled));
  // The routing read failed, or did not report lo: nothing is judged.
  NodeSnapshot failed = ServedNode();
  MakePending(failed);
  RemoveLoopbackV6(Pod(failed));
  Pod(failed).reads.routes = ReadStatus::kFailed;
  EXPECT_TRUE(WithCode(Judge(failed), FindingCode::kInpodProxyBlocked).empty());
  NodeSnapshot unknown = ServedNode();
  MakePending(unknown);
  RemoveLoopbackV6(Pod(unknown));
  Pod(unknown).routing.loopback = {};
  EXPECT_TRUE(WithCode(Judge(unknown), FindingCode::kInpodProxyBlocked).empty());
  // No ambient rules: not a pod ztunnel should serve here.
  NodeSnapshot plain = ServedNode();
  MakePending(plain);
  RemoveLoopbackV6(Pod(plain));
  Pod(plain).netfilter.tables.clear();
  EXPECT_TRUE(WithCode(Judge(plain), FindingCode::kInpodProxyBlocked).empty());
}

TEST(InpodChecksTest, VanishedNetnsIsUnreadableOnly) {
  NodeSnapshot node = ServedNode();
  MakePending(node);
  Pod(node).unreadable = true;
  Pod(node).netfilter = {};
  Pod(node).routing = {};
  Pod(node).errors.push_back({SourceKind::kNetns, "setns(/run/netns/cni-echo): gone", ENOENT});
  const NodeAnalysis analysis = Judge(node);
  EXPECT_TRUE(WithCode(analysis, FindingCode::kInpodProxyBlocked).empty()) << Dump(analysis);
  EXPECT_TRUE(WithCode(analysis, FindingCode::kDnsCaptureBroken).empty()) << Dump(analysis);
}

TEST(InpodChecksTest, CodesAreInTheTable) {
  for (FindingCode code : {FindingCode::kDnsCaptureBroken, FindingCode::kInpodProxyBlocked}) {
    const FindingCodeInfo& info = FindingCodeDetails(code);
    EXPECT_EQ(info.code, code);
    EXPECT_EQ(info.severity, Severity::kCritical);
    EXPECT_EQ(ParseFindingCode(info.name), code);
  }
}

}  // namespace
}  // namespace ad
