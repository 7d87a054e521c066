// A NetnsInspector whose snapshots the test scripts (discovery stays real), for engine and daemon
// tests, plus the snapshots they use.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <utility>

#include "model/snapshot.h"
#include "scan/inspector.h"

namespace ad {

// Returns the snapshot the test set for the next call, keeping the record discovery found.
class ScriptedInspector : public NetnsInspector {
 public:
  NetnsSnapshot Inspect(const NetnsRecord& record) override {
    std::lock_guard lock(mutex_);
    NetnsSnapshot snapshot = next_;
    snapshot.netns = record;
    ++calls_;
    return snapshot;
  }
  // Counts, then the interface's default (an Inspect() whose listener part is kept).
  void RefreshListeners(NetnsSnapshot& snapshot) override {
    ++relistens_;
    NetnsInspector::RefreshListeners(snapshot);
  }
  int relistens() const { return relistens_; }
  void SetNext(NetnsSnapshot snapshot) {
    std::lock_guard lock(mutex_);
    next_ = std::move(snapshot);
  }
  int calls() const { return calls_; }

 private:
  std::mutex mutex_;
  NetnsSnapshot next_;
  std::atomic<int> calls_{0};
  std::atomic<int> relistens_{0};
};

inline NetnsSnapshot Readable() {
  NetnsSnapshot snapshot;
  snapshot.reads = NetnsReads::AllOk();
  return snapshot;
}

inline NetnsSnapshot PartlyFailed(std::string message) {
  NetnsSnapshot snapshot = Readable();
  snapshot.reads.routes = ReadStatus::kFailed;
  snapshot.errors.push_back({SourceKind::kRoute, std::move(message), 1});
  return snapshot;
}

inline NetnsSnapshot Unreadable() {
  NetnsSnapshot snapshot;
  snapshot.unreadable = true;
  snapshot.errors.push_back({SourceKind::kNetns, "setns: Operation not permitted", 1});
  return snapshot;
}

}  // namespace ad
