// The flow table: open flows, a bounded ring of recently closed ones, per-netns and
// per-destination aggregates. Plain data and pure logic fed by the tracer's events (and by live
// tcp_info refreshes); FlowTableView is a copyable snapshot the daemon can publish to its outputs
// the way it publishes engine results. Not thread-safe: one owner applies events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "flows/flow.h"

namespace ad {

struct FlowTableLimits {
  size_t max_open = 65536;         // the BPF state map's size: more cannot be open at once
  size_t max_closed = 4096;        // recently closed flows kept (oldest dropped first, counted)
  size_t max_destinations = 4096;  // per-destination aggregates (new ones dropped, counted)
  // Closed flows traced only for the mesh-bypass check (Flow::bypass_watch) have a ring of their
  // own, so a busy pod's application connects never push HBONE flows out of the window; they
  // are not per-destination aggregates either (those stay the traced ports').
  size_t max_closed_bypass = 4096;
};

// Counts by outcome of closed flows, plus the open ones.
struct FlowCounts {
  uint64_t opened = 0;  // flows seen starting (open events, or first seen at close)
  uint64_t open = 0;    // open now
  std::map<FlowOutcome, uint64_t> closed;  // by outcome
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t retransmits = 0;
  uint64_t resets = 0;
  uint64_t failed() const;
};

struct NetnsFlowAggregate {
  uint32_t netns_inode = 0;
  FlowCounts client;  // connections made from this netns
  FlowCounts server;  // connections accepted in it
};

// Client flows by destination address and port (where connections went, and how they fared).
struct DestinationAggregate {
  FlowAddress address;
  uint16_t port = 0;
  FlowCounts counts;
  uint64_t connect_latency_us_sum = 0;  // over established flows with a known latency
  uint64_t connect_latency_samples = 0;
  uint64_t connect_latency_us_max = 0;
};

// A live reading of one open socket (sock_diag tcp_info), matched to flows by netns and tuple.
struct LiveSocketStats {
  uint32_t netns_inode = 0;
  FlowTuple tuple;
  uint64_t cookie = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint32_t srtt_us = 0;
  uint32_t retransmits = 0;
};

// What the table holds at one moment, as plain values.
struct FlowTableView {
  std::vector<Flow> open;                            // by start time
  std::vector<Flow> closed;                          // oldest first (both rings, by end time)
  std::vector<NetnsFlowAggregate> by_netns;          // by inode
  std::vector<DestinationAggregate> by_destination;  // by address, port
  uint64_t closed_dropped = 0;                       // closed flows pushed out of the ring
  uint64_t closed_bypass_dropped = 0;                // of them, bypass-watch flows (their own ring)
  uint64_t open_dropped = 0;                         // open events refused: table full
  uint64_t destinations_dropped = 0;  // destination aggregates not created: table full
  uint64_t decode_errors = 0;         // events that could not be decoded (never applied)
};

// Keeps at most `cap` (at least 1) of `updates`, rotating through them by flow id from `cursor`
// (advanced past the kept ones), so the same flows are not always the ones left out; returns how
// many it dropped.
size_t CapUpdates(std::vector<FlowEvent>& updates, size_t cap, size_t& cursor);

class FlowTable {
 public:
  explicit FlowTable(FlowTableLimits limits = {});

  // An open event adds (or replaces) an open flow, a close moves it to the closed ring, an update
  // replaces an open flow's live numbers (an update of a flow that is not open is ignored).
  void Apply(const FlowEvent& event);
  void CountDecodeError() { ++decode_errors_; }
  // Replaces the counters of matching open flows (by cookie when known, else netns + tuple).
  // Returns how many flows it matched; `updates` (when given) gets an kUpdate event, with the
  // flow as it is now, for every matched flow whose numbers changed.
  size_t RefreshLive(const std::vector<LiveSocketStats>& sockets,
                     std::vector<FlowEvent>* updates = nullptr);

  // The netns inodes of the open flows (what a live refresh has to read).
  std::set<uint32_t> OpenNetns() const;

  size_t open_count() const { return open_.size(); }
  size_t closed_count() const { return closed_.size() + closed_bypass_.size(); }
  FlowTableView View() const;

 private:
  void Close(Flow flow);
  void CountOpened(const Flow& flow);
  DestinationAggregate* Destination(const Flow& flow);

  FlowTableLimits limits_;
  std::unordered_map<uint64_t, Flow> open_;  // by flow id
  std::deque<Flow> closed_;
  std::deque<Flow> closed_bypass_;  // Flow::bypass_watch ones
  std::map<uint32_t, NetnsFlowAggregate> by_netns_;
  std::map<std::pair<FlowAddress, uint16_t>, DestinationAggregate> by_destination_;
  uint64_t closed_dropped_ = 0;
  uint64_t closed_bypass_dropped_ = 0;
  uint64_t open_dropped_ = 0;
  uint64_t destinations_dropped_ = 0;
  uint64_t decode_errors_ = 0;
};

}  // namespace ad
