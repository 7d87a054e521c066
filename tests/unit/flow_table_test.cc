// The flow tracer's pure side: decoding of raw ring-buffer records (bpf/hbone_flows.h), outcome
// classification from what the kernel leaves on a closing socket, and the flow table (open flows,
// bounded closed ring, aggregates, live refresh). No root, no kernel.
#include "flows/flow_table.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "flows/flow.h"
#include "hbone_flows.h"

namespace ad {
namespace {

constexpr uint8_t kEstablished = 1;
constexpr uint8_t kSynSent = 2;
constexpr uint8_t kFinWait2 = 5;
constexpr uint8_t kLastAck = 9;

hbone_flow_event RawClient(uint64_t id) {
  hbone_flow_event raw{};
  raw.flow_id = id;
  raw.kind = HBONE_EVENT_OPEN;
  raw.role = HBONE_ROLE_CLIENT;
  raw.family = 2;
  const uint8_t src[4] = {10, 200, 0, 2};
  const uint8_t dst[4] = {10, 200, 0, 1};
  std::memcpy(raw.saddr, src, 4);
  std::memcpy(raw.daddr, dst, 4);
  raw.sport = 40000;
  raw.dport = 15008;
  raw.netns_inode = 4026532245;
  raw.start_ns = 1'000'000;
  raw.established_ns = 1'250'000;
  raw.states_seen = (1 << kSynSent) | (1 << kEstablished);
  raw.flags = HBONE_FLAG_REAL_COOKIE;
  return raw;
}

std::vector<uint8_t> Bytes(const hbone_flow_event& raw) {
  const auto* p = reinterpret_cast<const uint8_t*>(&raw);
  return std::vector<uint8_t>(p, p + sizeof(raw));
}

FlowEvent Decode(const hbone_flow_event& raw, int64_t offset = 0) {
  Result<FlowEvent> event = DecodeFlowEvent(Bytes(raw), offset);
  EXPECT_TRUE(event.ok()) << event.error().message;
  return event.ok() ? *event : FlowEvent{};
}

TEST(FlowEventDecode, OpenEventCarriesTupleNetnsAndLatency) {
  FlowEvent event = Decode(RawClient(7), 1'000'000'000);
  EXPECT_EQ(event.kind, FlowEventKind::kOpen);
  EXPECT_EQ(event.flow.flow_id, 7u);
  EXPECT_TRUE(event.flow.cookie_known);
  EXPECT_EQ(event.flow.tuple.src.ToString(), "10.200.0.2");
  EXPECT_EQ(event.flow.tuple.dst.ToString(), "10.200.0.1");
  EXPECT_EQ(event.flow.tuple.dst_port, 15008);
  EXPECT_EQ(event.flow.netns_inode, 4026532245u);
  EXPECT_EQ(event.flow.outcome, FlowOutcome::kOpen);
  EXPECT_EQ(event.flow.started_unix_ns, 1'001'000'000);
  ASSERT_TRUE(event.flow.ConnectLatencyUs().has_value());
  EXPECT_EQ(*event.flow.ConnectLatencyUs(), 250);
}

TEST(FlowEventDecode, V4MappedAndNativeIpv6) {
  hbone_flow_event raw = RawClient(1);
  raw.family = 10;
  const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  std::memcpy(raw.daddr, mapped, 16);
  const uint8_t v6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  std::memcpy(raw.saddr, v6, 16);
  FlowEvent event = Decode(raw);
  EXPECT_FALSE(event.flow.tuple.dst.ipv6);
  EXPECT_EQ(event.flow.tuple.dst.ToString(), "192.0.2.1");
  EXPECT_TRUE(event.flow.tuple.src.ipv6);
  EXPECT_EQ(event.flow.tuple.src.ToString(), "fd00::1");
}

TEST(FlowEventDecode, BadRecordsAreErrorsNotCrashes) {
  std::vector<uint8_t> bytes = Bytes(RawClient(1));
  for (size_t size : {size_t{0}, size_t{1}, bytes.size() - 1}) {
    Result<FlowEvent> event = DecodeFlowEvent(std::span(bytes.data(), size), 0);
    ASSERT_FALSE(event.ok());
    EXPECT_EQ(event.error().kind, SourceKind::kTracing);
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(DecodeFlowEvent(longer, 0).ok());
  hbone_flow_event raw = RawClient(1);
  raw.kind = 9;
  EXPECT_FALSE(DecodeFlowEvent(Bytes(raw), 0).ok());
  raw = RawClient(1);
  raw.role = 0;
  EXPECT_FALSE(DecodeFlowEvent(Bytes(raw), 0).ok());
  raw = RawClient(1);
  raw.family = 1;
  EXPECT_FALSE(DecodeFlowEvent(Bytes(raw), 0).ok());
}

TEST(FlowEventDecode, FinIsTakenOutOfReceivedBytes) {
  hbone_flow_event raw = RawClient(1);
  raw.kind = HBONE_EVENT_CLOSE;
  raw.bytes_received = 3001;
  raw.bytes_sent = 5000;
  raw.flags |= HBONE_FLAG_FIN_RECEIVED;
  raw.last_state = kFinWait2;
  FlowEvent event = Decode(raw);
  EXPECT_EQ(event.flow.bytes_received, 3000u);
  EXPECT_EQ(event.flow.bytes_sent, 5000u);
  EXPECT_EQ(event.flow.outcome, FlowOutcome::kClosed);
}

TEST(FlowOutcome, ClassifiesWhatTheKernelLeft) {
  // Established, orderly close.
  EXPECT_EQ(ClassifyClose(true, 0, kLastAck, 0, 0, 0, 0), FlowOutcome::kClosed);
  EXPECT_EQ(ClassifyClose(true, 0, kFinWait2, 0, 0, 0, 0), FlowOutcome::kClosed);
  // Reset by the peer, or aborted locally (SO_LINGER 0: straight from ESTABLISHED).
  EXPECT_EQ(ClassifyClose(true, 0, kEstablished, ECONNRESET, 1, 0, 0), FlowOutcome::kReset);
  EXPECT_EQ(ClassifyClose(true, 0, kEstablished, 0, 0, 0, 0), FlowOutcome::kReset);
  // SYN answered by RST; SYN never answered; closed while connecting.
  EXPECT_EQ(ClassifyClose(false, 0, kSynSent, ECONNREFUSED, 1, 0, 0), FlowOutcome::kRefused);
  EXPECT_EQ(ClassifyClose(false, 0, kSynSent, ETIMEDOUT, 0, 0, 2), FlowOutcome::kTimeout);
  EXPECT_EQ(ClassifyClose(false, 0, kSynSent, 0, 0, 0, 3), FlowOutcome::kTimeout);
  EXPECT_EQ(ClassifyClose(false, 0, kSynSent, 0, 0, 0, 0), FlowOutcome::kAborted);
  EXPECT_EQ(ClassifyClose(false, 0, kSynSent, EHOSTUNREACH, 0, 0, 1), FlowOutcome::kUnreachable);
  // Data retransmitted until the kernel gave up.
  EXPECT_EQ(ClassifyClose(true, 0, kEstablished, ETIMEDOUT, 0, 0, 15), FlowOutcome::kTimeout);
  EXPECT_TRUE(IsFailedOutcome(FlowOutcome::kRefused));
  EXPECT_FALSE(IsFailedOutcome(FlowOutcome::kClosed));
  EXPECT_FALSE(IsFailedOutcome(FlowOutcome::kAborted));
  for (const char* name :
       {"open", "connecting", "closed", "refused", "reset", "timeout", "unreachable", "aborted"}) {
    ASSERT_TRUE(ParseFlowOutcome(name).has_value()) << name;
    EXPECT_EQ(FlowOutcomeName(*ParseFlowOutcome(name)), name);
  }
  EXPECT_FALSE(ParseFlowOutcome("failed").has_value());
}

Flow MakeFlow(uint64_t id, FlowOutcome outcome, uint8_t last_octet = 1) {
  Flow flow;
  flow.flow_id = id;
  flow.netns_inode = 100;
  flow.tuple.src.bytes = {10, 0, 0, 2};
  flow.tuple.dst.bytes = {10, 0, 0, last_octet};
  flow.tuple.src_port = static_cast<uint16_t>(40000 + id);
  flow.tuple.dst_port = 15008;
  flow.outcome = outcome;
  flow.started_unix_ns = static_cast<int64_t>(id) * 1000;
  return flow;
}

TEST(FlowTable, OpenThenCloseMovesTheFlowAndAggregates) {
  FlowTable table;
  Flow open = MakeFlow(1, FlowOutcome::kOpen);
  open.established_unix_ns = open.started_unix_ns + 500'000;
  table.Apply({FlowEventKind::kOpen, open});
  EXPECT_EQ(table.open_count(), 1u);
  FlowTableView view = table.View();
  ASSERT_EQ(view.by_netns.size(), 1u);
  EXPECT_EQ(view.by_netns[0].client.opened, 1u);
  EXPECT_EQ(view.by_netns[0].client.open, 1u);

  Flow closed = open;
  closed.outcome = FlowOutcome::kClosed;
  closed.bytes_sent = 5000;
  closed.bytes_received = 3000;
  table.Apply({FlowEventKind::kClose, closed});
  EXPECT_EQ(table.open_count(), 0u);
  view = table.View();
  ASSERT_EQ(view.closed.size(), 1u);
  EXPECT_EQ(view.by_netns[0].client.opened, 1u);
  EXPECT_EQ(view.by_netns[0].client.open, 0u);
  EXPECT_EQ(view.by_netns[0].client.closed.at(FlowOutcome::kClosed), 1u);
  EXPECT_EQ(view.by_netns[0].client.bytes_sent, 5000u);
  ASSERT_EQ(view.by_destination.size(), 1u);
  EXPECT_EQ(view.by_destination[0].port, 15008);
  EXPECT_EQ(view.by_destination[0].connect_latency_samples, 1u);
  EXPECT_EQ(view.by_destination[0].connect_latency_us_max, 500u);
}

TEST(FlowTable, FailedConnectsWithoutOpenEventAreCountedOnce) {
  FlowTable table;
  table.Apply({FlowEventKind::kClose, MakeFlow(1, FlowOutcome::kRefused, 1)});
  table.Apply({FlowEventKind::kClose, MakeFlow(2, FlowOutcome::kTimeout, 1)});
  table.Apply({FlowEventKind::kClose, MakeFlow(3, FlowOutcome::kClosed, 9)});
  FlowTableView view = table.View();
  ASSERT_EQ(view.by_netns.size(), 1u);
  EXPECT_EQ(view.by_netns[0].client.opened, 3u);
  EXPECT_EQ(view.by_netns[0].client.failed(), 2u);
  ASSERT_EQ(view.by_destination.size(), 2u);
  EXPECT_EQ(view.by_destination[0].address.ToString(), "10.0.0.1");
  EXPECT_EQ(view.by_destination[0].counts.failed(), 2u);
  EXPECT_EQ(view.by_destination[1].counts.failed(), 0u);
}

TEST(FlowTable, ServerFlowsHaveNoDestinationAggregate) {
  FlowTable table;
  Flow server = MakeFlow(1, FlowOutcome::kClosed);
  server.role = FlowRole::kServer;
  table.Apply({FlowEventKind::kClose, server});
  FlowTableView view = table.View();
  EXPECT_TRUE(view.by_destination.empty());
  EXPECT_EQ(view.by_netns[0].server.opened, 1u);
  EXPECT_EQ(view.by_netns[0].client.opened, 0u);
}

TEST(FlowTable, BoundsAreVisible) {
  FlowTable table(FlowTableLimits{.max_open = 2, .max_closed = 3, .max_destinations = 1});
  for (uint64_t id = 1; id <= 4; ++id) {
    table.Apply({FlowEventKind::kOpen, MakeFlow(id, FlowOutcome::kOpen, static_cast<uint8_t>(id))});
  }
  EXPECT_EQ(table.open_count(), 2u);
  for (uint64_t id = 10; id <= 15; ++id) {
    table.Apply({FlowEventKind::kClose, MakeFlow(id, FlowOutcome::kClosed)});
  }
  FlowTableView view = table.View();
  EXPECT_EQ(view.open_dropped, 2u);
  EXPECT_EQ(view.closed.size(), 3u);
  EXPECT_EQ(view.closed_dropped, 3u);
  EXPECT_EQ(view.closed.front().flow_id, 13u);  // oldest dropped first
  EXPECT_EQ(view.by_destination.size(), 1u);
  EXPECT_GT(view.destinations_dropped, 0u);
}

TEST(FlowTable, BypassWatchFlowsHaveTheirOwnRingAndNoDestinationAggregate) {
  FlowTable table(FlowTableLimits{.max_closed = 2, .max_closed_bypass = 3});
  // HBONE flows close first, then a burst of application connects of a watched netns.
  for (uint64_t id = 1; id <= 2; ++id) {
    Flow hbone = MakeFlow(id, FlowOutcome::kRefused);
    hbone.ended_unix_ns = static_cast<int64_t>(id) * 10;
    table.Apply({FlowEventKind::kClose, hbone});
  }
  for (uint64_t id = 10; id <= 19; ++id) {
    Flow app = MakeFlow(id, FlowOutcome::kClosed, 200);
    app.tuple.dst_port = 443;
    app.bypass_watch = true;
    app.ended_unix_ns = static_cast<int64_t>(id) * 10;
    table.Apply({FlowEventKind::kClose, app});
  }
  FlowTableView view = table.View();
  ASSERT_EQ(view.closed.size(), 5u) << "2 HBONE + the last 3 application flows";
  EXPECT_EQ(view.closed[0].flow_id, 1u) << "HBONE flows are not pushed out by the burst";
  EXPECT_EQ(view.closed[1].flow_id, 2u);
  EXPECT_EQ(view.closed[2].flow_id, 17u) << "merged by end time";
  EXPECT_EQ(view.closed.back().flow_id, 19u);
  EXPECT_EQ(view.closed_dropped, 7u);
  EXPECT_EQ(view.closed_bypass_dropped, 7u);
  ASSERT_EQ(view.by_destination.size(), 1u) << "only the traced port's destination";
  EXPECT_EQ(view.by_destination[0].port, 15008);
  EXPECT_EQ(view.by_netns[0].client.opened, 12u) << "per-netns counts include both";
}

TEST(FlowTable, LiveRefreshMatchesByCookieOrTuple) {
  FlowTable table;
  Flow by_cookie = MakeFlow(1, FlowOutcome::kOpen);
  by_cookie.cookie_known = true;
  Flow by_tuple = MakeFlow(2, FlowOutcome::kOpen);
  table.Apply({FlowEventKind::kOpen, by_cookie});
  table.Apply({FlowEventKind::kOpen, by_tuple});
  LiveSocketStats cookie_socket;
  cookie_socket.cookie = 1;
  cookie_socket.netns_inode = 999;  // the cookie wins: it identifies the socket node-wide
  cookie_socket.bytes_sent = 111;
  LiveSocketStats tuple_socket;
  tuple_socket.netns_inode = 100;
  tuple_socket.tuple = by_tuple.tuple;
  tuple_socket.bytes_received = 222;
  LiveSocketStats other;
  other.netns_inode = 101;  // same tuple, other netns: not this flow
  other.tuple = by_tuple.tuple;
  other.bytes_received = 333;
  EXPECT_EQ(table.RefreshLive({cookie_socket, other, tuple_socket}), 2u);
  FlowTableView view = table.View();
  ASSERT_EQ(view.open.size(), 2u);
  EXPECT_EQ(view.open[0].bytes_sent, 111u);
  EXPECT_TRUE(view.open[0].live);
  EXPECT_EQ(view.open[1].bytes_received, 222u);
}

TEST(FlowTable, ConnectingThenEstablishedIsOneFlow) {
  FlowTable table;
  Flow connecting = MakeFlow(5, FlowOutcome::kConnecting);
  table.Apply({FlowEventKind::kOpen, connecting});
  Flow established = connecting;
  established.outcome = FlowOutcome::kOpen;
  table.Apply({FlowEventKind::kOpen, established});
  FlowTableView view = table.View();
  ASSERT_EQ(view.open.size(), 1u);
  EXPECT_EQ(view.open[0].outcome, FlowOutcome::kOpen);
  EXPECT_EQ(view.by_netns[0].client.opened, 1u);
}

TEST(FlowTable, LiveRefreshReportsOnlyFlowsWhoseNumbersChanged) {
  FlowTable table;
  Flow quiet = MakeFlow(1, FlowOutcome::kOpen);
  quiet.cookie_known = true;
  Flow busy = MakeFlow(2, FlowOutcome::kOpen);
  busy.cookie_known = true;
  table.Apply({FlowEventKind::kOpen, quiet});
  table.Apply({FlowEventKind::kOpen, busy});
  LiveSocketStats quiet_socket{.cookie = 1, .bytes_sent = 10};
  LiveSocketStats busy_socket{.cookie = 2, .bytes_sent = 20, .srtt_us = 50};
  std::vector<FlowEvent> updates;
  EXPECT_EQ(table.RefreshLive({quiet_socket, busy_socket}, &updates), 2u);
  EXPECT_EQ(updates.size(), 2u) << "the first reading makes both live";
  updates.clear();
  busy_socket.bytes_sent = 4020;
  busy_socket.bytes_received = 7;
  EXPECT_EQ(table.RefreshLive({quiet_socket, busy_socket}, &updates), 2u);
  ASSERT_EQ(updates.size(), 1u) << "an unchanged flow sends no update";
  EXPECT_EQ(updates[0].kind, FlowEventKind::kUpdate);
  EXPECT_EQ(updates[0].flow.flow_id, 2u);
  EXPECT_EQ(updates[0].flow.bytes_sent, 4020u);
  EXPECT_EQ(updates[0].flow.bytes_received, 7u);
  EXPECT_TRUE(updates[0].flow.live);
  EXPECT_EQ(updates[0].flow.outcome, FlowOutcome::kOpen) << "the flow as it is, still open";
  EXPECT_EQ(table.OpenNetns(), std::set<uint32_t>({100}));
}

TEST(FlowTable, UpdateEventsReplaceLiveNumbersOfOpenFlowsOnly) {
  FlowTable table;
  Flow open = MakeFlow(3, FlowOutcome::kOpen);
  table.Apply({FlowEventKind::kOpen, open});
  Flow update = open;
  update.bytes_sent = 900;
  update.bytes_received = 300;
  update.srtt_us = 40;
  update.retransmits = 2;
  table.Apply({FlowEventKind::kUpdate, update});
  FlowTableView view = table.View();
  ASSERT_EQ(view.open.size(), 1u);
  EXPECT_EQ(view.open[0].bytes_sent, 900u);
  EXPECT_EQ(view.open[0].bytes_received, 300u);
  EXPECT_EQ(view.open[0].retransmits, 2u);
  EXPECT_TRUE(view.open[0].live);
  EXPECT_EQ(view.by_netns[0].client.opened, 1u) << "an update opens nothing";
  // An update of a flow that is not open (closed meanwhile, or never seen) changes nothing.
  Flow unknown = MakeFlow(4, FlowOutcome::kOpen);
  table.Apply({FlowEventKind::kUpdate, unknown});
  EXPECT_EQ(table.open_count(), 1u);
  Flow closed = open;
  closed.outcome = FlowOutcome::kClosed;
  closed.bytes_sent = 1000;
  table.Apply({FlowEventKind::kClose, closed});
  table.Apply({FlowEventKind::kUpdate, update});
  EXPECT_EQ(table.open_count(), 0u);
  EXPECT_EQ(table.View().closed.at(0).bytes_sent, 1000u) << "the close's numbers stay";
  EXPECT_TRUE(table.OpenNetns().empty());
}

TEST(FlowTable, CappedUpdatesRotateSoEveryFlowGetsItsTurn) {
  auto updates_of = [](std::initializer_list<uint64_t> ids) {
    std::vector<FlowEvent> updates;
    for (uint64_t id : ids)
      updates.push_back({FlowEventKind::kUpdate, MakeFlow(id, FlowOutcome::kOpen)});
    return updates;
  };
  size_t cursor = 0;
  std::vector<FlowEvent> few = updates_of({3, 1});
  EXPECT_EQ(CapUpdates(few, 2, cursor), 0u) << "under the cap: all kept";
  EXPECT_EQ(few.size(), 2u);
  std::set<uint64_t> seen;
  for (int refresh = 0; refresh < 3; ++refresh) {
    std::vector<FlowEvent> updates = updates_of({5, 2, 4, 1, 3});
    EXPECT_EQ(CapUpdates(updates, 2, cursor), 3u) << "the dropped ones are counted";
    ASSERT_EQ(updates.size(), 2u);
    for (const FlowEvent& update : updates) seen.insert(update.flow.flow_id);
  }
  EXPECT_EQ(seen, std::set<uint64_t>({1, 2, 3, 4, 5})) << "three capped refreshes cover all five";
  std::vector<FlowEvent> zero_cap = updates_of({1, 2});
  EXPECT_EQ(CapUpdates(zero_cap, 0, cursor), 1u) << "a cap of 0 still lets one through";
}

TEST(FlowEventKind, NamesAreStable) {
  EXPECT_EQ(FlowEventKindName(FlowEventKind::kOpen), "open");
  EXPECT_EQ(FlowEventKindName(FlowEventKind::kClose), "close");
  EXPECT_EQ(FlowEventKindName(FlowEventKind::kUpdate), "update");
}

}  // namespace
}  // namespace ad
