// History (first-seen times across scans) and the finding diff used by `watch`.
#include "analysis/history.h"

#include <gtest/gtest.h>

namespace ad {
namespace {

TEST(History, KeepsFirstSeenWhileObservedAndForgetsTheRest) {
  History history;
  history.BeginScan(1000);
  EXPECT_EQ(history.Observe("pending:1"), 1000);
  EXPECT_EQ(history.Observe("pending:1"), 1000) << "twice in one scan";
  history.EndScan();

  history.BeginScan(6000);
  EXPECT_EQ(history.Observe("pending:1"), 1000);
  EXPECT_EQ(history.Observe("not-ready:7"), 6000);
  history.EndScan();
  EXPECT_EQ(history.size(), 2u);

  history.BeginScan(11000);
  EXPECT_EQ(history.Observe("not-ready:7"), 6000);
  history.EndScan();
  EXPECT_FALSE(history.FirstSeen("pending:1").has_value()) << "not seen in the latest scan";
  EXPECT_EQ(history.FirstSeen("not-ready:7"), 6000);

  history.BeginScan(16000);
  EXPECT_EQ(history.Observe("pending:1"), 16000) << "a recurrence starts a fresh age";
  history.EndScan();
}

Finding MakeFinding(std::string code, uint64_t inode, std::string evidence = "") {
  Finding finding;
  finding.code = *ParseFindingCode(code);
  finding.netns_inode = inode;
  finding.netns_path = "/run/netns/x" + std::to_string(inode);
  finding.summary = "summary";
  if (!evidence.empty()) finding.evidence = {std::move(evidence)};
  return finding;
}

TEST(FindingDiff, OpenedAndResolvedByIdentityNotEvidence) {
  const std::vector<Finding> before = {MakeFinding("ZDS_PENDING", 1, "age 5 s"),
                                       MakeFinding("MULTIPLE_ZTUNNELS", 2)};
  const std::vector<Finding> after = {MakeFinding("ZDS_STALL", 1, "age 30 s"),
                                      MakeFinding("MULTIPLE_ZTUNNELS", 2)};
  const std::vector<FindingChange> changes = DiffFindings(before, after);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].kind, FindingChange::Kind::kResolved);
  EXPECT_EQ(std::string(changes[0].finding.code_name()), "ZDS_PENDING");
  EXPECT_EQ(changes[1].kind, FindingChange::Kind::kOpened);
  EXPECT_EQ(std::string(changes[1].finding.code_name()), "ZDS_STALL");

  EXPECT_TRUE(DiffFindings(after, after).empty());
  const std::vector<Finding> older = {MakeFinding("ZDS_STALL", 1, "age 35 s"),
                                      MakeFinding("MULTIPLE_ZTUNNELS", 2)};
  EXPECT_TRUE(DiffFindings(after, older).empty()) << "growing older is not a change";
  EXPECT_EQ(DiffFindings({}, after).size(), 2u);
}

// What changes without the condition changing must not resolve and reopen a finding: the pod
// name (CRI outage), the /proc/<pid> path (the pid behind a /proc-only netns), the summary text
// and the evidence.
TEST(FindingDiff, IdentityIgnoresPodPathSummaryAndEvidence) {
  Finding before = MakeFinding("INCOMPLETE_RULESET", 7);
  before.subject = "iptables-nft";
  before.pod = "demo/echo";
  before.netns_path = "/proc/4242/ns/net";
  before.summary = "Istio ambient redirection is incomplete: netns /proc/4242/ns/net (inode 7)";
  Finding after = before;
  after.pod = "";  // CRI down: the pod is no longer named
  after.netns_path = "/proc/4343/ns/net";
  after.summary = "Istio ambient redirection is incomplete: netns /proc/4343/ns/net (inode 7)";
  after.evidence = {"iptables-nft ipv4 nat ISTIO_OUTPUT: missing -A ..."};
  EXPECT_TRUE(DiffFindings({before}, {after}).empty());
  EXPECT_EQ(FindingIdentity(before), FindingIdentity(after));

  Finding other_subject = after;
  other_subject.subject = "nft";
  EXPECT_EQ(DiffFindings({before}, {other_subject}).size(), 2u);
  Finding other_netns = after;
  other_netns.netns_inode = 8;
  EXPECT_EQ(DiffFindings({before}, {other_netns}).size(), 2u);
}

TEST(FindingHistory, FirstSeenLastSeenAndResolvedRing) {
  FindingHistory history(/*resolved_capacity=*/2);
  const Finding a = MakeFinding("ZDS_STALL", 1);
  const Finding b = MakeFinding("MULTIPLE_ZTUNNELS", 2);
  auto records = history.Apply({a, b}, 1000);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].first_seen_unix_ms, 1000);
  Finding a_updated = a;
  a_updated.evidence = {"more evidence"};
  records = history.Apply({a_updated}, 6000);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].first_seen_unix_ms, 1000) << "the same identity keeps its age";
  EXPECT_EQ(records[0].last_seen_unix_ms, 6000);
  EXPECT_EQ(records[0].finding.evidence, a_updated.evidence) << "the latest version is kept";
  ASSERT_EQ(history.resolved().size(), 1u);
  EXPECT_EQ(history.resolved()[0].finding.code, FindingCode::kMultipleZtunnels);
  EXPECT_EQ(history.resolved()[0].resolved_at_unix_ms, 6000);
  EXPECT_EQ(history.resolved()[0].last_seen_unix_ms, 1000);

  (void)history.Apply({}, 7000);   // a resolves
  (void)history.Apply({b}, 8000);  // b reopens: a fresh age
  (void)history.Apply({}, 9000);   // b resolves again
  EXPECT_EQ(history.open_count(), 0u);
  ASSERT_EQ(history.resolved().size(), 2u) << "bounded";
  EXPECT_EQ(history.resolved_dropped(), 1u) << "and the loss is counted";
  EXPECT_EQ(history.resolved()[1].first_seen_unix_ms, 8000);
}

TEST(FindingHistory, ResolvedFindingsKeepBoundedEvidence) {
  FindingHistory history(/*resolved_capacity=*/10);
  Finding long_one = MakeFinding("PROBE_SNAT_MISSING", 3);
  for (int i = 0; i < 40; ++i) long_one.evidence.push_back("pod IP 10.0.0." + std::to_string(i));
  long_one.evidence[0] = std::string(1000, 'x');
  const Finding short_one = MakeFinding("ZDS_PENDING", 4, "one line");
  auto records = history.Apply({long_one, short_one}, 1000);
  EXPECT_EQ(records[0].finding.evidence.size(), 40u) << "an open finding keeps all its evidence";

  (void)history.Apply({}, 2000);
  ASSERT_EQ(history.resolved().size(), 2u);
  const Finding* compacted = nullptr;
  const Finding* untouched = nullptr;
  for (const FindingRecord& record : history.resolved()) {
    (record.finding.netns_inode == 3 ? compacted : untouched) = &record.finding;
  }
  ASSERT_NE(compacted, nullptr);
  ASSERT_NE(untouched, nullptr);
  ASSERT_EQ(compacted->evidence.size(), kResolvedEvidenceLines);
  EXPECT_EQ(compacted->evidence.back(), "… 33 more evidence lines (not kept once resolved)")
      << "the loss is visible";
  EXPECT_LE(compacted->evidence[0].size(), kResolvedEvidenceLineBytes);
  EXPECT_TRUE(compacted->evidence[0].ends_with("…"));
  EXPECT_EQ(compacted->evidence[1], "pod IP 10.0.0.1");
  EXPECT_EQ(untouched->evidence, std::vector<std::string>{"one line"});
}

TEST(FindingHistory, CompactingNeverSplitsAUtf8Character) {
  Finding finding;
  finding.evidence = {std::string(kResolvedEvidenceLineBytes - 4, 'a') + "ééééé"};
  CompactResolvedEvidence(finding);
  const std::string& line = finding.evidence[0];
  EXPECT_LE(line.size(), kResolvedEvidenceLineBytes);
  ASSERT_TRUE(line.ends_with("…"));
  const std::string body = line.substr(0, line.size() - std::string("…").size());
  EXPECT_TRUE(body.ends_with('a') || body.ends_with("é")) << "cut on a character boundary";
}

TEST(FindingHistory, OpenRecordsForgetRemovedNetns) {
  FindingHistory history(/*resolved_capacity=*/5);
  // A churned pod's findings resolve when its netns goes; nothing of it stays open.
  for (uint64_t inode = 100; inode < 150; ++inode) {
    (void)history.Apply({MakeFinding("ZDS_PENDING", inode)}, static_cast<int64_t>(inode));
  }
  (void)history.Apply({}, 1000);
  EXPECT_EQ(history.open_count(), 0u);
  EXPECT_EQ(history.resolved().size(), 5u);
  EXPECT_EQ(history.resolved_dropped(), 45u);
}

}  // namespace
}  // namespace ad
