#include "model/snapshot.h"

#include <string_view>

namespace ad {

const std::string& NetnsRecord::PrimaryPath() const {
  static const std::string kNoPath;
  // Bind mounts stay valid while the pod lives; /proc links vanish with their process.
  for (const std::string& path : paths) {
    if (!std::string_view(path).ends_with("/ns/net")) {
      return path;
    }
  }
  return paths.empty() ? kNoPath : paths.front();
}

NetnsReads NetnsReads::AllOk() {
  return {.nftables = ReadStatus::kOk,
          .legacy_v4 = ReadStatus::kOk,
          .legacy_v6 = ReadStatus::kOk,
          .routes = ReadStatus::kOk,
          .listeners = ReadStatus::kOk,
          .ipsets = ReadStatus::kOk};
}

const NetnsSnapshot* NodeSnapshot::Host() const {
  for (const NetnsSnapshot& snapshot : netns) {
    if (snapshot.netns.is_host) {
      return &snapshot;
    }
  }
  return nullptr;
}

bool SameNetnsContent(const NetnsSnapshot& a, const NetnsSnapshot& b) {
  return a.netns == b.netns && a.reads == b.reads && a.netfilter == b.netfilter &&
         a.routing == b.routing && a.listeners == b.listeners && a.errors == b.errors &&
         a.unreadable == b.unreadable;
}

}  // namespace ad
