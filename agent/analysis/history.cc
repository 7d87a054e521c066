#include "analysis/history.h"

#include <ctime>
#include <set>
#include <string>
#include <utility>

#include "analysis/checks.h"

namespace ad {

void History::BeginScan(int64_t now_unix_ms) {
  now_unix_ms_ = now_unix_ms;
  seen_this_scan_.clear();
}

int64_t History::Observe(std::string_view key) {
  if (auto seen = seen_this_scan_.find(key); seen != seen_this_scan_.end()) return seen->second;
  auto known = first_seen_.find(key);
  const int64_t first = known == first_seen_.end() ? now_unix_ms_ : known->second;
  seen_this_scan_.emplace(std::string(key), first);
  return first;
}

void History::EndScan() {
  first_seen_ = std::move(seen_this_scan_);
  seen_this_scan_.clear();
}

std::optional<int64_t> History::FirstSeen(std::string_view key) const {
  auto it = first_seen_.find(key);
  if (it == first_seen_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, int64_t> History::Export() const {
  return {first_seen_.begin(), first_seen_.end()};
}

void History::Restore(const std::map<std::string, int64_t>& first_seen) {
  first_seen_ = {first_seen.begin(), first_seen.end()};
  seen_this_scan_.clear();
}

std::string FindingIdentity(const Finding& finding) {
  return std::string(finding.code_name()) + '\x1f' + std::to_string(finding.netns_inode) + '\x1f' +
         finding.subject;
}

std::vector<FindingChange> DiffFindings(const std::vector<Finding>& before,
                                        const std::vector<Finding>& after) {
  std::set<std::string> before_ids;
  std::set<std::string> after_ids;
  for (const Finding& finding : before) before_ids.insert(FindingIdentity(finding));
  for (const Finding& finding : after) after_ids.insert(FindingIdentity(finding));
  std::vector<FindingChange> changes;
  std::set<std::string> reported;  // identical findings (same identity) change once
  for (const Finding& finding : before) {
    std::string id = FindingIdentity(finding);
    if (after_ids.contains(id) || !reported.insert(id).second) continue;
    changes.push_back({FindingChange::Kind::kResolved, finding});
  }
  reported.clear();
  for (const Finding& finding : after) {
    std::string id = FindingIdentity(finding);
    if (before_ids.contains(id) || !reported.insert(id).second) continue;
    changes.push_back({FindingChange::Kind::kOpened, finding});
  }
  return changes;
}

void CompactResolvedEvidence(Finding& finding) {
  std::vector<std::string>& evidence = finding.evidence;
  if (evidence.size() > kResolvedEvidenceLines) {
    const size_t dropped = evidence.size() - (kResolvedEvidenceLines - 1);
    evidence.resize(kResolvedEvidenceLines - 1);
    evidence.push_back("… " + std::to_string(dropped) +
                       " more evidence lines (not kept once resolved)");
  }
  for (std::string& line : evidence) {
    if (line.size() <= kResolvedEvidenceLineBytes) continue;
    size_t cut = kResolvedEvidenceLineBytes - 3;  // room for "…" (3 bytes of UTF-8)
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
    line.resize(cut);
    line += "…";
    line.shrink_to_fit();
  }
  evidence.shrink_to_fit();
}

std::vector<FindingRecord> FindingHistory::Apply(const std::vector<Finding>& open_now,
                                                 int64_t now_unix_ms) {
  std::vector<FindingRecord> records;
  records.reserve(open_now.size());
  std::map<std::string, FindingRecord, std::less<>> still_open;
  for (const Finding& finding : open_now) {
    std::string id = FindingIdentity(finding);
    FindingRecord record;
    if (auto it = still_open.find(id); it != still_open.end()) {
      record = it->second;  // the same identity twice in one step: one record
    } else if (auto known = open_.find(id); known != open_.end()) {
      record = std::move(known->second);
      open_.erase(known);
    } else if (auto seed = seeds_.find(id); seed != seeds_.end()) {
      record.first_seen_unix_ms = seed->second;
    } else {
      record.first_seen_unix_ms = now_unix_ms;
    }
    record.finding = finding;
    record.last_seen_unix_ms = now_unix_ms;
    records.push_back(record);
    still_open.insert_or_assign(std::move(id), std::move(record));
  }
  for (auto& [id, record] : open_) {  // not seen in this step: resolved now
    record.resolved_at_unix_ms = now_unix_ms;
    CompactResolvedEvidence(record.finding);
    resolved_.push_back(std::move(record));
  }
  if (resolved_.size() > capacity_) {
    const size_t excess = resolved_.size() - capacity_;
    resolved_.erase(resolved_.begin(), resolved_.begin() + static_cast<std::ptrdiff_t>(excess));
    dropped_ += excess;
  }
  open_ = std::move(still_open);
  seeds_.clear();  // a seed stands for the first step only
  return records;
}

std::map<std::string, int64_t> FindingHistory::OpenFirstSeen() const {
  std::map<std::string, int64_t> first_seen;
  for (const auto& [id, record] : open_) first_seen.emplace(id, record.first_seen_unix_ms);
  return first_seen;
}

namespace analysis {

std::string FormatUnixMs(int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  if (gmtime_r(&seconds, &utc) == nullptr) return std::to_string(unix_ms) + " ms";
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace analysis

}  // namespace ad
