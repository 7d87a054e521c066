// The daemon's flow tracer: loads it once (a failure is kept as the reason, never fatal), then
// feeds the flow table on its own thread and publishes the table's view and its events to a
// FlowHub for the outputs. Scans never wait for it: the engine's flow checks read the latest
// published view.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "flows/flow_hub.h"
#include "flows/flow_joins.h"
#include "flows/flow_table.h"
#include "tracing/flow_tracer.h"
#include "tracing/live_tcp.h"

namespace ad {

struct FlowMonitorOptions {
  // Mesh-bypass mode on: SetBypassNetns feeds the netns it watches.
  TracerOptions tracer = {.watch_bypass_netns = true};
  FlowTableLimits limits;
  // Drains of the tracer's ring are at least this far apart, so a busy node's events are taken
  // in batches, at most this late. Between drains the reader sleeps until the kernel side wakes it
  // (the first event into an empty ring: TracerOptions::batch_wakeups), until the republish or a
  // live refresh is due, or until Stop(): an idle node wakes it once per republish.
  std::chrono::milliseconds poll{500};
  // The view is republished at least this often without events (tracer counters).
  std::chrono::milliseconds republish{5000};
  // Open flows get their bytes, srtt and retransmits from sock_diag tcp_info this often (an
  // "update" event per flow whose numbers changed, and the view); 0 = never. The reader wakes for
  // it only while flows are open, and only the netns that have open flows are read, so a node
  // without open flows pays nothing.
  std::chrono::milliseconds live_interval{5000};
  // Update events one refresh may publish (a quarter of the hub's event ring, so a refresh of
  // many busy flows cannot push a stream behind the ring); the others are counted
  // (FlowTracerStatus::live_updates_skipped), their numbers are in the view all the same, and the
  // next refresh starts where this one stopped.
  size_t max_updates_per_refresh = 1024;
  // How the netns of open flows are found to be entered (the engine's discovery options).
  DiscoveryOptions discovery;
};

class FlowMonitor {
 public:
  // Starts the tracer and its thread; without one, `hub` gets the reason (status.available false).
  FlowMonitor(FlowMonitorOptions options, std::shared_ptr<FlowHub> hub);
  ~FlowMonitor();  // Stop()
  FlowMonitor(const FlowMonitor&) = delete;
  FlowMonitor& operator=(const FlowMonitor&) = delete;

  bool available() const { return tracer_ != nullptr; }
  // The netns whose every connect is traced for MESH_BYPASS (the node's ambient pods); only the
  // changes reach the kernel. Any thread. What does not fit the map is counted (the returned
  // state, the status), never fatal. The tracer's error; nullopt without a tracer or bypass mode.
  std::optional<Result<BypassNetnsState>> SetBypassNetns(const std::vector<uint32_t>& inodes);
  // Ends the feed thread and stops the hub (streams get their final status). Idempotent.
  void Stop();

 private:
  void Run();
  // One live refresh of the open flows of `table`; appends the update events to `batch`.
  // `drain` empties the tracer's ring into the table and the batch between netns reads.
  void RefreshLive(FlowTable& table, NetnsPathCache& paths, std::vector<FlowEvent>& batch,
                   const std::function<void()>& drain);
  FlowTracerStatus Status() const;

  FlowMonitorOptions options_;
  std::shared_ptr<FlowHub> hub_;
  std::unique_ptr<FlowTracer> tracer_;
  std::string reason_;
  std::atomic<bool> stopping_{false};
  std::mutex sleep_mutex_;
  std::condition_variable sleep_;  // the gap between drains; Stop() ends it
  // Live refresh counters: written by the feed thread, read by Status() on it and at start.
  std::atomic<uint64_t> live_refreshes_{0};
  std::atomic<uint64_t> live_netns_reads_{0};
  std::atomic<uint64_t> live_errors_{0};
  std::atomic<uint64_t> live_updates_{0};
  std::atomic<uint64_t> live_updates_skipped_{0};
  size_t update_cursor_ = 0;  // where the next capped refresh starts (feed thread only)
  std::thread thread_;
};

// The flow checks (flow_joins.h FlowFindings over `hub`'s latest view) as a source of findings the
// engine composes into every usable step (DaemonOptions::extra_findings).
Engine::ExtraFindings FlowFindingSource(std::shared_ptr<const FlowHub> hub,
                                        FlowFindingOptions options);

}  // namespace ad
