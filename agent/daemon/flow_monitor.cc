#include "daemon/flow_monitor.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

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
  if (tracer_) thread_ = std::thread([this] { Run(); });
}

FlowMonitor::~FlowMonitor() { Stop(); }

void FlowMonitor::Stop() {
  stopping_ = true;
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
  status.bypass = options_.tracer.watch_bypass_netns;
  return status;
}

std::optional<Result<BypassNetnsState>> FlowMonitor::SetBypassNetns(
    const std::vector<uint32_t>& inodes) {
  if (!tracer_ || !options_.tracer.watch_bypass_netns) return std::nullopt;
  return tracer_->SetBypassNetns(inodes);
}

void FlowMonitor::Run() {
  FlowTable table(options_.limits);
  std::vector<FlowEvent> batch;
  auto last_published = std::chrono::steady_clock::now();
  while (!stopping_.load()) {
    Result<size_t> polled = tracer_->Poll(options_.poll, [&](const FlowEvent& event) {
      table.Apply(event);
      batch.push_back(event);
    });
    if (!polled.ok()) {
      spdlog::debug("flow tracer poll: {}", polled.error().message);
      std::this_thread::sleep_for(options_.poll);  // a failing poll must not spin
    }
    const auto now = std::chrono::steady_clock::now();
    if (batch.empty() && now - last_published < options_.republish) continue;
    hub_->SetStatus(Status());
    hub_->Publish(std::exchange(batch, {}), table.View());
    last_published = now;
  }
}

}  // namespace ad
