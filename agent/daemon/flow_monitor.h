// The daemon's flow tracer: loads it once (a failure is kept as the reason, never fatal), then
// feeds the flow table on its own thread and publishes the table's view and its events to a
// FlowHub for the outputs. Scans never wait for it: the engine's flow checks read the latest
// published view.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "flows/flow_hub.h"
#include "flows/flow_table.h"
#include "tracing/flow_tracer.h"

namespace ad {

struct FlowMonitorOptions {
  // Mesh-bypass mode on: SetBypassNetns feeds the netns it watches.
  TracerOptions tracer = {.watch_bypass_netns = true};
  FlowTableLimits limits;
  // Longest wait for events, and so between stop checks (events wake it at once, or in batches:
  // TracerOptions::batch_wakeups). An idle node costs two wakeups a second.
  std::chrono::milliseconds poll{500};
  // The view is republished at least this often without events (tracer counters).
  std::chrono::milliseconds republish{5000};
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
  FlowTracerStatus Status() const;

  FlowMonitorOptions options_;
  std::shared_ptr<FlowHub> hub_;
  std::unique_ptr<FlowTracer> tracer_;
  std::string reason_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ad
