// The node daemon's core loop (the `serve` command's engine room): one long-lived Engine whose
// results are published to a ResultHub for every output (gRPC, metrics, logs), stepped at start,
// then on its poll interval (later also on change events), with one log line per finding opened
// or resolved and per source degraded or recovered, never one per scan. Stop() ends Run() within
// one wake-up, from any thread or a signal handler.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "engine/engine.h"
#include "engine/result_hub.h"

namespace ad {
namespace watch {
class ChangeMonitor;
}

enum class LogFormat : uint8_t { kText, kJson };

struct DaemonOptions {
  EngineConfig engine;
  std::chrono::milliseconds poll_interval{5000};  // ZDS sources and legacy fingerprints
  // Resync whatever events said: with events, what the generation / legacy gates flag, the host
  // netns and a rolling tenth of the netns in full (Daemon::GatedResync); without events,
  // everything.
  std::chrono::milliseconds full_resync{60000};
  // A poll that found nothing new (Engine: StepPlan::skip_if_unchanged) is not analysed or
  // published, but one result is published at least this often, so "last scan" times (/healthz,
  // GetStatus) stay fresh on a quiet node. Zero: publish every poll. serve caps it at half of
  // --healthz-stale-after (120 s). Each such publish analyses the node again and wakes every
  // output: at 30 s that was about a tenth of an idle daemon's CPU.
  std::chrono::milliseconds max_unpublished{60000};
  // Re-read a netns when its nf_tables / rtnetlink events or legacy fingerprint say it changed
  // (ChangeMonitor). Off, or when the event sockets cannot be opened: every poll re-reads all.
  bool event_driven = true;
  std::chrono::milliseconds coalesce_window{10};  // quiet time after a burst of commits
  size_t resolved_ring = 1000;                    // resolved findings kept for history
  size_t hub_ring = 32;                           // published results kept for lagging streams
  // Called after every step with its trigger, wall time and how many netns it re-read (metrics).
  std::function<void(StepTrigger, double seconds, size_t netns_read)> on_step;
  std::function<void()> on_event_overflow;  // an event socket lost events (ENOBUFS)
  // Findings of the flow checks (flow_joins.h FlowFindings over the FlowHub's latest view),
  // merged into every step's findings. A quiet poll is published anyway when they changed.
  Engine::ExtraFindings extra_findings;
  // The Kubernetes API's view (KubeLink::View), judged in every step; unset: no desired state.
  // Call Daemon::KubeChanged() when it changes.
  Engine::KubeView kube_view;
};

// One log line (without timestamp and level, which the logger adds) per change of one step: the
// daemon's log contract, pure so it is tested without a logger. Text: "finding opened ZDS_STALL
// /run/netns/x (inode 5) pod demo/a [hand-off]: summary"; JSON: one object per line.
// Source lines come first, in step.source_changes order, then one per finding change.
std::vector<std::string> StepLogLines(const EngineStep& step, LogFormat format);
// Any other daemon log message in the same format (JSON: {"event":"note","message":...}).
std::string NoteLine(std::string_view message, LogFormat format);

class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  Daemon(DaemonOptions options, std::unique_ptr<NetnsInspector> inspector, Engine::Clock clock);

  ResultHub& hub() { return *hub_; }
  std::shared_ptr<const ResultHub> shared_hub() const { return hub_; }

  // Steps at start; then on change events (only the dirty netns), every poll interval (node
  // sources + what the legacy fingerprints flagged) and every full resync, until Stop(). Logs
  // through spdlog's default logger.
  void Run(LogFormat format = LogFormat::kText);
  // Async-signal-safe.
  void Stop();
  // The Kubernetes view changed: Run() steps again (without re-reading netns) within one wake-up.
  // Thread-safe.
  void KubeChanged();
  uint64_t steps() const { return steps_; }
  // Polls that found nothing new and were therefore not published (a subset of steps()).
  uint64_t unchanged_steps() const { return unchanged_steps_.load(); }
  bool event_driven_active() const { return event_driven_active_; }

 private:
  void StepAndPublish(StepTrigger trigger, const StepPlan& plan, LogFormat format);
  void ReleaseFreedMemory();
  bool Stopping() const;
  StepPlan GatedResync(watch::ChangeMonitor& monitor, const std::set<uint64_t>& dirty);

  // A gated resync reads 1/kResyncSlices of the netns in full, round robin from resync_cursor_.
  static constexpr size_t kResyncSlices = 10;
  uint64_t resync_cursor_ = 0;  // inode of the netns the last gated resync read last

  DaemonOptions options_;
  Engine engine_;
  std::shared_ptr<ResultHub> hub_;
  UniqueFd wake_;  // eventfd: Stop() and KubeChanged() write it; every wait ends on it
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> kube_changed_{false};
  uint64_t steps_ = 0;
  std::atomic<uint64_t> unchanged_steps_{0};  // read by tests while Run() goes on
  std::chrono::steady_clock::time_point last_published_{};
  bool failing_ = false;
  bool event_driven_active_ = false;
  std::set<uint64_t> last_inodes_;  // netns of the last step (what the monitor must watch)
  std::chrono::steady_clock::time_point last_trim_{};  // ReleaseFreedMemory()'s rate limit
  std::vector<NetnsRecord> last_records_;
  std::vector<Finding> last_extra_;  // what extra_findings gave the last analysed step
};

}  // namespace ad
