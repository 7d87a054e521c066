// Who holds what: for every process under a proc root, its name, start time, own netns, the
// sockets it holds and the network namespaces it holds open as fds. Every fd is identified by
// stat() of /proc/<pid>/fd/<n> (file type; nsfs dev + inode), never by the link text: an fd
// opened through a bind mount reads back as the mount's path.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/source_error.h"

namespace ad {

struct FdInventoryOptions {
  std::string proc_root = "/proc";
};

struct ProcessFds {
  int pid = 0;
  std::string comm;
  int64_t start_time_unix_ms = 0;         // 0 when /proc/<pid>/stat or btime could not be read
  uint64_t own_netns_inode = 0;           // 0 when <proc_root>/<pid>/ns/net could not be stat()ed
  std::vector<uint64_t> socket_inodes;    // sorted, unique
  std::vector<uint64_t> netns_fd_inodes;  // sorted, unique
  // Inode of the <proc_root>/<pid> directory when it was read: procfs gives every instance of it
  // a new inode number, so the same number later means the same process (FdInventoryCache).
  uint64_t proc_dir_inode = 0;
};

class FdInventory {
 public:
  std::vector<ProcessFds> processes;  // sorted by pid; vanished processes are simply absent
  std::vector<SourceError> warnings;  // permission problems, summarised

  // Call after filling `processes` (TakeFdInventory does).
  void BuildIndex();
  const ProcessFds* Find(int pid) const;
  // Pids holding an fd on socket `inode` (sorted; empty when unknown). Valid until BuildIndex.
  std::span<const int> SocketOwners(uint64_t inode) const;

 private:
  // Two flat arrays sorted by (inode, pid) rather than a node per socket: the daemon rebuilds
  // this every poll for a few thousand sockets, and every node was garbage a poll later.
  std::vector<uint64_t> owner_inodes_;
  std::vector<int> owner_pids_;
};

// Reads every numeric entry under options.proc_root. Never fails as a whole: processes that exit
// while being read are skipped silently; EACCES/EPERM are counted into one warning.
FdInventory TakeFdInventory(const FdInventoryOptions& options);

// What one fd of a process was when it was last stat()ed.
struct FdEntry {
  int fd = 0;
  enum class Kind : uint8_t { kOther, kSocket, kNetns } kind = Kind::kOther;
  uint64_t inode = 0;  // socket or netns inode
};

// Repeated inventories for a long-running agent (the daemon polls every few seconds): a process
// seen before keeps the fds of its last read, unless `reread` asks for it (istio-cni and ztunnel,
// whose netns fds and sockets are the point). "Seen before" costs one stat() of /proc/<pid>: the
// same directory inode as last time (else the same start time and name in /proc/<pid>/stat). So a
// process that renames itself or exec()s keeps its old name and fds until it is re-read (full
// take, predicate); callers that depend on ownership ask for a full take when a socket they look
// up has no known owner.
// Everything is read on the first Take, on every `full_every`-th one and on the Take after
// RequestFull() (a caller that met a socket no known process owns asks for one).
//
// A re-read process is read incrementally. When stat() of its fd directory shows the same number
// of open fds as last time (Linux >= 6.2), its fd numbers are taken as they were; otherwise the
// directory is listed, numbers not seen before are stat()ed, vanished ones dropped, and fds still
// there keep what they were.
// An fd number can be closed and reused for another file between two takes (the kernel hands out
// the lowest free number, so closing a pod's netns fd and opening the next pod's one often gives
// the same number): a still-present number is stat()ed again on every `revalidate_every`-th take
// (a rotating 1/N of the numbers each take), on full takes and on the Take after RequestDeep()
// (callers ask when something suggests new fds, e.g. the node's netns set or the ZDS connections
// changed). So a reused number, or a count-preserving close + open, is seen within
// `revalidate_every` takes at the latest.
class FdInventoryCache {
 public:
  explicit FdInventoryCache(FdInventoryOptions options, int full_every = 12,
                            int revalidate_every = 4)
      : options_(std::move(options)),
        full_every_(full_every < 1 ? 1 : full_every),
        revalidate_every_(revalidate_every < 1 ? 1 : revalidate_every) {}

  using RereadPredicate = std::function<bool(const ProcessFds& cached)>;
  FdInventory Take(const RereadPredicate& reread);
  void RequestFull() { full_requested_ = true; }
  // The next Take stat()s every fd of the processes it re-reads (not every process).
  void RequestDeep() { deep_requested_ = true; }
  bool last_take_full() const { return last_full_; }
  bool last_take_deep() const { return last_deep_; }

  struct Stats {
    uint64_t takes = 0;
    uint64_t full_takes = 0;
    uint64_t deep_takes = 0;
    uint64_t processes_read = 0;
    uint64_t processes_reused = 0;
    uint64_t fds_stated = 0;  // statx calls
    uint64_t fds_reused = 0;  // fds of re-read processes taken from their last stat
  };
  const Stats& stats() const { return stats_; }

  // Per re-read process: its fds by number (sorted), and the start time they belong to.
  struct FdTable {
    int64_t start_time_unix_ms = 0;
    std::vector<FdEntry> fds;
  };

 private:
  FdInventoryOptions options_;
  int full_every_;
  int revalidate_every_;
  bool full_requested_ = true;
  bool deep_requested_ = false;
  bool last_full_ = false;
  bool last_deep_ = false;
  Stats stats_;
  std::unordered_map<int, ProcessFds> by_pid_;
  std::unordered_map<int, FdTable> fd_tables_;
};

// Socket inodes `pid` holds whose sockfs protocol name (xattr system.sockprotoname) is `protocol`:
// "UNIX" (AF_UNIX datagram and seqpacket), "UNIX-STREAM", "TCP", ... Meant for a few processes
// (one getxattr per socket fd); empty when the process is gone or unreadable.
std::vector<uint64_t> SocketInodesByProtocol(const std::string& proc_root, int pid,
                                             std::string_view protocol);

// SocketInodesByProtocol for a process whose socket inodes are known (`held`, sorted: its fd
// inventory). A socket's protocol never changes, so `known` (socket inode -> whether it is
// `protocol`) answers for the inodes seen before and the fd directory is read (one readlink and
// one getxattr per socket fd) only when `held` has a new one. Every inode read is added to
// `known`; pruning it is the caller's (to the inodes still held).
std::vector<uint64_t> SocketInodesByProtocolCached(const std::string& proc_root, int pid,
                                                   std::string_view protocol,
                                                   const std::vector<uint64_t>& held,
                                                   std::unordered_map<uint64_t, bool>& known);

// Parses /proc/<pid>/stat: comm (field 2, may hold spaces and ')') and starttime (field 22, clock
// ticks since boot). False when the line is malformed. Pure, for tests.
bool ParseProcStat(std::string_view stat, std::string* comm, uint64_t* start_ticks);

// Parses "btime <seconds>" out of /proc/stat; 0 when absent. Pure.
int64_t ParseBootTimeSeconds(std::string_view proc_stat);

}  // namespace ad
