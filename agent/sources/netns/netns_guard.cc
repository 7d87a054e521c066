#include "sources/netns/netns_guard.h"

#include <fcntl.h>
#include <sched.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ad {
namespace {

constexpr const char* kThreadNetns = "/proc/thread-self/ns/net";

}  // namespace

Result<NetnsGuard> NetnsGuard::Enter(const std::string& netns_path) {
  // setns() is per thread, so the thread's own link is the one to restore (not /proc/self).
  UniqueFd original(::open(kThreadNetns, O_RDONLY | O_CLOEXEC));
  if (!original.valid()) {
    return ErrnoError(SourceKind::kNetns, std::string("open(") + kThreadNetns + ")");
  }
  UniqueFd target(::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!target.valid()) {
    return ErrnoError(SourceKind::kNetns, "open(" + netns_path + ")");
  }
  if (::setns(target.get(), CLONE_NEWNET) != 0) {
    return ErrnoError(SourceKind::kNetns, "setns(" + netns_path + ", CLONE_NEWNET)");
  }
  return NetnsGuard(std::move(original));
}

NetnsGuard::~NetnsGuard() {
  if (!original_.valid()) {
    return;  // moved from
  }
  if (::setns(original_.get(), CLONE_NEWNET) != 0) {
    // Continuing would make this worker read (and report) the wrong namespace forever.
    std::fprintf(stderr, "ambient-doctor: fatal: setns(%s, CLONE_NEWNET) restore failed: %s\n",
                 kThreadNetns, std::strerror(errno));
    std::abort();
  }
}

}  // namespace ad
