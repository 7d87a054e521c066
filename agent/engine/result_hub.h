// One engine result, published once and read by every output (report, gRPC, metrics, logs), like
// Envoy's stats sinks reading one snapshot: outputs never scan, and all of them see the same data.
// The hub keeps the latest result and a bounded ring of recent ones (all but the latest in a light
// form: changes and findings, without the node snapshot or the ring of recently resolved
// findings), so a stream that fell a few results
// behind can still replay their changes, and one that fell further knows it (and is
// dropped by its server) instead of silently missing events.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/engine.h"

namespace ad {

// Why a step ran (metric label `trigger`).
enum class StepTrigger : uint8_t { kStartup, kEvent, kPoll, kResync };
std::string_view StepTriggerName(StepTrigger trigger);  // "startup", "event", "poll", "resync"

struct PublishedResult {
  uint64_t sequence = 0;  // 1, 2, ... in publication order
  StepTrigger trigger = StepTrigger::kStartup;
  EngineStep step;
};

class ResultHub {
 public:
  explicit ResultHub(size_t ring_size = 64) : ring_size_(ring_size == 0 ? 1 : ring_size) {}

  // Stamps the sequence, keeps the result and wakes every waiter.
  std::shared_ptr<const PublishedResult> Publish(StepTrigger trigger, EngineStep step);
  std::shared_ptr<const PublishedResult> Latest() const;

  struct Since {
    std::vector<std::shared_ptr<const PublishedResult>> results;  // oldest first
    bool gap = false;  // results after `after_sequence` were already dropped from the ring
    bool stopped = false;
  };
  // Every result newer than `after_sequence` still in the ring; waits up to `timeout` for one
  // when there is none yet. Returns at once after Stop().
  // With `cancel`, it also returns once that is set and Nudge() called: a waiter with its own
  // shutdown can wait without a short timeout (an idle daemon's threads sleep until woken).
  Since WaitSince(uint64_t after_sequence, std::chrono::milliseconds timeout,
                  const std::atomic<bool>* cancel = nullptr) const;
  // Wakes every waiter to check its cancel flag (set the flag first).
  void Nudge() const;

  // Wakes every waiter for good (shutdown): they return with stopped = true.
  void Stop();

 private:
  Since CollectLocked(uint64_t after_sequence) const;

  const size_t ring_size_;
  mutable std::mutex mutex_;
  mutable std::condition_variable published_;
  std::deque<std::shared_ptr<const PublishedResult>> ring_;
  uint64_t next_sequence_ = 1;
  bool stopped_ = false;
};

}  // namespace ad
