#include "sources/watch/config_dir_watcher.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace ad::watch {
namespace {

constexpr uint32_t kDirMask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO |
                              IN_MOVED_FROM | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF |
                              IN_ONLYDIR;
constexpr uint32_t kAncestorMask =
    IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Result<ConfigDirWatcher> ConfigDirWatcher::Open(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  UniqueFd inotify(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify.valid()) return ErrnoError(SourceKind::kCniConfig, "inotify_init1");
  ConfigDirWatcher watcher(std::move(dir), std::move(inotify));
  watcher.Arm();
  if (watcher.descriptor_ < 0) {
    return ErrnoError(SourceKind::kCniConfig, "inotify_add_watch(" + watcher.dir_ + ")");
  }
  return watcher;
}

void ConfigDirWatcher::Retarget(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir == dir_) return;
  dir_ = std::move(dir);
  Arm();  // drops the old watch; its queued events carry the old descriptor and are skipped
}

void ConfigDirWatcher::Arm() {
  if (descriptor_ >= 0) (void)::inotify_rm_watch(inotify_.get(), descriptor_);
  descriptor_ = -1;
  watching_dir_ = false;
  for (std::string path = dir_;; path = Parent(path)) {
    const bool is_dir = path == dir_;
    const int wd =
        ::inotify_add_watch(inotify_.get(), path.c_str(), is_dir ? kDirMask : kAncestorMask);
    if (wd >= 0) {
      descriptor_ = wd;
      watching_dir_ = is_dir;
      if (!is_dir) {
        const size_t start = path == "/" ? 1 : path.size() + 1;
        next_component_ = dir_.substr(start, dir_.find('/', start) - start);
      }
      return;
    }
    if (errno != ENOENT && errno != ENOTDIR) return;
    if (path == "/") return;
  }
}

bool ConfigDirWatcher::Drain() {
  alignas(inotify_event) std::array<char, 8192> buffer;
  bool changed = false;
  bool rearm = false;
  for (;;) {
    const ssize_t n = ::read(inotify_.get(), buffer.data(), buffer.size());
    if (n <= 0) break;
    for (ssize_t offset = 0; offset < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer.data() + offset);
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (event->mask & IN_Q_OVERFLOW) ++overflows_;
      // Events of a watch already replaced (its IN_IGNORED follows inotify_rm_watch) are stale.
      if (!(event->mask & IN_Q_OVERFLOW) && event->wd != descriptor_) continue;
      if (event->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_Q_OVERFLOW)) {
        rearm = true;
        changed = true;
        continue;
      }
      if (!watching_dir_) {
        // An ancestor's event matters only for the name that leads to the directory.
        if (event->len > 0 && next_component_ == event->name) rearm = changed = true;
        continue;
      }
      changed = true;
    }
  }
  if (rearm) Arm();
  return changed;
}

}  // namespace ad::watch
