#include "flows/flow_hub.h"

#include <utility>

namespace ad {

void FlowHub::SetStatus(FlowTracerStatus status) {
  std::lock_guard lock(mutex_);
  status_ = std::move(status);
}

FlowTracerStatus FlowHub::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

void FlowHub::Publish(std::vector<FlowEvent> events, FlowTableView view) {
  auto shared = std::make_shared<const FlowTableView>(std::move(view));
  {
    std::lock_guard lock(mutex_);
    for (FlowEvent& event : events) {
      ring_.push_back(std::move(event));
      ++last_sequence_;
      if (ring_.size() > ring_size_) ring_.pop_front();
    }
    view_ = std::move(shared);
  }
  published_.notify_all();
}

FlowHub::Current FlowHub::Latest() const {
  std::lock_guard lock(mutex_);
  return Current{view_, last_sequence_};
}

FlowHub::Since FlowHub::CollectLocked(uint64_t after) const {
  Since since;
  since.stopped = stopped_;
  since.last_sequence = after;
  if (after >= last_sequence_) return since;
  const uint64_t first = last_sequence_ - ring_.size() + 1;  // sequence of ring_.front()
  if (after + 1 < first) {
    since.gap = true;
    return since;
  }
  for (uint64_t seq = after + 1; seq <= last_sequence_; ++seq) {
    since.events.push_back(ring_[seq - first]);
  }
  since.last_sequence = last_sequence_;
  return since;
}

FlowHub::Since FlowHub::WaitSince(uint64_t after, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  published_.wait_for(lock, timeout, [&] { return stopped_ || last_sequence_ > after; });
  return CollectLocked(after);
}

bool FlowHub::Behind(uint64_t after) const {
  std::lock_guard lock(mutex_);
  return after + ring_.size() < last_sequence_;
}

void FlowHub::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  published_.notify_all();
}

}  // namespace ad
