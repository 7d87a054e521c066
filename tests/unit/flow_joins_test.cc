// The daemon's flow joins (netns -> pod, destination -> same-node or remote), the check window and
// the flow findings over a view; and the flow hub's event ring.
#include "flows/flow_joins.h"

#include <gtest/gtest.h>

#include "flows/flow_hub.h"

namespace ad {
namespace {

constexpr int64_t kNowNs = 1'700'000'000'000'000'000;
constexpr int64_t kSecondNs = 1'000'000'000;

FlowAddress V4(const std::string& text) { return *ParseFlowAddress(text); }

NetnsSnapshot Netns(uint64_t inode, const std::string& path, const std::string& ip,
                    bool host = false) {
  NetnsSnapshot netns;
  netns.netns.inode = inode;
  netns.netns.paths = {path};
  netns.netns.is_host = host;
  netns.routing.addresses.push_back({.ifname = "eth0", .address = ip, .global_scope = true});
  netns.routing.addresses.push_back({.ifname = "lo", .address = "127.0.0.1"});
  return netns;
}

NetnsClassification Classified(uint64_t inode, const std::string& pod, DataplaneMode mode) {
  NetnsClassification c;
  c.netns_inode = inode;
  c.pod = pod;
  c.mode = mode;
  return c;
}

Flow Client(uint32_t netns, const std::string& dst, FlowOutcome outcome, int64_t ended_ns) {
  Flow flow;
  flow.netns_inode = netns;
  flow.role = FlowRole::kClient;
  flow.tuple.src = V4("10.1.0.1");
  flow.tuple.src_port = 40000;
  flow.tuple.dst = V4(dst);
  flow.tuple.dst_port = 15008;
  flow.outcome = outcome;
  flow.ended_unix_ns = ended_ns;
  return flow;
}

TEST(FlowJoins, ParsesBothFamiliesAndRefusesGarbage) {
  EXPECT_EQ(V4("10.0.0.1").ToString(), "10.0.0.1");
  auto v6 = ParseFlowAddress("fd00::1");
  ASSERT_TRUE(v6.has_value());
  EXPECT_TRUE(v6->ipv6);
  EXPECT_EQ(v6->ToString(), "fd00::1");
  EXPECT_FALSE(ParseFlowAddress("").has_value());
  EXPECT_FALSE(ParseFlowAddress("10.0.0.300").has_value());
  EXPECT_FALSE(ParseFlowAddress("not an address").has_value());
}

TEST(FlowJoins, PodIpsOfPodNetnsAreSameNodeAndPodsAreNamed) {
  NodeSnapshot snapshot;
  snapshot.netns = {Netns(1, "/proc/1/ns/net", "192.168.1.10", /*host=*/true),
                    Netns(10, "/run/netns/a", "10.1.0.1"), Netns(11, "/run/netns/b", "10.1.0.2"),
                    Netns(12, "/run/netns/c", "10.1.0.3")};
  const std::vector<NetnsClassification> classified = {
      Classified(1, "", DataplaneMode::kNone), Classified(10, "demo/a", DataplaneMode::kAmbient),
      Classified(11, "demo/b", DataplaneMode::kNone), Classified(12, "", DataplaneMode::kNone)};
  FlowCheckContext context = FlowContextOf(snapshot, classified);
  EXPECT_EQ(context.node_addresses,
            (std::set<FlowAddress>{V4("10.1.0.1"), V4("10.1.0.2"), V4("10.1.0.3")}))
      << "the host's own address and loopback are not pod IPs";
  EXPECT_EQ(context.pods.at(10), "demo/a");
  EXPECT_EQ(context.pods.at(11), "demo/b");
  EXPECT_FALSE(context.pods.contains(12)) << "no pod name, no entry";
  EXPECT_EQ(context.netns_paths.at(11), "/run/netns/b");
  EXPECT_EQ(context.ambient_netns, std::set<uint32_t>{10});

  // Handed off to ztunnel counts as ambient too (rules may be what broke).
  NetnsClassification handed = Classified(11, "demo/b", DataplaneMode::kNone);
  handed.zds_state = ZdsState::kHandedOff;
  EXPECT_TRUE(FlowContextOf(snapshot, {handed}).ambient_netns.contains(11));
  // So does a netns ztunnel serves (its in-pod listeners), whatever its rules say.
  NetnsClassification served = Classified(12, "", DataplaneMode::kNone);
  served.ztunnel_listeners = {15001, 15006, 15008};
  EXPECT_TRUE(FlowContextOf(snapshot, {served}).ambient_netns.contains(12));
}

TEST(FlowJoins, WindowKeepsOpenFlowsAndRecentlyClosedOnes) {
  FlowTableView view;
  view.open.push_back(Client(10, "10.1.0.2", FlowOutcome::kOpen, 0));
  view.closed.push_back(Client(10, "10.1.0.2", FlowOutcome::kRefused, kNowNs - 600 * kSecondNs));
  view.closed.push_back(Client(10, "10.1.0.2", FlowOutcome::kRefused, kNowNs - 10 * kSecondNs));
  const std::vector<Flow> flows = FlowsInWindow(view, kNowNs, std::chrono::minutes(5));
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(flows[0].outcome, FlowOutcome::kOpen);
  EXPECT_EQ(flows[1].ended_unix_ns, kNowNs - 10 * kSecondNs);
}

TEST(FlowJoins, FindingsSplitSameNodeAndRemoteFailures) {
  NodeSnapshot snapshot;
  snapshot.netns = {Netns(10, "/run/netns/a", "10.1.0.1"), Netns(11, "/run/netns/b", "10.1.0.2")};
  const FlowCheckContext context =
      FlowContextOf(snapshot, {Classified(10, "demo/a", DataplaneMode::kAmbient)});
  FlowTableView view;
  for (int i = 0; i < 4; ++i) {
    view.closed.push_back(Client(10, "10.1.0.2", FlowOutcome::kRefused, kNowNs - kSecondNs));
    view.closed.push_back(Client(10, "10.9.9.9", FlowOutcome::kTimeout, kNowNs - kSecondNs));
  }
  FlowTracerStatus status{.enabled = true, .available = true, .attach_mode = "tp_btf"};
  std::vector<Finding> findings = FlowFindings(status, view, context, kNowNs);
  ASSERT_EQ(findings.size(), 2u);
  std::set<std::string> subjects;
  for (const Finding& f : findings) {
    EXPECT_EQ(f.code, FindingCode::kHboneConnectFailures);
    EXPECT_EQ(f.pod, "demo/a");
    EXPECT_EQ(f.netns_path, "/run/netns/a");
    subjects.insert(f.subject);
  }
  EXPECT_EQ(subjects, (std::set<std::string>{"same-node", "remote"}));

  // Old failures leave the window: the finding resolves.
  EXPECT_TRUE(FlowFindings(status, view, context, kNowNs + 3600 * kSecondNs).empty());
}

TEST(FlowJoins, UnavailableTracerIsOneInfoFindingWithTheReasonAndDisabledIsNone) {
  FlowTracerStatus status{.enabled = true, .available = false, .reason = "no kernel BTF at /x"};
  std::vector<Finding> findings = FlowFindings(status, {}, {}, kNowNs);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].code, FindingCode::kTracingUnavailable);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  ASSERT_EQ(findings[0].evidence.size(), 1u);
  EXPECT_EQ(findings[0].evidence[0], "no kernel BTF at /x");
  EXPECT_TRUE(FlowFindings(FlowTracerStatus{}, {}, {}, kNowNs).empty()) << "--no-flows";
}

TEST(FlowHub, EventsAreSequencedAndAReaderBehindTheRingSeesAGap) {
  FlowHub hub(4);
  EXPECT_EQ(hub.Latest().sequence, 0u);
  ASSERT_NE(hub.Latest().view, nullptr);
  std::vector<FlowEvent> three(3);
  FlowTableView view;
  view.open.push_back(Client(10, "10.1.0.2", FlowOutcome::kOpen, 0));
  hub.Publish(three, view);
  EXPECT_EQ(hub.Latest().sequence, 3u);
  EXPECT_EQ(hub.Latest().view->open.size(), 1u);
  FlowHub::Since since = hub.WaitSince(1, std::chrono::milliseconds(0));
  EXPECT_FALSE(since.gap);
  EXPECT_EQ(since.events.size(), 2u);
  EXPECT_EQ(since.last_sequence, 3u);
  since = hub.WaitSince(3, std::chrono::milliseconds(0));
  EXPECT_TRUE(since.events.empty());
  EXPECT_EQ(since.last_sequence, 3u);

  hub.Publish(std::vector<FlowEvent>(3), view);  // 6 events, the ring keeps 3..6
  EXPECT_FALSE(hub.Behind(2));
  EXPECT_TRUE(hub.Behind(1));
  EXPECT_TRUE(hub.WaitSince(1, std::chrono::milliseconds(0)).gap);
  EXPECT_EQ(hub.WaitSince(2, std::chrono::milliseconds(0)).events.size(), 4u);

  hub.Stop();
  EXPECT_TRUE(hub.WaitSince(6, std::chrono::seconds(10)).stopped) << "returns at once";
}

}  // namespace
}  // namespace ad
