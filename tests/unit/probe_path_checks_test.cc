// PROBE_PATH_BROKEN on hand-built snapshots: persistence across scans (History) and by the kernel's
// entry age, the SNAT guard (PROBE_SNAT_MISSING explains it instead), non-enrolled IPs, replied or
// established entries, and a failed conntrack read (no finding).
#include <gtest/gtest.h>

#include "analysis/analysis.h"
#include "analysis_fixtures.h"

namespace ad {
namespace {

using test::Codes;
using test::Dump;

constexpr AmbientVariant kDefault{.dns_capture = true};
constexpr uint64_t kPodInode = 4026532001;
constexpr char kPodIp[] = "10.244.0.5";

ProbeConntrackEntry Unreplied(const std::string& pod_ip, uint16_t sport, uint32_t timeout_s) {
  ProbeConntrackEntry entry;
  entry.orig_src = "10.244.0.1";
  entry.orig_dst = pod_ip;
  entry.orig_sport = sport;
  entry.orig_dport = 8080;
  entry.reply_src = pod_ip;
  entry.reply_dst = "169.254.7.127";
  entry.reply_sport = 8080;
  entry.reply_dport = sport;
  entry.tcp_state = 1;  // SYN_SENT
  entry.status = 0x8;   // IPS_CONFIRMED, not IPS_SEEN_REPLY
  entry.timeout_s = timeout_s;
  return entry;
}

NodeSnapshot Node(std::vector<ProbeConntrackEntry> entries, int64_t now_ms = 1'000'000) {
  NodeSnapshot node;
  node.taken_at_unix_ms = now_ms;
  node.netns.push_back(test::HealthyHost(Backend::kIptablesNft, false, {kPodIp, "10.244.0.6"}));
  node.netns.push_back(
      test::HealthyPod("/run/netns/pod-a", kPodInode, Backend::kIptablesNft, kDefault, kPodIp));
  node.netns.push_back(test::HealthyPod("/run/netns/pod-b", 4026532002, Backend::kIptablesNft,
                                        kDefault, "10.244.0.6"));
  node.probe_conntrack.collected = true;
  node.probe_conntrack.filter = "kernel";
  node.probe_conntrack.syn_sent_timeout_s = 120;
  node.probe_conntrack.matched = entries.size();
  node.probe_conntrack.entries = std::move(entries);
  return node;
}

TEST(ProbePathChecks, HealthyNodeWithoutEntriesHasNoFinding) {
  EXPECT_TRUE(Analyze(Node({})).findings.empty()) << Dump(Analyze(Node({})));
}

TEST(ProbePathChecks, FreshUnrepliedEntryInOneScanIsNormal) {
  // 119 s of 120 left: the SYN went out a second ago; a one-shot report must not judge that.
  const NodeAnalysis analysis = Analyze(Node({Unreplied(kPodIp, 40000, 119)}));
  EXPECT_TRUE(analysis.findings.empty()) << Dump(analysis);
}

TEST(ProbePathChecks, KernelAgePastThresholdGivesFindingInOneShot) {
  const NodeAnalysis analysis =
      Analyze(Node({Unreplied(kPodIp, 40000, 100), Unreplied(kPodIp, 40002, 118)}));
  ASSERT_EQ(Codes(analysis), std::vector<std::string>{"PROBE_PATH_BROKEN"}) << Dump(analysis);
  const Finding& finding = analysis.findings[0];
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.netns_path, "/run/netns/pod-a");
  EXPECT_EQ(finding.netns_inode, kPodInode);
  EXPECT_EQ(finding.subject, "probe replies");
  EXPECT_EQ(finding.since_unix_ms, 1'000'000 - 20'000);
  const std::string text = Dump(analysis);
  EXPECT_NE(text.find("pod IP 10.244.0.5: 2 probe connection(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("oldest entry waiting 20 s (100 s of the 120 s SYN_SENT timeout left)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tcp 10.244.0.1:40000 -> 10.244.0.5:8080, reply 10.244.0.5:8080 -> "
                      "169.254.7.127:40000 SYN_SENT [UNREPLIED] timeout 100 s"),
            std::string::npos)
      << text;
}

TEST(ProbePathChecks, ConntrackTimestampIsPreferredOverTimeout) {
  ProbeConntrackEntry entry = Unreplied(kPodIp, 40000, 119);  // refreshed by a retransmit
  entry.start_unix_ms = 1'000'000 - 30'000;
  const NodeAnalysis analysis = Analyze(Node({entry}));
  ASSERT_EQ(Codes(analysis), std::vector<std::string>{"PROBE_PATH_BROKEN"}) << Dump(analysis);
  EXPECT_NE(Dump(analysis).find("waiting 30 s (conntrack timestamp)"), std::string::npos);
}

TEST(ProbePathChecks, PersistenceAcrossScansOpensAfterThreshold) {
  History history;
  AnalysisOptions options;
  // Each scan sees a fresh entry (new probes), never an old one: only the history can tell.
  NodeAnalysis first = Analyze(Node({Unreplied(kPodIp, 40000, 119)}, 1'000'000), options, &history);
  EXPECT_TRUE(first.findings.empty()) << Dump(first);
  NodeAnalysis second =
      Analyze(Node({Unreplied(kPodIp, 40002, 119)}, 1'005'000), options, &history);
  EXPECT_TRUE(second.findings.empty()) << "5 s < 10 s threshold\n" << Dump(second);
  NodeAnalysis third = Analyze(Node({Unreplied(kPodIp, 40004, 119)}, 1'010'000), options, &history);
  ASSERT_EQ(Codes(third), std::vector<std::string>{"PROBE_PATH_BROKEN"}) << Dump(third);
  EXPECT_EQ(third.findings[0].since_unix_ms, 1'000'000);
  EXPECT_NE(Dump(third).find("seen in every scan for 10 s"), std::string::npos) << Dump(third);

  // A scan without entries forgets the age: the next sighting starts again.
  NodeAnalysis clear = Analyze(Node({}, 1'015'000), options, &history);
  EXPECT_TRUE(clear.findings.empty());
  NodeAnalysis again = Analyze(Node({Unreplied(kPodIp, 40006, 119)}, 1'020'000), options, &history);
  EXPECT_TRUE(again.findings.empty()) << Dump(again);
}

TEST(ProbePathChecks, ThresholdIsConfigurable) {
  AnalysisOptions options;
  options.probe_path_threshold_ms = 2000;
  const NodeAnalysis analysis = Analyze(Node({Unreplied(kPodIp, 40000, 117)}), options);
  EXPECT_EQ(Codes(analysis), std::vector<std::string>{"PROBE_PATH_BROKEN"}) << Dump(analysis);
}

TEST(ProbePathChecks, RepliedEstablishedAndForeignEntriesAreIgnored) {
  ProbeConntrackEntry replied = Unreplied(kPodIp, 40000, 10);
  replied.status |= 0x2;  // IPS_SEEN_REPLY
  ProbeConntrackEntry established = Unreplied(kPodIp, 40002, 10);
  established.tcp_state = 3;
  ProbeConntrackEntry not_a_pod = Unreplied("10.99.0.1", 40004, 10);  // no enrolled pod has it
  const NodeAnalysis analysis = Analyze(Node({replied, established, not_a_pod}));
  EXPECT_TRUE(analysis.findings.empty()) << Dump(analysis);
}

TEST(ProbePathChecks, OneFindingPerPod) {
  const NodeAnalysis analysis =
      Analyze(Node({Unreplied(kPodIp, 40000, 50), Unreplied("10.244.0.6", 40001, 50),
                    Unreplied(kPodIp, 40002, 50)}));
  ASSERT_EQ(Codes(analysis), (std::vector<std::string>{"PROBE_PATH_BROKEN", "PROBE_PATH_BROKEN"}))
      << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].netns_path, "/run/netns/pod-a");
  EXPECT_EQ(analysis.findings[1].netns_path, "/run/netns/pod-b");
}

TEST(ProbePathChecks, BrokenSnatIsReportedOnceAsProbeSnatMissing) {
  // Pod IP not in the probe set: PROBE_SNAT_MISSING names the cause, no second finding.
  NodeSnapshot node = Node({Unreplied(kPodIp, 40000, 50)});
  node.netns[0] = test::HealthyHost(Backend::kIptablesNft, false, {"10.244.0.6"});
  NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(Codes(analysis), std::vector<std::string>{"PROBE_SNAT_MISSING"}) << Dump(analysis);

  // The host SNAT rule gone: the same.
  node = Node({Unreplied(kPodIp, 40000, 50)});
  for (Table& table : node.netns[0].netfilter.tables) {
    for (Chain& chain : table.chains) {
      if (chain.name == "ISTIO_POSTRT") chain.rules.clear();
    }
  }
  analysis = Analyze(node);
  EXPECT_EQ(Codes(analysis), std::vector<std::string>{"PROBE_SNAT_MISSING"}) << Dump(analysis);
}

TEST(ProbePathChecks, FailedReadIsNoFinding) {
  NodeSnapshot node = Node({Unreplied(kPodIp, 40000, 50)});
  node.probe_conntrack.errors.push_back(
      {SourceKind::kConntrack, "ctnetlink dump (ipv4): Operation not supported", 95});
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_TRUE(analysis.findings.empty()) << Dump(analysis);
}

TEST(ProbePathChecks, TruncatedDumpSaysSo) {
  NodeSnapshot node = Node({Unreplied(kPodIp, 40000, 50)});
  node.probe_conntrack.truncated = true;
  node.probe_conntrack.matched = 5000;
  const NodeAnalysis analysis = Analyze(node);
  ASSERT_EQ(Codes(analysis), std::vector<std::string>{"PROBE_PATH_BROKEN"}) << Dump(analysis);
  EXPECT_NE(Dump(analysis).find("conntrack dump cut at its bound (5000 matched, 1 kept)"),
            std::string::npos)
      << Dump(analysis);
}

TEST(ProbePathChecks, ManyEntriesQuoteFiveTuples) {
  std::vector<ProbeConntrackEntry> entries;
  for (uint16_t i = 0; i < 40; ++i) entries.push_back(Unreplied(kPodIp, 40000 + i, 50));
  const NodeAnalysis analysis = Analyze(Node(entries));
  ASSERT_EQ(analysis.findings.size(), 1u) << Dump(analysis);
  EXPECT_NE(Dump(analysis).find("… 35 more"), std::string::npos) << Dump(analysis);
  EXPECT_NE(analysis.findings[0].summary.find("40 kubelet probe connection(s)"), std::string::npos);
}

TEST(ProbePathChecks, ConntrackStateEqualityIgnoresCost) {
  ProbeConntrackState a;
  a.collected = true;
  ProbeConntrackState b = a;
  b.dump_ms = 3.5;
  b.examined = 100000;
  EXPECT_EQ(a, b) << "a quiet poll must compare equal (daemon idle footprint)";
  b.entries.push_back(Unreplied(kPodIp, 1, 2));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace ad
