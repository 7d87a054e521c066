// Notices netns bind mounts appearing in and disappearing from the netns directories with inotify.
// A directory that does not exist yet (/run/netns before the first `ip netns add`) is waited for
// through a watch on its nearest existing ancestor.
// The race: `ip netns add` creates the file before bind-mounting the netns onto it, so at IN_CREATE
// the path is still a plain file (setns fails with EINVAL). A new name is reported only once
// statfs() shows NSFS_MAGIC; one that never becomes nsfs within the deadline is dropped (counted).
// `ip netns del` unmounts before it unlinks, so at IN_DELETE the name is already gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad::watch {

struct NetnsDirEvent {
  enum class Kind : uint8_t { kAdded, kRemoved };
  Kind kind = Kind::kAdded;
  std::string path;  // <dir>/<name>
};

struct NetnsDirWatcherOptions {
  std::vector<std::string> dirs;
  std::string name_glob;  // only names matching (fnmatch); "" = all
  std::chrono::milliseconds nsfs_deadline{2000};
};

class NetnsDirWatcher {
 public:
  static Result<NetnsDirWatcher> Open(NetnsDirWatcherOptions options);

  int fd() const { return inotify_.get(); }
  // Reads queued inotify events and re-checks names waiting to become nsfs. Never blocks.
  std::vector<NetnsDirEvent> Drain();
  // True while a created name waits for its bind mount: poll again within ~1 ms.
  bool HasPending() const { return !pending_.empty(); }
  uint64_t nsfs_waits() const { return nsfs_waits_; }
  uint64_t nsfs_timeouts() const { return nsfs_timeouts_; }
  uint64_t queue_overflows() const { return queue_overflows_; }

 private:
  struct Pending {
    std::string path;
    std::chrono::steady_clock::time_point deadline;
  };
  struct Watch {
    int descriptor = -1;
    std::string path;
    bool is_netns_dir = false;  // else an ancestor waited on for the directory to appear
  };
  NetnsDirWatcher(NetnsDirWatcherOptions options, UniqueFd inotify)
      : options_(std::move(options)), inotify_(std::move(inotify)) {}
  void Arm(std::vector<NetnsDirEvent>* events);
  void ScanDir(const std::string& dir, std::vector<NetnsDirEvent>* events);
  void OnCreated(const std::string& path, std::vector<NetnsDirEvent>* events);
  void CheckPending(std::vector<NetnsDirEvent>* events);
  bool NameMatches(const std::string& name) const;

  NetnsDirWatcherOptions options_;
  UniqueFd inotify_;
  std::vector<Watch> watches_;
  std::vector<Pending> pending_;
  uint64_t nsfs_waits_ = 0;
  uint64_t nsfs_timeouts_ = 0;
  uint64_t queue_overflows_ = 0;
};

// statfs(path).f_type == NSFS_MAGIC: the path is a netns bind mount (or a /proc ns link).
bool IsNsfs(const std::string& path);

}  // namespace ad::watch
