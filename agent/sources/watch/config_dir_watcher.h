// Notices any change in one configuration directory (the node's CNI config directory) with
// inotify: files written, created, removed, renamed in or out, attributes changed, or the
// directory itself replaced. A directory that does not exist (yet) is waited for through a watch
// on its nearest existing ancestor. The caller re-reads the directory when Drain() says so.
#pragma once

#include <cstdint>
#include <string>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad::watch {

class ConfigDirWatcher {
 public:
  static Result<ConfigDirWatcher> Open(std::string dir);

  int fd() const { return inotify_.get(); }
  const std::string& dir() const { return dir_; }
  // Reads the queued events (never blocks); true when the directory may have changed.
  bool Drain();
  // Watches `dir` instead (the directory in use changed), on the same fd.
  void Retarget(std::string dir);
  bool watching_dir() const { return watching_dir_; }  // else an ancestor, for its creation
  uint64_t overflows() const { return overflows_; }

 private:
  ConfigDirWatcher(std::string dir, UniqueFd inotify)
      : dir_(std::move(dir)), inotify_(std::move(inotify)) {}
  void Arm();

  std::string dir_;
  UniqueFd inotify_;
  int descriptor_ = -1;
  bool watching_dir_ = false;
  std::string next_component_;  // watching an ancestor: the name that leads to dir_
  uint64_t overflows_ = 0;
};

}  // namespace ad::watch
