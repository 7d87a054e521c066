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

// What an engine remembers across scans, as plain data: first-seen times of aged conditions
// (History), of the desired-state conditions, and of open findings by FindingIdentity. A daemon's
// capture carries it so that a replay ages every condition as the daemon did.
struct HistoryMemory {
  std::map<std::string, int64_t> signal_first_seen;
  std::map<std::string, int64_t> desired_first_seen;
  std::map<std::string, int64_t> finding_first_seen;

  bool empty() const {
    return signal_first_seen.empty() && desired_first_seen.empty() && finding_first_seen.empty();
  }
  bool operator==(const HistoryMemory&) const = default;
};

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
  // The first-seen times as data, and back (a replay starts from a capture's).
  std::map<std::string, int64_t> Export() const;
  void Restore(const std::map<std::string, int64_t>& first_seen);

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

// A finding's life across steps (the daemon's history): when it opened, when it was last seen,
// when it resolved. Ages of non-ZDS findings come from here.
struct FindingRecord {
  Finding finding;  // the latest version (evidence updates while it is open)
  int64_t first_seen_unix_ms = 0;
  int64_t last_seen_unix_ms = 0;
  int64_t resolved_at_unix_ms = 0;  // 0 while open
};

// What a resolved finding keeps of its evidence: the ring holds up to 1,000 of them for the
// daemon's lifetime, and an open finding's evidence can list every rule or pod IP it is about.
inline constexpr size_t kResolvedEvidenceLines = 8;
inline constexpr size_t kResolvedEvidenceLineBytes = 256;

// Bounds `finding.evidence` to kResolvedEvidenceLines lines of at most kResolvedEvidenceLineBytes,
// saying so in the evidence itself (a cut line ends in "…", dropped lines are counted in the last).
void CompactResolvedEvidence(Finding& finding);

// Open findings by identity, plus a bounded ring of resolved ones (oldest dropped first, and
// counted; their evidence compacted). Pure data: times come from the caller.
class FindingHistory {
 public:
  explicit FindingHistory(size_t resolved_capacity = 1000) : capacity_(resolved_capacity) {}

  // One step: `open_now` are the findings of this step, `now_unix_ms` its time. Returns the
  // records of `open_now`, in its order.
  std::vector<FindingRecord> Apply(const std::vector<Finding>& open_now, int64_t now_unix_ms);

  size_t open_count() const { return open_.size(); }
  // First-seen times of the open findings by identity, and the seed a replay starts from: a
  // finding whose identity is seeded opens with that time instead of the step's.
  std::map<std::string, int64_t> OpenFirstSeen() const;
  void Seed(std::map<std::string, int64_t> first_seen) { seeds_ = std::move(first_seen); }
  const std::vector<FindingRecord>& resolved() const { return resolved_; }  // oldest first
  uint64_t resolved_dropped() const { return dropped_; }

 private:
  size_t capacity_;
  std::map<std::string, FindingRecord, std::less<>> open_;
  std::vector<FindingRecord> resolved_;
  uint64_t dropped_ = 0;
  std::map<std::string, int64_t> seeds_;
};

}  // namespace ad
