#include "engine/result_hub.h"

#include <utility>

namespace ad {

std::string_view StepTriggerName(StepTrigger trigger) {
  switch (trigger) {
    case StepTrigger::kStartup:
      return "startup";
    case StepTrigger::kEvent:
      return "event";
    case StepTrigger::kPoll:
      return "poll";
    case StepTrigger::kResync:
      return "resync";
  }
  return "unknown";
}

namespace {

// What a lagging stream still needs of an older result: its changes and findings, not the whole
// node snapshot (a few MB with hundreds of netns). Only the latest result stays complete.
std::shared_ptr<const PublishedResult> Light(const PublishedResult& full) {
  auto light = std::make_shared<PublishedResult>();
  light->sequence = full.sequence;
  light->trigger = full.trigger;
  const EngineStep& from = full.step;
  EngineStep& to = light->step;
  // The snapshot keeps its scalars and every source error (status trackers count them), not the
  // rules, routes, sockets and workloads that make it large.
  const NodeSnapshot& snapshot = from.snapshot;
  NodeSnapshot& kept = to.snapshot;
  kept.node_name = snapshot.node_name;
  kept.taken_at_unix_ms = snapshot.taken_at_unix_ms;
  kept.scan_ms = snapshot.scan_ms;
  kept.errors = snapshot.errors;
  kept.zds_collected = snapshot.zds_collected;
  kept.zds.errors = snapshot.zds.errors;
  kept.cri.available = snapshot.cri.available;
  kept.cri.errors = snapshot.cri.errors;
  for (const ZtunnelAdminState& ztunnel : snapshot.ztunnels) {
    ZtunnelAdminState& z = kept.ztunnels.emplace_back();
    z.pid = ztunnel.pid;
    z.errors = ztunnel.errors;
  }
  for (const NetnsSnapshot& netns : snapshot.netns) {
    if (netns.errors.empty() && !netns.unreadable) continue;  // nothing a tracker counts
    NetnsSnapshot& n = kept.netns.emplace_back();
    n.netns = netns.netns;
    n.reads = netns.reads;
    n.errors = netns.errors;
    n.unreadable = netns.unreadable;
  }
  to.analysis.findings = from.analysis.findings;
  to.usable = from.usable;
  to.changes = from.changes;
  to.source_changes = from.source_changes;
  to.scan_recovered = from.scan_recovered;
  to.finding_records = from.finding_records;
  // Not recently_resolved: streams replay changes and findings, and a report reads the latest
  // result. Each older result held its own copy of the (up to 1,000-entry) ring, and under churn
  // that copy changes on almost every step: the daemon's RSS doubled over a soak.
  to.light = true;
  return light;
}

}  // namespace

std::shared_ptr<const PublishedResult> ResultHub::Publish(StepTrigger trigger, EngineStep step) {
  auto result = std::make_shared<PublishedResult>();
  result->trigger = trigger;
  result->step = std::move(step);
  {
    std::lock_guard lock(mutex_);
    result->sequence = next_sequence_++;
    if (!ring_.empty() && !ring_.back()->step.light) ring_.back() = Light(*ring_.back());
    ring_.push_back(result);
    while (ring_.size() > ring_size_) ring_.pop_front();
  }
  published_.notify_all();
  return result;
}

std::shared_ptr<const PublishedResult> ResultHub::Latest() const {
  std::lock_guard lock(mutex_);
  return ring_.empty() ? nullptr : ring_.back();
}

ResultHub::Since ResultHub::CollectLocked(uint64_t after_sequence) const {
  Since since;
  since.stopped = stopped_;
  if (!ring_.empty() && ring_.front()->sequence > after_sequence + 1 && after_sequence > 0) {
    since.gap = true;
  }
  for (const auto& result : ring_) {
    if (result->sequence > after_sequence) since.results.push_back(result);
  }
  return since;
}

ResultHub::Since ResultHub::WaitSince(uint64_t after_sequence, std::chrono::milliseconds timeout,
                                      const std::atomic<bool>* cancel) const {
  std::unique_lock lock(mutex_);
  published_.wait_for(lock, timeout, [&] {
    return stopped_ || (cancel != nullptr && cancel->load()) ||
           (!ring_.empty() && ring_.back()->sequence > after_sequence);
  });
  return CollectLocked(after_sequence);
}

void ResultHub::Nudge() const {
  // Under the lock: a waiter between its check of `cancel` and its sleep cannot miss the wake.
  { std::lock_guard lock(mutex_); }
  published_.notify_all();
}

void ResultHub::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  published_.notify_all();
}

}  // namespace ad
