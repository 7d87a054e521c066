#include "sources/watch/change_monitor.h"

#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <thread>
#include <tuple>
#include <utility>

#include "sources/netns/netns_guard.h"
#include "sources/netns/netns_workers.h"
#include "sources/watch/legacy_fingerprint.h"

namespace ad::watch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kDirWatcherToken = 0;
constexpr uint64_t kExternalToken = UINT64_MAX;
constexpr uint64_t kWakeToken = UINT64_MAX - 1;
constexpr int kNftSocket = 0;
constexpr int kRouteSocket = 1;
constexpr int kMaxEpollEvents = 64;

constexpr std::array<std::string_view, kDirtyReasonCount> kReasonNames = {
    "nft-commit", "route", "rule", "legacy-changed", "overflow", "added", "removed"};

uint64_t InodeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

std::string_view DirtyReasonName(DirtyReason reason) {
  return kReasonNames[static_cast<size_t>(reason)];
}

std::string DescribeReasons(DirtyReasons reasons) {
  std::string text;
  for (int i = 0; i < kDirtyReasonCount; ++i) {
    if ((reasons & (1u << i)) == 0) continue;
    if (!text.empty()) text += ',';
    text += kReasonNames[static_cast<size_t>(i)];
  }
  return text;
}

// Everything held for one netns; destroying it closes every fd bound to that netns.
struct ChangeMonitor::Watched {
  uint64_t inode = 0;
  std::vector<std::string> paths;
  std::optional<NftEventSocket> nft_events;
  std::optional<NftGenerationGate> generation_gate;
  std::optional<RouteEventSocket> route_events;
  std::optional<LegacyFingerprint> legacy;
  uint64_t nft_token = 0;
  uint64_t route_token = 0;
  std::optional<uint32_t> generation;
  std::optional<uint64_t> legacy_gate;
  std::optional<uint64_t> legacy_hash;
};

Result<std::unique_ptr<ChangeMonitor>> ChangeMonitor::Create(ChangeMonitorConfig config) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return ErrnoError(SourceKind::kNetns, "epoll_create1");
  auto monitor = std::make_unique<ChangeMonitor>(Key{}, std::move(config), std::move(epoll));
  if (!monitor->config_.netns_dirs.empty()) {
    Result<NetnsDirWatcher> watcher =
        NetnsDirWatcher::Open({.dirs = monitor->config_.netns_dirs,
                               .name_glob = monitor->config_.name_glob,
                               .nsfs_deadline = monitor->config_.nsfs_deadline});
    if (!watcher.ok()) return watcher.error();
    monitor->dir_watcher_.emplace(std::move(watcher).value());
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kDirWatcherToken;
    if (::epoll_ctl(monitor->epoll_.get(), EPOLL_CTL_ADD, monitor->dir_watcher_->fd(), &event) !=
        0) {
      return ErrnoError(SourceKind::kNetns, "epoll_ctl(inotify)");
    }
  }
  if (monitor->config_.external_fd >= 0) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kExternalToken;
    if (::epoll_ctl(monitor->epoll_.get(), EPOLL_CTL_ADD, monitor->config_.external_fd, &event) !=
        0) {
      return ErrnoError(SourceKind::kNetns, "epoll_ctl(external fd)");
    }
  }
  if (monitor->config_.wake_fd >= 0) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kWakeToken;
    if (::epoll_ctl(monitor->epoll_.get(), EPOLL_CTL_ADD, monitor->config_.wake_fd, &event) != 0) {
      return ErrnoError(SourceKind::kNetns, "epoll_ctl(wake fd)");
    }
  }
  return monitor;
}

ChangeMonitor::ChangeMonitor(Key /*key*/, ChangeMonitorConfig config, UniqueFd epoll)
    : config_(std::move(config)), epoll_(std::move(epoll)) {}

ChangeMonitor::~ChangeMonitor() = default;

std::vector<uint64_t> ChangeMonitor::WatchedInodes() const {
  std::vector<uint64_t> inodes;
  for (const auto& [inode, watched] : netns_) inodes.push_back(inode);
  return inodes;
}

Status ChangeMonitor::Watch(const NetnsRecord& record) {
  if (auto it = netns_.find(record.inode); record.inode != 0 && it != netns_.end()) {
    for (const std::string& path : record.paths) {
      if (std::find(it->second->paths.begin(), it->second->paths.end(), path) ==
          it->second->paths.end()) {
        it->second->paths.push_back(path);
      }
    }
    return OkStatus();
  }
  const std::string& path = record.PrimaryPath();
  auto watched = std::make_unique<Watched>();
  Status required;  // a netns that cannot be entered or subscribed to is not watched
  uint64_t optional_errors = 0;
  // setns() only on a worker thread: the owner thread never leaves its netns.
  NetnsWorkers::Shared().Run([&] {
    Result<NetnsGuard> guard = NetnsGuard::Enter(path);
    if (!guard.ok()) {
      required = guard.error();
      return;
    }
    watched->inode = InodeOf("/proc/thread-self/ns/net");
    Result<NftEventSocket> nft = NftEventSocket::Open(config_.nft_receive_buffer);
    Result<RouteEventSocket> route = RouteEventSocket::Open(config_.route_receive_buffer);
    if (!nft.ok() || !route.ok()) {
      required = !nft.ok() ? nft.error() : route.error();
      return;
    }
    watched->nft_events.emplace(std::move(nft).value());
    watched->route_events.emplace(std::move(route).value());
    Result<NftGenerationGate> gate = NftGenerationGate::Open();
    if (gate.ok()) {
      watched->generation_gate.emplace(std::move(gate).value());
    } else {
      ++optional_errors;
    }
    Result<LegacyFingerprint> legacy = LegacyFingerprint::Open();
    if (legacy.ok()) {
      watched->legacy.emplace(std::move(legacy).value());
    } else {
      ++optional_errors;
    }
  });
  if (!required.ok()) {
    ++counters_.watch_errors;
    return required;
  }
  if (record.inode != 0 && record.inode != watched->inode) {
    ++counters_.watch_errors;
    return SourceError{SourceKind::kNetns,
                       "watch(" + path + "): netns inode " + std::to_string(watched->inode) +
                           " is not the expected " + std::to_string(record.inode),
                       ESTALE};
  }
  if (netns_.contains(watched->inode)) {  // reached through another path
    return Watch(NetnsRecord{.inode = watched->inode, .paths = record.paths});
  }
  counters_.watch_errors += optional_errors;
  watched->paths = record.paths.empty() ? std::vector<std::string>{path} : record.paths;
  // Baselines after subscribing: a commit in between shows up as an event, never as a gap.
  if (watched->generation_gate) {
    Result<uint32_t> generation = watched->generation_gate->Generation();
    if (generation.ok()) watched->generation = *generation;
  }
  TakeLegacyBaseline(*watched);
  watched->nft_token = next_token_++;
  watched->route_token = next_token_++;
  for (auto [fd, token, kind] :
       {std::tuple{watched->nft_events->fd(), watched->nft_token, kNftSocket},
        std::tuple{watched->route_events->fd(), watched->route_token, kRouteSocket}}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = token;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
      ++counters_.watch_errors;
      tokens_.erase(watched->nft_token);
      tokens_.erase(watched->route_token);
      return ErrnoError(SourceKind::kNetns, "epoll_ctl(" + path + ")");
    }
    tokens_[token] = {watched->inode, kind};
  }
  const uint64_t inode = watched->inode;
  netns_[inode] = std::move(watched);
  return OkStatus();
}

bool ChangeMonitor::Unwatch(uint64_t inode) {
  auto it = netns_.find(inode);
  if (it == netns_.end()) return false;
  tokens_.erase(it->second->nft_token);
  tokens_.erase(it->second->route_token);
  netns_.erase(it);  // closing the fds also drops them from the epoll set
  pending_.erase(inode);
  return true;
}

void ChangeMonitor::Mark(uint64_t inode, const std::string& path, DirtyReasons reasons,
                         std::vector<NftCommit> commits, uint32_t commits_dropped) {
  const Clock::time_point now = Clock::now();
  auto [it, inserted] = pending_.try_emplace(inode);
  Pending& pending = it->second;
  if (inserted) {
    pending.path = path;
    pending.first_event = now;
  }
  pending.last_event = now;
  pending.reasons |= reasons;
  for (NftCommit& commit : commits) {
    if (pending.commits.size() < kMaxCommitsPerDrain) {
      pending.commits.push_back(std::move(commit));
    } else {
      ++pending.commits_dropped;
    }
  }
  pending.commits_dropped += commits_dropped;
}

void ChangeMonitor::HandleReady(uint64_t token) {
  if (token == kDirWatcherToken) {
    HandleDirEvents();
    return;
  }
  if (token == kExternalToken) {
    external_ready_ = true;
    return;
  }
  if (token == kWakeToken) {
    woken_ = true;
    return;
  }
  auto token_it = tokens_.find(token);
  if (token_it == tokens_.end()) return;
  const auto [inode, kind] = token_it->second;
  Watched& watched = *netns_.at(inode);
  const std::string& path = watched.paths.front();
  if (kind == kNftSocket) {
    NftDrain drain = watched.nft_events->Drain();
    const uint64_t commits = drain.commits.size() + drain.commits_dropped;
    counters_.events += drain.object_messages + commits;
    counters_.nft_commits += commits;
    DirtyReasons reasons = 0;
    if (commits > 0 || drain.object_messages > 0) reasons |= ReasonBit(DirtyReason::kNftCommit);
    if (!drain.commits.empty()) watched.generation = drain.commits.back().generation;
    if (drain.overflow) {
      ++counters_.overflows;
      reasons |= ReasonBit(DirtyReason::kOverflow);
      // Lost NEWGENs: take the generation now so the gate does not report the same loss again.
      if (watched.generation_gate) {
        Result<uint32_t> generation = watched.generation_gate->Generation();
        if (generation.ok()) watched.generation = *generation;
      }
    }
    if (reasons != 0) Mark(inode, path, reasons, std::move(drain.commits), drain.commits_dropped);
  } else {
    RouteDrain drain = watched.route_events->Drain();
    counters_.events += drain.rule_messages + drain.route_messages;
    DirtyReasons reasons = 0;
    if (drain.rule_messages > 0) reasons |= ReasonBit(DirtyReason::kRule);
    const bool route_counts =
        config_.route_tables.empty()
            ? drain.route_messages > 0
            : std::any_of(drain.route_tables.begin(), drain.route_tables.end(),
                          [this](uint32_t table) { return config_.route_tables.contains(table); });
    if (route_counts) reasons |= ReasonBit(DirtyReason::kRoute);
    if (drain.overflow) {
      ++counters_.overflows;
      reasons |= ReasonBit(DirtyReason::kOverflow);
    }
    if (reasons != 0) Mark(inode, path, reasons);
  }
}

void ChangeMonitor::HandleDirEvents() {
  std::vector<NetnsDirEvent> events = dir_watcher_->Drain();
  counters_.nsfs_timeouts = dir_watcher_->nsfs_timeouts();
  counters_.nsfs_waits = dir_watcher_->nsfs_waits();
  for (const NetnsDirEvent& event : events) {
    if (event.kind == NetnsDirEvent::Kind::kAdded) {
      const uint64_t inode = InodeOf(event.path);
      if (inode == 0) continue;  // gone again already
      ++counters_.events;
      // A failed Watch() is counted in watch_errors; the netns is marked as added either way.
      if (auto it = netns_.find(inode); it != netns_.end()) {
        // One more path of the same netns.
        (void)Watch(NetnsRecord{.inode = inode, .paths = {event.path}});
        continue;
      }
      if (config_.watch_added) (void)Watch(NetnsRecord{.inode = inode, .paths = {event.path}});
      Mark(inode, event.path, ReasonBit(DirtyReason::kAdded));
      continue;
    }
    for (auto& [inode, watched] : netns_) {
      auto path_it = std::find(watched->paths.begin(), watched->paths.end(), event.path);
      if (path_it == watched->paths.end()) continue;
      ++counters_.events;
      watched->paths.erase(path_it);
      // Other paths (another bind mount, /proc/<pid>/ns/net) may still reach the same netns.
      // (A copy: clang before 16 cannot capture a structured binding.)
      const uint64_t netns_inode = inode;
      std::erase_if(watched->paths,
                    [&](const std::string& p) { return InodeOf(p) != netns_inode; });
      if (!watched->paths.empty()) break;
      const uint64_t removed = inode;
      if (config_.unwatch_removed) {
        Unwatch(removed);
      } else {
        watched->paths.push_back(event.path);
      }
      Mark(removed, event.path, ReasonBit(DirtyReason::kRemoved));
      break;
    }
  }
}

void ChangeMonitor::PollGenerations() {
  for (auto& [inode, watched] : netns_) {
    if (!watched->generation_gate) continue;
    ++counters_.generation_checks;
    Result<uint32_t> generation = watched->generation_gate->Generation();
    if (!generation.ok()) {
      ++counters_.gate_errors;
      continue;
    }
    if (watched->generation != *generation) {
      watched->generation = *generation;
      Mark(inode, watched->paths.front(), ReasonBit(DirtyReason::kNftCommit));
    }
  }
}

void ChangeMonitor::PollLegacy(LegacyDepth depth, size_t max_netns) {
  const size_t count = max_netns == 0 ? netns_.size() : std::min(max_netns, netns_.size());
  auto it = netns_.upper_bound(legacy_cursor_);
  for (size_t done = 0; done < count; ++done, ++it) {
    if (it == netns_.end()) it = netns_.begin();
    legacy_cursor_ = it->first;
    CheckLegacy(depth, it->first, *it->second);
  }
}

void ChangeMonitor::TakeLegacyBaseline(Watched& watched) {
  if (!watched.legacy) return;
  Result<uint64_t> gate = watched.legacy->Gate();
  if (gate.ok()) watched.legacy_gate = *gate;
  Result<uint64_t> hash = watched.legacy->ContentHash();
  if (hash.ok()) watched.legacy_hash = *hash;
}

void ChangeMonitor::RefreshLegacyBaselines(const std::set<uint64_t>& inodes) {
  if (inodes.empty()) {
    for (auto& [inode, watched] : netns_) TakeLegacyBaseline(*watched);
    return;
  }
  for (uint64_t inode : inodes) {
    if (auto it = netns_.find(inode); it != netns_.end()) TakeLegacyBaseline(*it->second);
  }
}

void ChangeMonitor::CheckLegacy(LegacyDepth depth, uint64_t inode, Watched& watched) {
  if (!watched.legacy) return;
  ++counters_.legacy_gate_checks;
  Result<uint64_t> gate = watched.legacy->Gate();
  if (!gate.ok()) {
    ++counters_.gate_errors;
    return;
  }
  bool changed = watched.legacy_gate != *gate;
  watched.legacy_gate = *gate;
  // A changed gate refreshes the hash baseline too, so one change is reported once.
  if (changed || depth == LegacyDepth::kContentHash) {
    ++counters_.legacy_hash_checks;
    Result<uint64_t> hash = watched.legacy->ContentHash();
    if (hash.ok()) {
      changed = changed || watched.legacy_hash != *hash;
      watched.legacy_hash = *hash;
    } else {
      ++counters_.gate_errors;
    }
  }
  if (changed) Mark(inode, watched.paths.front(), ReasonBit(DirtyReason::kLegacyChanged));
}

void ChangeMonitor::RunDueGates() {
  const Clock::time_point now = Clock::now();
  if (config_.legacy_interval.count() > 0 && now >= next_legacy_) {
    ++legacy_polls_;
    const bool hash =
        config_.legacy_hash_every > 0 && legacy_polls_ % config_.legacy_hash_every == 0;
    const size_t spread = static_cast<size_t>(std::max(1, config_.legacy_spread));
    PollLegacy(hash ? LegacyDepth::kContentHash : LegacyDepth::kGate,
               (netns_.size() + spread - 1) / spread);
    next_legacy_ = now + config_.legacy_interval;
  }
  if (config_.generation_interval.count() > 0 && now >= next_generation_) {
    PollGenerations();
    next_generation_ = now + config_.generation_interval;
  }
}

std::vector<DirtyNetns> ChangeMonitor::TakeReady(Clock::time_point now,
                                                 Clock::time_point* next_due) {
  std::vector<DirtyNetns> ready;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const Pending& pending = it->second;
    const Clock::time_point due = std::min(pending.last_event + config_.coalesce_window,
                                           pending.first_event + config_.max_delay);
    if (now < due) {
      *next_due = std::min(*next_due, due);
      ++it;
      continue;
    }
    for (int i = 0; i < kDirtyReasonCount; ++i) {
      if ((pending.reasons & (1u << i)) != 0) ++counters_.dirty_by_reason[static_cast<size_t>(i)];
    }
    ready.push_back(DirtyNetns{.inode = it->first,
                               .path = pending.path,
                               .reasons = pending.reasons,
                               .commits = std::move(it->second.commits),
                               .commits_dropped = pending.commits_dropped});
    it = pending_.erase(it);
  }
  return ready;
}

std::vector<DirtyNetns> ChangeMonitor::Verify() {
  std::array<epoll_event, kMaxEpollEvents> events;
  for (;;) {  // what is queued now, without waiting
    const int n = ::epoll_wait(epoll_.get(), events.data(), kMaxEpollEvents, 0);
    for (int i = 0; i < n; ++i) HandleReady(events[static_cast<size_t>(i)].data.u64);
    if (n < kMaxEpollEvents) break;
  }
  if (dir_watcher_ && dir_watcher_->HasPending()) HandleDirEvents();
  PollGenerations();
  PollLegacy(LegacyDepth::kContentHash);
  Clock::time_point ignored = Clock::time_point::max();
  return TakeReady(Clock::time_point::max(), &ignored);
}

std::vector<DirtyNetns> ChangeMonitor::Poll(std::chrono::milliseconds timeout) {
  ++counters_.polls;
  external_ready_ = false;
  woken_ = false;
  const Clock::time_point deadline = Clock::now() + timeout;
  std::array<epoll_event, kMaxEpollEvents> events;
  for (;;) {
    RunDueGates();
    Clock::time_point now = Clock::now();
    Clock::time_point wake = deadline;
    std::vector<DirtyNetns> ready = TakeReady(now, &wake);
    if (!ready.empty()) return ready;
    if (dir_watcher_ && dir_watcher_->HasPending()) {
      wake = std::min(wake, now + std::chrono::milliseconds(1));  // retry the nsfs check soon
    }
    if (config_.legacy_interval.count() > 0) wake = std::min(wake, next_legacy_);
    if (config_.generation_interval.count() > 0) wake = std::min(wake, next_generation_);
    const auto wait = std::max(Clock::duration::zero(), wake - now);
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(wait);
    const timespec wait_spec{
        .tv_sec = seconds.count(),
        .tv_nsec = std::chrono::duration_cast<std::chrono::nanoseconds>(wait - seconds).count()};
    const int n = ::epoll_pwait2(epoll_.get(), events.data(), kMaxEpollEvents, &wait_spec, nullptr);
    for (int i = 0; i < n; ++i) HandleReady(events[static_cast<size_t>(i)].data.u64);
    if (dir_watcher_ && dir_watcher_->HasPending()) HandleDirEvents();
    if (external_ready_ || woken_ || Clock::now() >= deadline) {
      now = Clock::now();
      Clock::time_point ignored = now;
      return TakeReady(now, &ignored);
    }
  }
}

}  // namespace ad::watch
