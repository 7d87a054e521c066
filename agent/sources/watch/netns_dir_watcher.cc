#include "sources/watch/netns_dir_watcher.h"

#include <dirent.h>
#include <fnmatch.h>
#include <linux/magic.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>

namespace ad::watch {
namespace {

constexpr uint32_t kNetnsDirMask =
    IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;
constexpr uint32_t kAncestorMask = IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The nearest existing ancestor of `path` (at worst "/").
std::string ExistingAncestor(const std::string& path) {
  std::filesystem::path current = std::filesystem::path(path).parent_path();
  while (!current.empty() && current != current.root_path() && !IsDirectory(current.string())) {
    current = current.parent_path();
  }
  return current.empty() ? "/" : current.string();
}

}  // namespace

bool IsNsfs(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && static_cast<uint64_t>(fs.f_type) == NSFS_MAGIC;
}

Result<NetnsDirWatcher> NetnsDirWatcher::Open(NetnsDirWatcherOptions options) {
  UniqueFd inotify(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify.valid()) return ErrnoError(SourceKind::kNetns, "inotify_init1");
  NetnsDirWatcher watcher(std::move(options), std::move(inotify));
  watcher.Arm(nullptr);  // names present now are the caller's discovery, not "added"
  return watcher;
}

bool NetnsDirWatcher::NameMatches(const std::string& name) const {
  return options_.name_glob.empty() || ::fnmatch(options_.name_glob.c_str(), name.c_str(), 0) == 0;
}

// (Re)places the watches: each netns dir when it exists, else its nearest existing ancestor.
// A netns dir that just appeared is scanned, since names may land in it before the watch does.
void NetnsDirWatcher::Arm(std::vector<NetnsDirEvent>* events) {
  std::vector<Watch> previous = std::move(watches_);
  watches_.clear();
  for (const std::string& dir : options_.dirs) {
    const bool exists = IsDirectory(dir);
    const std::string target = exists ? dir : ExistingAncestor(dir);
    // Same inode, same descriptor: re-adding a kept watch loses no events.
    const int descriptor = ::inotify_add_watch(
        inotify_.get(), target.c_str(), (exists ? kNetnsDirMask : kAncestorMask) | IN_MASK_ADD);
    if (descriptor < 0) continue;  // unreadable: discovery reports it; nothing to watch here
    watches_.push_back({descriptor, target, exists});
    const bool was_watched = std::any_of(previous.begin(), previous.end(), [&](const Watch& w) {
      return w.is_netns_dir && w.path == dir && w.descriptor == descriptor;
    });
    if (exists && !was_watched && events != nullptr) ScanDir(dir, events);
  }
  for (const Watch& old : previous) {
    const bool kept = std::any_of(watches_.begin(), watches_.end(),
                                  [&](const Watch& w) { return w.descriptor == old.descriptor; });
    if (!kept) ::inotify_rm_watch(inotify_.get(), old.descriptor);
  }
}

void NetnsDirWatcher::ScanDir(const std::string& dir, std::vector<NetnsDirEvent>* events) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    OnCreated(entry.path().string(), events);
  }
}

void NetnsDirWatcher::OnCreated(const std::string& path, std::vector<NetnsDirEvent>* events) {
  if (!NameMatches(std::filesystem::path(path).filename().string())) return;
  if (IsNsfs(path)) {
    events->push_back({NetnsDirEvent::Kind::kAdded, path});
    return;
  }
  const bool already = std::any_of(pending_.begin(), pending_.end(),
                                   [&](const Pending& pending) { return pending.path == path; });
  if (!already) {
    ++nsfs_waits_;
    pending_.push_back({path, std::chrono::steady_clock::now() + options_.nsfs_deadline});
  }
}

void NetnsDirWatcher::CheckPending(std::vector<NetnsDirEvent>* events) {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(pending_, [&](const Pending& pending) {
    if (IsNsfs(pending.path)) {
      events->push_back({NetnsDirEvent::Kind::kAdded, pending.path});
      return true;
    }
    struct stat st {};
    if (::lstat(pending.path.c_str(), &st) != 0) return true;  // removed before it was mounted
    if (now >= pending.deadline) {
      ++nsfs_timeouts_;  // a plain file, not a netns
      return true;
    }
    return false;
  });
}

std::vector<NetnsDirEvent> NetnsDirWatcher::Drain() {
  std::vector<NetnsDirEvent> events;
  bool rearm = false;
  alignas(inotify_event) std::array<char, 16 * 1024> buffer;
  for (;;) {
    const ssize_t n = ::read(inotify_.get(), buffer.data(), buffer.size());
    if (n <= 0) break;  // EAGAIN: drained
    for (ssize_t offset = 0; offset < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer.data() + offset);
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if ((event->mask & IN_Q_OVERFLOW) != 0) {
        ++queue_overflows_;
        rearm = true;  // names may have been missed: rescan every dir
        for (Watch& w : watches_) w.is_netns_dir = false;
        continue;
      }
      auto watch = std::find_if(watches_.begin(), watches_.end(),
                                [&](const Watch& w) { return w.descriptor == event->wd; });
      if (watch == watches_.end()) continue;
      if ((event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
        rearm = true;
        continue;
      }
      if (!watch->is_netns_dir) {
        rearm = true;  // something appeared on the way to a netns dir
        continue;
      }
      if (event->len == 0) continue;
      const std::string path = watch->path + "/" + event->name;
      if ((event->mask & (IN_CREATE | IN_MOVED_TO)) != 0) {
        OnCreated(path, &events);
      } else if ((event->mask & (IN_DELETE | IN_MOVED_FROM)) != 0) {
        std::erase_if(pending_, [&](const Pending& pending) { return pending.path == path; });
        if (NameMatches(event->name)) events.push_back({NetnsDirEvent::Kind::kRemoved, path});
      }
    }
  }
  if (rearm) Arm(&events);
  CheckPending(&events);
  return events;
}

}  // namespace ad::watch
