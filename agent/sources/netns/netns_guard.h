// RAII switch of the calling thread into another network namespace. setns() is per thread: the
// destructor always restores the thread's original netns (and aborts if it cannot, because a
// thread left in a foreign netns would silently read the wrong node state).
#pragma once

#include <string>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad {

class NetnsGuard {
 public:
  // Opens `netns_path` (a bind mount or /proc/<pid>/ns/net) and enters it on this thread.
  static Result<NetnsGuard> Enter(const std::string& netns_path);

  NetnsGuard(NetnsGuard&&) noexcept = default;
  NetnsGuard& operator=(NetnsGuard&&) = delete;
  NetnsGuard(const NetnsGuard&) = delete;
  NetnsGuard& operator=(const NetnsGuard&) = delete;
  ~NetnsGuard();

 private:
  explicit NetnsGuard(UniqueFd original) : original_(std::move(original)) {}
  UniqueFd original_;
};

}  // namespace ad
