// Finds every network namespace on the node: bind mounts in netns directories and
// /proc/<pid>/ns/net links, deduplicated by (dev, inode).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "model/result.h"
#include "model/snapshot.h"
#include "model/source_options.h"  // DiscoveryOptions

namespace ad {

// Never fails as a whole: unreadable directories and processes become warnings.
// The record of one netns given by path (a bind mount or /proc/<pid>/ns/net): its dev and inode
// by stat(), the path as its only path. An error names stat, the path and errno.
Result<NetnsRecord> NetnsRecordForPath(const std::string& path);

// What one discovery found at each bind-mount path: its nsfs (dev, inode), and the inode of the
// directory entry itself (readdir's d_ino: the file under the mount). Given to the next discovery,
// a path seen before costs one stat() instead of open + fstatfs + NS_GET_NSTYPE + fstat + close
// (a daemon polling 250 pods: 1,250 syscalls a poll), and none at all while the mount table has
// not changed (poll() on /proc/self/mountinfo) and the entry is the same file: a netns appears at
// or leaves a path only by a mount or an unmount. The same nsfs identity at the same path is the
// same netns, and that netns cannot be freed (and its inode number reused by another namespace)
// while the daemon holds its event sockets; a plain file left after an unmount or another
// namespace mounted there has another identity and gets the full check.
struct DiscoveryCache {
  using Key = std::pair<uint64_t, uint64_t>;  // (dev, inode)
  struct Entry {
    Key key;
    uint64_t entry_inode = 0;  // d_ino of the directory entry
  };
  std::map<std::string, Entry> by_path;
  UniqueFd mount_table;   // /proc/self/mountinfo, polled for changes (invalid: not opened yet)
  uint64_t hits = 0;      // paths taken on one stat() or none
  uint64_t unstated = 0;  // of those, taken without a stat() (mount table unchanged)
  uint64_t checks = 0;    // paths given the full check
};

// `cache` (optional) is read and then replaced by what this discovery found.
std::vector<NetnsRecord> DiscoverNetns(const DiscoveryOptions& options,
                                       std::vector<SourceError>* warnings,
                                       DiscoveryCache* cache = nullptr);

}  // namespace ad
