// Ages of conditions across successive scans. A one-shot report has no history, so every signal
// is first seen "now"; `watch` keeps one History for its lifetime so that a hand-off pending long
// enough turns into a stall. Pure data: no clock is read here, times come from the snapshots.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/finding.h"

namespace ad {

class History {
 public:
  // Starts a scan taken at `now_unix_ms`. Keys not observed before EndScan() are forgotten, so a
  // condition that went away and came back starts a fresh age.
  void BeginScan(int64_t now_unix_ms);
  // Marks `key` as seen in the current scan; returns when it was first seen (continuously).
  int64_t Observe(std::string_view key);
  void EndScan();

  std::optional<int64_t> FirstSeen(std::string_view key) const;
  size_t size() const { return first_seen_.size(); }
  int64_t now_unix_ms() const { return now_unix_ms_; }

 private:
  int64_t now_unix_ms_ = 0;
  std::map<std::string, int64_t, std::less<>> first_seen_;
  std::map<std::string, int64_t, std::less<>> seen_this_scan_;
};

// What changed between two successive analyses (watch mode).
struct FindingChange {
  enum class Kind : uint8_t { kOpened, kResolved };
  Kind kind = Kind::kOpened;
  Finding finding;  // the new finding when opened, the last seen one when resolved
};

// A finding's identity across scans: code, netns inode and the subject its check set. Not the
// summary, the pod name (joined later from CRI) or the netns path (a /proc/<pid> path changes
// with the pid): a CRI outage, a pid change or a reworded summary is not a change.
std::string FindingIdentity(const Finding& finding);

// Resolved findings first (in `before` order), then opened ones (in `after` order).
std::vector<FindingChange> DiffFindings(const std::vector<Finding>& before,
                                        const std::vector<Finding>& after);

}  // namespace ad
