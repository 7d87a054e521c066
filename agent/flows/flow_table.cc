#include "flows/flow_table.h"

#include <algorithm>
#include <iterator>
#include <tuple>
#include <utility>

namespace ad {
namespace {

FlowCounts& CountsFor(NetnsFlowAggregate& aggregate, const Flow& flow) {
  return flow.role == FlowRole::kServer ? aggregate.server : aggregate.client;
}

}  // namespace

uint64_t FlowCounts::failed() const {
  uint64_t total = 0;
  for (const auto& [outcome, count] : closed) {
    if (IsFailedOutcome(outcome)) total += count;
  }
  return total;
}

size_t CapUpdates(std::vector<FlowEvent>& updates, size_t cap, size_t& cursor) {
  cap = std::max<size_t>(1, cap);
  if (updates.size() <= cap) return 0;
  std::sort(updates.begin(), updates.end(),
            [](const FlowEvent& a, const FlowEvent& b) { return a.flow.flow_id < b.flow.flow_id; });
  const size_t start = cursor % updates.size();
  std::rotate(updates.begin(), updates.begin() + static_cast<std::ptrdiff_t>(start), updates.end());
  const size_t dropped = updates.size() - cap;
  updates.resize(cap);
  cursor = start + cap;
  return dropped;
}

FlowTable::FlowTable(FlowTableLimits limits) : limits_(limits) {}

DestinationAggregate* FlowTable::Destination(const Flow& flow) {
  if (flow.role != FlowRole::kClient || flow.bypass_watch) return nullptr;
  const auto key = std::make_pair(flow.tuple.dst, flow.tuple.dst_port);
  auto it = by_destination_.find(key);
  if (it != by_destination_.end()) return &it->second;
  if (by_destination_.size() >= limits_.max_destinations) {
    ++destinations_dropped_;
    return nullptr;
  }
  DestinationAggregate& created = by_destination_[key];
  created.address = flow.tuple.dst;
  created.port = flow.tuple.dst_port;
  return &created;
}

void FlowTable::CountOpened(const Flow& flow) {
  NetnsFlowAggregate& netns = by_netns_[flow.netns_inode];
  netns.netns_inode = flow.netns_inode;
  ++CountsFor(netns, flow).opened;
  if (DestinationAggregate* destination = Destination(flow)) ++destination->counts.opened;
}

namespace {

// The numbers a live refresh (or an update event) replaces; true when one changed.
bool TakeLiveNumbers(Flow& flow, uint64_t bytes_sent, uint64_t bytes_received, uint32_t srtt_us,
                     uint32_t retransmits) {
  const uint32_t merged_retransmits = std::max(flow.retransmits, retransmits);
  const bool changed = !flow.live || flow.bytes_sent != bytes_sent ||
                       flow.bytes_received != bytes_received || flow.srtt_us != srtt_us ||
                       flow.retransmits != merged_retransmits;
  flow.bytes_sent = bytes_sent;
  flow.bytes_received = bytes_received;
  flow.srtt_us = srtt_us;
  flow.retransmits = merged_retransmits;
  flow.live = true;
  return changed;
}

}  // namespace

void FlowTable::Apply(const FlowEvent& event) {
  const Flow& flow = event.flow;
  if (event.kind == FlowEventKind::kUpdate) {
    if (auto it = open_.find(flow.flow_id); it != open_.end()) {
      TakeLiveNumbers(it->second, flow.bytes_sent, flow.bytes_received, flow.srtt_us,
                      flow.retransmits);
    }
    return;
  }
  if (event.kind == FlowEventKind::kOpen) {
    auto it = open_.find(flow.flow_id);
    if (it != open_.end()) {
      // A second open (connecting -> established is one event in the kernel; keep the newest).
      it->second = flow;
      return;
    }
    if (open_.size() >= limits_.max_open) {
      ++open_dropped_;
      return;
    }
    open_.emplace(flow.flow_id, flow);
    CountOpened(flow);
    return;
  }
  auto it = open_.find(flow.flow_id);
  if (it == open_.end()) {
    CountOpened(flow);  // closed without an open event: failed connects, late or dropped flows
  } else {
    open_.erase(it);
  }
  Close(flow);
}

void FlowTable::Close(Flow flow) {
  NetnsFlowAggregate& netns = by_netns_[flow.netns_inode];
  netns.netns_inode = flow.netns_inode;
  auto add = [&flow](FlowCounts& counts) {
    ++counts.closed[flow.outcome];
    counts.bytes_sent += flow.bytes_sent;
    counts.bytes_received += flow.bytes_received;
    counts.retransmits += flow.retransmits;
    counts.resets += flow.resets();
  };
  add(CountsFor(netns, flow));
  if (DestinationAggregate* destination = Destination(flow)) {
    add(destination->counts);
    if (std::optional<int64_t> latency = flow.ConnectLatencyUs()) {
      destination->connect_latency_us_sum += static_cast<uint64_t>(*latency);
      ++destination->connect_latency_samples;
      destination->connect_latency_us_max =
          std::max(destination->connect_latency_us_max, static_cast<uint64_t>(*latency));
    }
  }
  const bool bypass = flow.bypass_watch;
  std::deque<Flow>& ring = bypass ? closed_bypass_ : closed_;
  const size_t limit = bypass ? limits_.max_closed_bypass : limits_.max_closed;
  ring.push_back(std::move(flow));
  while (ring.size() > limit) {
    ring.pop_front();
    ++closed_dropped_;
    if (bypass) ++closed_bypass_dropped_;
  }
}

size_t FlowTable::RefreshLive(const std::vector<LiveSocketStats>& sockets,
                              std::vector<FlowEvent>* updates) {
  std::unordered_map<uint64_t, const LiveSocketStats*> by_cookie;
  std::map<std::pair<uint32_t, FlowTuple>, const LiveSocketStats*> by_tuple;
  for (const LiveSocketStats& socket : sockets) {
    if (socket.cookie != 0) by_cookie.emplace(socket.cookie, &socket);
    by_tuple.emplace(std::make_pair(socket.netns_inode, socket.tuple), &socket);
  }
  size_t matched = 0;
  for (auto& [id, flow] : open_) {
    const LiveSocketStats* socket = nullptr;
    if (flow.cookie_known) {
      auto it = by_cookie.find(flow.flow_id);
      if (it != by_cookie.end()) socket = it->second;
    }
    if (socket == nullptr) {
      auto it = by_tuple.find(std::make_pair(flow.netns_inode, flow.tuple));
      if (it != by_tuple.end()) socket = it->second;
    }
    if (socket == nullptr) continue;
    const bool changed = TakeLiveNumbers(flow, socket->bytes_sent, socket->bytes_received,
                                         socket->srtt_us, socket->retransmits);
    if (changed && updates != nullptr) {
      updates->push_back(FlowEvent{.kind = FlowEventKind::kUpdate, .flow = flow});
    }
    ++matched;
  }
  return matched;
}

std::set<uint32_t> FlowTable::OpenNetns() const {
  std::set<uint32_t> inodes;
  for (const auto& [id, flow] : open_) inodes.insert(flow.netns_inode);
  return inodes;
}

FlowTableView FlowTable::View() const {
  FlowTableView view;
  view.open.reserve(open_.size());
  for (const auto& [id, flow] : open_) view.open.push_back(flow);
  std::sort(view.open.begin(), view.open.end(), [](const Flow& a, const Flow& b) {
    return std::tie(a.started_unix_ns, a.flow_id) < std::tie(b.started_unix_ns, b.flow_id);
  });
  view.closed.reserve(closed_.size() + closed_bypass_.size());
  // Each ring is in close order; merged by end time (stable: ties keep the traced ports' first).
  std::merge(closed_.begin(), closed_.end(), closed_bypass_.begin(), closed_bypass_.end(),
             std::back_inserter(view.closed),
             [](const Flow& a, const Flow& b) { return a.ended_unix_ns < b.ended_unix_ns; });
  std::map<uint32_t, size_t> netns_index;
  for (const auto& [inode, aggregate] : by_netns_) {
    netns_index[inode] = view.by_netns.size();
    view.by_netns.push_back(aggregate);
  }
  std::map<std::pair<FlowAddress, uint16_t>, size_t> destination_index;
  for (const auto& [key, aggregate] : by_destination_) {
    destination_index[key] = view.by_destination.size();
    view.by_destination.push_back(aggregate);
  }
  // Open counts are a property of the moment, so they are counted here, not kept.
  for (const auto& [id, flow] : open_) {
    if (auto it = netns_index.find(flow.netns_inode); it != netns_index.end()) {
      ++CountsFor(view.by_netns[it->second], flow).open;
    }
    if (flow.role != FlowRole::kClient || flow.bypass_watch) continue;
    auto it = destination_index.find(std::make_pair(flow.tuple.dst, flow.tuple.dst_port));
    if (it != destination_index.end()) ++view.by_destination[it->second].counts.open;
  }
  view.closed_dropped = closed_dropped_;
  view.closed_bypass_dropped = closed_bypass_dropped_;
  view.open_dropped = open_dropped_;
  view.destinations_dropped = destinations_dropped_;
  view.decode_errors = decode_errors_;
  return view;
}

}  // namespace ad
