// The daemon's flow data as its outputs read it: the tracer's status, the latest flow-table view
// and a bounded ring of recent open/close events, published by the one thread that owns the
// tracer (like ResultHub for engine results). Readers never touch the tracer or the table, and a
// stream that falls behind the ring learns it (gap) instead of silently missing events.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flows/flow.h"
#include "flows/flow_table.h"

namespace ad {

struct FlowTracerStatus {
  bool enabled = false;     // the daemon was asked to trace (not --no-flows)
  bool available = false;   // loaded and attached
  std::string attach_mode;  // "tp_btf", "raw_tp", "tracepoint" when available
  std::string reason;       // why not available (the loader's error), else empty
  std::vector<uint16_t> ports;
  uint64_t events = 0;
  uint64_t lost_events = 0;
  uint64_t state_full = 0;
  uint64_t decode_errors = 0;
  // Live tcp_info refreshes of open flows (serve --flow-live-interval): refreshes that had open
  // flows to read (an idle node makes none), netns read, reads that failed, update events
  // published, and updates not published past the per-refresh cap.
  uint64_t live_refreshes = 0;
  uint64_t live_netns_reads = 0;
  uint64_t live_errors = 0;
  uint64_t live_updates = 0;
  uint64_t live_updates_skipped = 0;
  // Mesh-bypass mode (the watched-netns map; serve's default, --no-flow-bypass turns it off).
  bool bypass = false;
  uint64_t bypass_netns = 0;              // netns watched now
  uint64_t bypass_netns_not_watched = 0;  // wanted but left out of the last update: map full
  uint64_t bypass_netns_overflow = 0;     // left out, summed over the updates (never fatal)
  uint64_t bypass_flows = 0;              // flows traced because their netns is watched
};

class FlowHub {
 public:
  explicit FlowHub(size_t event_ring = 4096) : ring_size_(event_ring == 0 ? 1 : event_ring) {}

  void SetStatus(FlowTracerStatus status);
  FlowTracerStatus status() const;

  // Appends `events` (stamped 1, 2, ... in order) and replaces the view; wakes every waiter.
  void Publish(std::vector<FlowEvent> events, FlowTableView view);

  struct Current {
    std::shared_ptr<const FlowTableView> view;  // never null
    uint64_t sequence = 0;                      // the last event the view includes
  };
  Current Latest() const;

  struct Since {
    std::vector<FlowEvent> events;  // oldest first
    uint64_t last_sequence = 0;     // of the last returned event (or `after` when none)
    bool gap = false;               // events after `after` were already pushed out of the ring
    bool stopped = false;
  };
  // Events newer than `after`; waits up to `timeout` for one when there is none yet.
  Since WaitSince(uint64_t after, std::chrono::milliseconds timeout) const;

  // True when events after `after` were already pushed out of the ring (a reader lost some).
  bool Behind(uint64_t after) const;

  void Stop();  // wakes every waiter for good

 private:
  Since CollectLocked(uint64_t after) const;

  const size_t ring_size_;
  mutable std::mutex mutex_;
  mutable std::condition_variable published_;
  FlowTracerStatus status_;
  std::shared_ptr<const FlowTableView> view_ = std::make_shared<const FlowTableView>();
  std::deque<FlowEvent> ring_;
  uint64_t last_sequence_ = 0;  // of ring_.back()
  bool stopped_ = false;
};

}  // namespace ad
