// How close a process is to its limits, read from procfs and the cgroup file system: open fds
// (stat of /proc/<pid>/fd), the "Max open files" soft limit (/proc/<pid>/limits), VmRSS
// (/proc/<pid>/status) and its memory cgroup's limit (cgroup v2 memory.max, v1
// memory.limit_in_bytes). The parsers are pure (tested and fuzzed on their own); peer text is
// untrusted: a malformed value is an error naming the file, never a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/result.h"

namespace ad {

// "Max open files            1024                 524288               files".
struct FdLimit {
  uint64_t soft = 0;
  bool unlimited = false;  // "unlimited"
};
// The soft "Max open files" of /proc/<pid>/limits; error (proc) when the row is missing or its
// soft value is neither a number nor "unlimited".
Result<FdLimit> ParseMaxOpenFiles(std::string_view limits);

// VmRSS of /proc/<pid>/status in bytes ("VmRSS:    12345 kB"); nullopt when absent (a kernel
// thread, a zombie) or malformed.
std::optional<uint64_t> ParseVmRssBytes(std::string_view status);

// The memory cgroup of /proc/<pid>/cgroup: v2 when the only hierarchy is "0::<path>", v1 when a
// hierarchy lists the "memory" controller ("4:memory:/kubepods/..."). Error when neither exists.
struct MemoryCgroup {
  bool v2 = true;
  std::string path;  // as the kernel names it, relative to the reader's cgroup namespace root
};
Result<MemoryCgroup> ParseMemoryCgroup(std::string_view proc_cgroup);

// A memory limit file: "max" (v2) or a number; v1 reports "no limit" as a huge number (LONG_MAX
// rounded down to the page size), taken as unlimited from 2^62 up. Error when malformed.
struct MemoryLimit {
  uint64_t bytes = 0;
  bool unlimited = false;
};
Result<MemoryLimit> ParseMemoryLimit(std::string_view text);

struct ProcessResourceOptions {
  std::string proc_root = "/proc";
  // Where the agent sees the cgroup file system (v2: the unified mount; v1: the directory holding
  // the "memory" hierarchy), with --host-root prepended by the caller.
  std::string cgroup_root = "/sys/fs/cgroup";
};

struct ProcessResources {
  uint64_t open_fds = 0;
  FdLimit fd_limit;
  bool fd_limit_known = false;
  uint64_t rss_bytes = 0;
  std::string cgroup;
  MemoryLimit memory_limit;
  bool memory_limit_known = false;
};

// Reads the above for `pid`. A vanished process is an error (ESRCH); a part that cannot be read
// (no memory controller, a cgroup path outside the agent's cgroup namespace) is left unknown and
// described in `*problems` (one line each).
Result<ProcessResources> ReadProcessResources(int pid, const ProcessResourceOptions& options,
                                              std::string* problems);

}  // namespace ad
