#include "daemon/flow_monitor.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>
#include <vector>

#include "base/thread_name.h"

namespace ad {

FlowMonitor::FlowMonitor(FlowMonitorOptions options, std::shared_ptr<FlowHub> hub)
    : options_(std::move(options)), hub_(std::move(hub)) {
  Result<std::unique_ptr<FlowTracer>> started = StartFlowTracer(options_.tracer);
  if (started.ok()) {
    tracer_ = std::move(*started);
  } else {
    reason_ = started.error().message;
  }
  // libbpf parsed the kernel's BTF (several MiB) to relocate the programs and freed it again;
  // give those pages back instead of keeping them in the daemon's RSS.
  (void)::malloc_trim(0);
  hub_->SetStatus(Status());
  if (tracer_) {
    thread_ = std::thread([this] {
      NameThisThread("ad-flows");
      Run();
    });
  }
}

FlowMonitor::~FlowMonitor() { Stop(); }

void FlowMonitor::Stop() {
  {
    std::lock_guard lock(sleep_mutex_);
    stopping_ = true;
  }
  sleep_.notify_all();
  if (tracer_) tracer_->Interrupt();
  if (thread_.joinable()) thread_.join();
  hub_->Stop();
}

FlowTracerStatus FlowMonitor::Status() const {
  FlowTracerStatus status;
  status.enabled = true;
  status.available = tracer_ != nullptr;
  status.reason = reason_;
  status.ports = options_.tracer.ports;
  if (tracer_) {
    status.attach_mode = std::string(AttachModeName(tracer_->attach_mode()));
    const TracerCounters counters = tracer_->Counters();
    status.events = counters.events;
    status.lost_events = counters.lost_events;
    status.state_full = counters.state_full;
    status.decode_errors = counters.decode_errors;
    status.bypass_flows = counters.watched_flows;
    const BypassNetnsState bypass = tracer_->BypassNetns();
    status.bypass_netns = bypass.watched;
    status.bypass_netns_not_watched = bypass.not_watched;
    status.bypass_netns_overflow = bypass.overflow_total;
  }
  status.live_refreshes = live_refreshes_.load();
  status.live_netns_reads = live_netns_reads_.load();
  status.live_errors = live_errors_.load();
  status.live_updates = live_updates_.load();
  status.live_updates_skipped = live_updates_skipped_.load();
  status.bypass = options_.tracer.watch_bypass_netns;
  return status;
}

void FlowMonitor::RefreshLive(FlowTable& table, NetnsPathCache& paths,
                              std::vector<FlowEvent>& batch, const std::function<void()>& drain) {
  const std::set<uint32_t> open_netns = table.OpenNetns();
  if (open_netns.empty()) return;  // idle: no discovery, no netns entered
  ++live_refreshes_;
  LiveNetnsRead read =
      ReadLiveTcpOfNetns(open_netns, paths.Resolve(open_netns), options_.tracer.ports, drain);
  live_netns_reads_ += read.netns_read;
  live_errors_ += read.errors.size();
  for (const std::string& error : read.errors) spdlog::debug("flow live refresh: {}", error);
  std::vector<FlowEvent> updates;
  table.RefreshLive(read.sockets, &updates);
  live_updates_skipped_ += CapUpdates(updates, options_.max_updates_per_refresh, update_cursor_);
  live_updates_ += updates.size();
  batch.insert(batch.end(), std::make_move_iterator(updates.begin()),
               std::make_move_iterator(updates.end()));
}

std::optional<Result<BypassNetnsState>> FlowMonitor::SetBypassNetns(
    const std::vector<uint32_t>& inodes) {
  if (!tracer_ || !options_.tracer.watch_bypass_netns) return std::nullopt;
  return tracer_->SetBypassNetns(inodes);
}

void FlowMonitor::Run() {
  FlowTable table(options_.limits);
  NetnsPathCache paths(options_.discovery);
  std::vector<FlowEvent> batch;
  using Clock = std::chrono::steady_clock;
  auto last_published = Clock::now();
  Clock::time_point last_drain{};
  const bool live = options_.live_interval.count() > 0;
  auto next_live = last_published + options_.live_interval;
  const auto apply = [&](const FlowEvent& event) {
    table.Apply(event);
    batch.push_back(event);
  };
  while (!stopping_.load()) {
    {
      // Events that come meanwhile wait in the ring (a failing poll cannot spin either).
      std::unique_lock lock(sleep_mutex_);
      sleep_.wait_until(lock, last_drain + options_.poll, [this] { return stopping_.load(); });
    }
    if (stopping_.load()) break;
    Clock::time_point due = last_published + options_.republish;
    if (live && table.open_count() > 0) due = std::min(due, next_live);
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(
        std::max(due - Clock::now(), Clock::duration::zero()));
    Result<size_t> polled = tracer_->Poll(wait, apply);
    last_drain = Clock::now();
    if (!polled.ok()) spdlog::debug("flow tracer poll: {}", polled.error().message);
    const auto now = last_drain;
    if (live && now >= next_live) {
      // Events that arrive while netns are read are applied first: a socket read before its
      // close was applied only matches while its flow is still open, so nothing is resurrected.
      RefreshLive(table, paths, batch,
                  [&] { (void)tracer_->Poll(std::chrono::milliseconds(0), apply); });
      next_live = now + options_.live_interval;
    }
    if (batch.empty() && now - last_published < options_.republish) continue;
    hub_->SetStatus(Status());
    hub_->Publish(std::exchange(batch, {}), table.View());
    last_published = now;
  }
}

Engine::ExtraFindings FlowFindingSource(std::shared_ptr<const FlowHub> hub,
                                        FlowFindingOptions options) {
  return
      [hub = std::move(hub), options](const NodeSnapshot& snapshot, const NodeAnalysis& analysis) {
        const FlowHub::Current current = hub->Latest();
        const FlowTracerStatus status = hub->status();
        // No flow to judge (a quiet node): the checks find nothing, so the pod join is not built
        // (the daemon asks at every poll whether the flow findings changed).
        if (status.enabled && status.available && current.view->open.empty() &&
            current.view->closed.empty()) {
          return std::vector<Finding>{};
        }
        const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
        return FlowFindings(status, *current.view, FlowContextOf(snapshot, analysis.netns), now_ns,
                            options);
      };
}

}  // namespace ad
