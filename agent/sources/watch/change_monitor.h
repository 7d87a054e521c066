// ChangeMonitor: event-driven change detection for many netns in one epoll set. Per watched netns
// it holds an nf_tables event socket, a GETGEN gate socket, an rtnetlink rule/route socket and the
// iptables-legacy fingerprint handles, all opened inside the netns on a short-lived worker thread
// (NetnsGuard, always restored). Optionally it watches the netns directories for names appearing
// and disappearing. Poll() turns the events into coalesced "dirty" netns: a netns is reported once
// its events have been quiet for the coalescing window (iptables-nft-restore commits once per
// table, so a single restore is one report), or after max_delay under sustained churn. Verify()
// is the periodic resync's gate (generation and legacy content hash of every netns).
// Read-only by construction: it subscribes, asks GETGEN/GET_INFO/GET_ENTRIES and reads.
//
// Use (e.g. by `serve`): DiscoverNetns() -> Watch() each record; then loop on Poll(timeout) and
// re-read exactly the netns it returns (kOverflow: everything of that netns; kRemoved: drop it,
// its fds are already closed). Netns reached only through /proc/<pid>/ns/net get no inotify
// events: the caller Unwatch()es them on process churn. When to resync stays the caller's. Not
// thread-safe: one owner thread calls everything.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "model/result.h"
#include "model/snapshot.h"
#include "sources/watch/netns_dir_watcher.h"
#include "sources/watch/watch_sockets.h"

namespace ad::watch {

// Why a netns needs a re-read (a bit set; several may apply at once).
enum class DirtyReason : uint8_t {
  kNftCommit,      // NEWGEN event, or the GETGEN gate saw a new generation
  kRoute,          // RTM_NEWROUTE / RTM_DELROUTE
  kRule,           // RTM_NEWRULE / RTM_DELRULE
  kLegacyChanged,  // iptables-legacy fingerprint (gate or content hash) differs
  kOverflow,       // ENOBUFS or a socket error: events were lost, re-read everything of it
  kAdded,          // a new netns bind mount (nsfs) appeared in a watched directory
  kRemoved,        // its last known path disappeared; every fd of it is closed already
};
inline constexpr int kDirtyReasonCount = static_cast<int>(DirtyReason::kRemoved) + 1;
std::string_view DirtyReasonName(DirtyReason reason);  // "nft-commit", "route", ...

using DirtyReasons = uint32_t;
constexpr DirtyReasons ReasonBit(DirtyReason reason) { return 1u << static_cast<int>(reason); }
inline bool HasReason(DirtyReasons reasons, DirtyReason reason) {
  return (reasons & ReasonBit(reason)) != 0;
}
std::string DescribeReasons(DirtyReasons reasons);  // "nft-commit,route"

struct DirtyNetns {
  uint64_t inode = 0;
  std::string path;  // the path it is watched by (for kAdded/kRemoved: the path that changed)
  DirtyReasons reasons = 0;
  std::vector<NftCommit> commits;  // NEWGENs coalesced into this report (bounded)
  uint32_t commits_dropped = 0;    // NEWGENs beyond the bound
};

struct ChangeMonitorConfig {
  std::chrono::milliseconds coalesce_window{10};  // quiet time after a burst before reporting
  std::chrono::milliseconds max_delay{100};       // report even if the burst goes on
  // Poll() runs the gates when due; 0 = only when PollLegacy()/PollGenerations() are called.
  std::chrono::milliseconds legacy_interval{1000};
  int legacy_hash_every = 10;  // every Nth legacy poll also hashes GET_ENTRIES (0 = never)
  // Each automatic legacy poll checks 1/legacy_spread of the netns (round robin), so a node full
  // of legacy tables stays cheap per poll; a change is then seen within legacy_spread intervals.
  int legacy_spread = 1;
  std::chrono::milliseconds generation_interval{0};
  // Route changes only count in these routing tables (empty: every table). The daemon reads
  // Istio's table 100 only, so changes to main/local (addresses coming up) are no reason.
  std::set<uint32_t> route_tables;
  int nft_receive_buffer = 0;    // SO_RCVBUF of the event sockets; 0 = kernel default
  int route_receive_buffer = 0;  // likewise
  // Netns directories to watch for added/removed netns (empty = no directory watcher).
  std::vector<std::string> netns_dirs;
  std::string name_glob;        // only names matching (fnmatch); "" = all
  bool watch_added = true;      // Watch() an added netns automatically
  bool unwatch_removed = true;  // Unwatch() a netns whose last path disappeared
  std::chrono::milliseconds nsfs_deadline{2000};
  // An fd of the caller's (the daemon's CNI config directory inotify) whose readability ends
  // Poll() early, so the caller sees it at once; the caller drains it. -1: none.
  int external_fd = -1;
  // An fd whose readability ends Poll() at once and is left to the caller (the daemon's stop
  // eventfd): an idle caller then waits for its next deadline instead of waking to check. -1: none.
  int wake_fd = -1;
};

struct ChangeMonitorCounters {
  uint64_t events = 0;  // netlink messages and inotify-derived netns events
  uint64_t nft_commits = 0;
  uint64_t overflows = 0;
  uint64_t polls = 0;
  uint64_t generation_checks = 0;
  uint64_t legacy_gate_checks = 0;
  uint64_t legacy_hash_checks = 0;
  uint64_t gate_errors = 0;
  uint64_t watch_errors = 0;
  uint64_t nsfs_waits = 0;     // names not yet an nsfs mount when first seen (the race)
  uint64_t nsfs_timeouts = 0;  // names that never became one within nsfs_deadline
  std::array<uint64_t, kDirtyReasonCount> dirty_by_reason{};
};

enum class LegacyDepth : uint8_t { kGate, kContentHash };

class ChangeMonitor {
  struct Key {};  // only Create() constructs

 public:
  static Result<std::unique_ptr<ChangeMonitor>> Create(ChangeMonitorConfig config);
  ChangeMonitor(Key key, ChangeMonitorConfig config, UniqueFd epoll);
  ~ChangeMonitor();
  ChangeMonitor(const ChangeMonitor&) = delete;
  ChangeMonitor& operator=(const ChangeMonitor&) = delete;

  // Opens every socket of the netns (inside it, on a worker thread) and records the baselines
  // (generation, legacy fingerprints). Watching an inode again only adds its paths.
  Status Watch(const NetnsRecord& record);
  // Closes every socket and fd of that netns at once (a held socket keeps a deleted netns alive).
  bool Unwatch(uint64_t inode);
  bool IsWatched(uint64_t inode) const { return netns_.contains(inode); }
  size_t watched() const { return netns_.size(); }
  std::vector<uint64_t> WatchedInodes() const;

  // Waits up to `timeout` for coalesced dirty netns; returns as soon as there are any (may be
  // empty on timeout). timeout 0 = only what is ready now.
  std::vector<DirtyNetns> Poll(std::chrono::milliseconds timeout);

  // The periodic gates; a change marks the netns pending (reported by the next Poll()).
  // PollLegacy checks the next `max_netns` netns round robin (0 = all of them).
  void PollLegacy(LegacyDepth depth, size_t max_netns = 0);
  void PollGenerations();
  // The periodic resync's gate: events already queued are taken in, every watched netns's
  // nf_tables generation and iptables-legacy content hash are compared with their baselines, and
  // every netns that differs or has events pending is returned at once (no coalescing wait).
  std::vector<DirtyNetns> Verify();

  // Call just before the caller re-reads these netns (empty = every watched one): their
  // iptables-legacy baselines become what the read will see. Without it a change the read saw
  // before the gate did (e.g. in a full resync) stays in the baseline, and undoing it later
  // (delete, then restore) looks like no change at all.
  void RefreshLegacyBaselines(const std::set<uint64_t>& inodes);

  const ChangeMonitorCounters& counters() const { return counters_; }
  // Whether external_fd became readable during the last Poll() (reset by the next Poll()).
  bool external_ready() const { return external_ready_; }

 private:
  struct Watched;
  struct Pending {
    std::string path;
    DirtyReasons reasons = 0;
    std::vector<NftCommit> commits;
    uint32_t commits_dropped = 0;
    std::chrono::steady_clock::time_point first_event;
    std::chrono::steady_clock::time_point last_event;
  };

  void Mark(uint64_t inode, const std::string& path, DirtyReasons reasons,
            std::vector<NftCommit> commits = {}, uint32_t commits_dropped = 0);
  void HandleReady(uint64_t token);
  void HandleDirEvents();
  void RunDueGates();
  void CheckLegacy(LegacyDepth depth, uint64_t inode, Watched& watched);
  static void TakeLegacyBaseline(Watched& watched);
  std::vector<DirtyNetns> TakeReady(std::chrono::steady_clock::time_point now,
                                    std::chrono::steady_clock::time_point* next_due);

  ChangeMonitorConfig config_;
  UniqueFd epoll_;
  std::optional<NetnsDirWatcher> dir_watcher_;
  std::map<uint64_t, std::unique_ptr<Watched>> netns_;  // by netns inode
  std::map<uint64_t, Pending> pending_;
  uint64_t next_token_ = 1;
  std::map<uint64_t, std::pair<uint64_t, int>> tokens_;  // epoll token -> (inode, socket kind)
  std::chrono::steady_clock::time_point next_legacy_{};
  std::chrono::steady_clock::time_point next_generation_{};
  uint64_t legacy_polls_ = 0;
  uint64_t legacy_cursor_ = 0;  // inode checked last by PollLegacy
  ChangeMonitorCounters counters_;
  bool external_ready_ = false;
  bool woken_ = false;  // wake_fd was readable during this Poll()
};

}  // namespace ad::watch
