#include "sources/proc/fd_inventory.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <memory>
#include <optional>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad {
namespace {

constexpr SourceKind kSource = SourceKind::kProc;

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};
using DirHandle = std::unique_ptr<DIR, DirCloser>;

template <typename Int>
std::optional<Int> ParseInt(std::string_view text) {
  Int value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The process vanished between readdir and this read: not worth a word.
bool Vanished(int error) { return error == ENOENT || error == ESRCH; }
bool Denied(int error) { return error == EACCES || error == EPERM; }

// Reads a small /proc file relative to a directory fd.
std::optional<std::string> ReadSmallFile(int dir_fd, const char* name, int* error) {
  UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    *error = errno;
    return std::nullopt;
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = errno;
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > (size_t{1} << 20)) break;  // /proc/stat on huge machines: btime is early
  }
  return text;
}

// Counts permission failures and keeps the first as an example.
class DeniedSummary {
 public:
  void Add(const std::string& what, int error) {
    if (count_++ == 0) first_ = ErrnoError(kSource, what, error);
  }
  void AppendTo(std::vector<SourceError>* warnings) const {
    if (count_ == 0) return;
    SourceError warning = first_;
    if (count_ > 1) warning.message += " (and " + std::to_string(count_ - 1) + " more)";
    warnings->push_back(std::move(warning));
  }

 private:
  int count_ = 0;
  SourceError first_;
};

class InventoryReader {
 public:
  explicit InventoryReader(std::string proc_root) : proc_root_(std::move(proc_root)) {
    int error = 0;
    UniqueFd root(::open(proc_root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root.valid()) {
      if (auto text = ReadSmallFile(root.get(), "stat", &error)) {
        boot_time_seconds_ = ParseBootTimeSeconds(*text);
      }
    }
    // nsfs is one kernel-internal superblock: every namespace file shares this st_dev.
    struct stat st {};
    if (::stat("/proc/self/ns/net", &st) == 0) nsfs_dev_ = st.st_dev;
    ticks_per_second_ = ::sysconf(_SC_CLK_TCK);
  }

  // A process read before: its last ProcessFds to reuse, or nullptr to read it now. Asked after
  // /proc/<pid>/stat (comm and start time) was read, so a reused pid is never taken for another.
  using Reuse = std::function<const ProcessFds*(const ProcessFds& identity)>;
  // Asked first, with the inode of the /proc/<pid> directory only (no file of it read yet).
  using ReuseByDir = std::function<const ProcessFds*(int pid, uint64_t dir_inode)>;
  // For a process that is read: the fd table to read it against incrementally (FdInventoryCache),
  // or nullptr to stat every fd. Same identity rule as Reuse.
  using TableFor = std::function<FdInventoryCache::FdTable*(const ProcessFds& identity)>;
  struct Incremental {
    TableFor table_for;
    bool deep = false;  // stat every fd anyway (the table is still refreshed)
    uint64_t take = 0;  // rotates which still-present fd numbers are stat()ed again
    int revalidate_every = 1;
    uint64_t stated = 0;
    uint64_t reused = 0;
  };

  FdInventory Read(const Reuse& reuse = {}, Incremental* incremental = nullptr,
                   const ReuseByDir& reuse_by_dir = {}) {
    incremental_ = incremental;
    FdInventory inventory;
    DirHandle dir(::opendir(proc_root_.c_str()));
    if (!dir) {
      inventory.warnings.push_back(ErrnoError(kSource, "opendir(" + proc_root_ + ")"));
      return inventory;
    }
    std::vector<int> pids;
    while (dirent* entry = ::readdir(dir.get())) {
      if (auto pid = ParseInt<int>(entry->d_name); pid && *pid > 0) pids.push_back(*pid);
    }
    std::sort(pids.begin(), pids.end());
    for (int pid : pids) {
      struct stat pid_dir {};
      if (reuse_by_dir &&
          ::fstatat(::dirfd(dir.get()), std::to_string(pid).c_str(), &pid_dir, 0) == 0) {
        if (const ProcessFds* cached = reuse_by_dir(pid, pid_dir.st_ino)) {
          inventory.processes.push_back(*cached);
          continue;
        }
      }
      if (std::optional<ProcessFds> process = ReadProcess(pid, reuse)) {
        inventory.processes.push_back(std::move(*process));
      }
    }
    denied_.AppendTo(&inventory.warnings);
    inventory.BuildIndex();
    return inventory;
  }

 private:
  std::optional<ProcessFds> ReadProcess(int pid, const Reuse& reuse) {
    const std::string pid_path = proc_root_ + "/" + std::to_string(pid);
    UniqueFd pid_dir(::open(pid_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!pid_dir.valid()) {
      if (Denied(errno)) denied_.Add("open(" + pid_path + ")", errno);
      return std::nullopt;
    }
    ProcessFds process;
    process.pid = pid;
    if (struct stat dir{}; ::fstat(pid_dir.get(), &dir) == 0) process.proc_dir_inode = dir.st_ino;
    int error = 0;
    std::optional<std::string> stat = ReadSmallFile(pid_dir.get(), "stat", &error);
    if (!stat) {
      if (Denied(error)) denied_.Add("read(" + pid_path + "/stat)", error);
      return std::nullopt;  // vanished (or unreadable: nothing to identify it by)
    }
    uint64_t start_ticks = 0;
    if (ParseProcStat(*stat, &process.comm, &start_ticks) && boot_time_seconds_ > 0 &&
        ticks_per_second_ > 0) {
      process.start_time_unix_ms =
          boot_time_seconds_ * 1000 +
          static_cast<int64_t>(start_ticks * 1000 / static_cast<uint64_t>(ticks_per_second_));
    }
    if (reuse && process.start_time_unix_ms > 0) {
      if (const ProcessFds* cached = reuse(process)) {
        ProcessFds same = *cached;
        same.proc_dir_inode = process.proc_dir_inode;  // a new instance of the same directory
        return same;
      }
    }
    struct stat ns {};
    if (::fstatat(pid_dir.get(), "ns/net", &ns, 0) == 0) {
      process.own_netns_inode = ns.st_ino;
    } else if (Vanished(errno)) {
      return std::nullopt;
    } else if (Denied(errno)) {
      denied_.Add("stat(" + pid_path + "/ns/net)", errno);
    }
    FdInventoryCache::FdTable* table = nullptr;
    if (incremental_ != nullptr && incremental_->table_for && process.start_time_unix_ms > 0) {
      table = incremental_->table_for(process);
    }
    if (!ReadFds(pid_dir.get(), pid_path, &process, table)) return std::nullopt;
    return process;
  }

  // Whether a still-present fd number is stat()ed again in this take.
  bool Revalidate(int fd) const {
    if (incremental_->deep || incremental_->revalidate_every <= 1) return true;
    const auto every = static_cast<uint64_t>(incremental_->revalidate_every);
    return (static_cast<uint64_t>(fd) + incremental_->take) % every == 0;
  }

  // Classifies one fd by stat(); nullopt when it was closed meanwhile.
  std::optional<FdEntry> StatFd(int fd_dir_fd, const char* name, int fd) {
    if (incremental_ != nullptr) ++incremental_->stated;
    struct statx file {};
    if (::statx(fd_dir_fd, name, AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &file) != 0) {
      return std::nullopt;
    }
    FdEntry entry{.fd = fd, .kind = FdEntry::Kind::kOther, .inode = file.stx_ino};
    if (S_ISSOCK(file.stx_mode)) {
      entry.kind = FdEntry::Kind::kSocket;  // the N of "socket:[N]"
    } else if (nsfs_dev_ != 0 && makedev(file.stx_dev_major, file.stx_dev_minor) == nsfs_dev_) {
      // A namespace fd, whatever its link text says ("net:[N]" or a bind mount's path).
      if (IsNetns(fd_dir_fd, name, file.stx_ino)) entry.kind = FdEntry::Kind::kNetns;
    }
    return entry;
  }

  // False when the process vanished. With a table, fds it holds are reused (see
  // FdInventoryCache) and the table is replaced by what this read found.
  bool ReadFds(int pid_dir, const std::string& pid_path, ProcessFds* process,
               FdInventoryCache::FdTable* table) {
    const int fd_dir_fd = ::openat(pid_dir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_dir_fd < 0) {
      if (Vanished(errno)) return false;
      if (Denied(errno)) denied_.Add("open(" + pid_path + "/fd)", errno);
      return true;  // identity without fds is still useful
    }
    DirHandle fd_dir(::fdopendir(fd_dir_fd));
    if (!fd_dir) {
      ::close(fd_dir_fd);
      return true;
    }
    // One statx per fd and no readlink: measured cheaper than readlink (9000 fds: +19 ms vs
    // +23 ms over the bare readdir), and the file type and nsfs dev answer both questions.
    // AT_STATX_DONT_SYNC keeps a stuck NFS/FUSE server from hanging the scan (lsof's failure).
    std::vector<FdEntry> entries;
    if (table == nullptr) {
      while (dirent* entry = ::readdir(fd_dir.get())) {
        if (entry->d_name[0] == '.') continue;
        if (auto stated = StatFd(fd_dir_fd, entry->d_name, 0)) entries.push_back(*stated);
      }
    } else if (!SameCount(fd_dir_fd, *process, *table, &entries)) {
      std::vector<int> numbers;
      while (dirent* entry = ::readdir(fd_dir.get())) {
        if (auto fd = ParseInt<int>(entry->d_name)) numbers.push_back(*fd);
      }
      std::sort(numbers.begin(), numbers.end());
      const bool same_process = table->start_time_unix_ms == process->start_time_unix_ms;
      const std::vector<FdEntry> empty;
      const std::vector<FdEntry>& before = same_process ? table->fds : empty;
      auto known = before.begin();
      entries.reserve(numbers.size());
      for (int fd : numbers) {
        while (known != before.end() && known->fd < fd) ++known;  // closed since
        if (known != before.end() && known->fd == fd && !Revalidate(fd)) {
          entries.push_back(*known);
          ++incremental_->reused;
          continue;
        }
        const std::string name = std::to_string(fd);
        if (auto stated = StatFd(fd_dir_fd, name.c_str(), fd)) entries.push_back(*stated);
      }
    }
    for (const FdEntry& entry : entries) {
      if (entry.kind == FdEntry::Kind::kSocket) process->socket_inodes.push_back(entry.inode);
      if (entry.kind == FdEntry::Kind::kNetns) process->netns_fd_inodes.push_back(entry.inode);
    }
    if (table != nullptr) {
      table->start_time_unix_ms = process->start_time_unix_ms;
      table->fds = std::move(entries);
    }
    SortUnique(&process->socket_inodes);
    SortUnique(&process->netns_fd_inodes);
    return true;
  }

  // The cheap check first: stat() of /proc/<pid>/fd counts the open fds (Linux >= 6.2; 0 before).
  // With the count unchanged the fd numbers are taken from the table without listing the
  // directory, and this take's share of them is stat()ed again (Revalidate). True with `entries`
  // filled when that found nothing new; false when the directory must be listed (count changed
  // or unknown, a deep take, or a revalidated fd was closed meanwhile).
  bool SameCount(int fd_dir_fd, const ProcessFds& process, const FdInventoryCache::FdTable& table,
                 std::vector<FdEntry>* entries) {
    if (incremental_->deep || table.start_time_unix_ms != process.start_time_unix_ms) return false;
    struct stat dir {};
    if (::fstat(fd_dir_fd, &dir) != 0 || dir.st_size <= 0 ||
        static_cast<size_t>(dir.st_size) != table.fds.size()) {
      return false;
    }
    entries->clear();
    entries->reserve(table.fds.size());
    for (const FdEntry& known : table.fds) {
      if (!Revalidate(known.fd)) {
        entries->push_back(known);
        ++incremental_->reused;
        continue;
      }
      const std::string name = std::to_string(known.fd);
      std::optional<FdEntry> now = StatFd(fd_dir_fd, name.c_str(), known.fd);
      if (!now) return false;  // closed: another number may be new
      entries->push_back(*now);
    }
    return true;
  }

  // Other namespace types share the nsfs st_dev: ask nsfs (once per namespace inode).
  bool IsNetns(int fd_dir, const char* name, uint64_t inode) {
    if (auto known = is_netns_.find(inode); known != is_netns_.end()) return known->second;
    UniqueFd ns(::openat(fd_dir, name, O_RDONLY | O_CLOEXEC));
    if (!ns.valid()) return false;  // not cached: the fd may have been closed meanwhile
    const bool is_net = ::ioctl(ns.get(), NS_GET_NSTYPE) == CLONE_NEWNET;
    is_netns_[inode] = is_net;
    return is_net;
  }

  static void SortUnique(std::vector<uint64_t>* values) {
    std::sort(values->begin(), values->end());
    values->erase(std::unique(values->begin(), values->end()), values->end());
  }

  std::string proc_root_;
  int64_t boot_time_seconds_ = 0;
  long ticks_per_second_ = 0;
  uint64_t nsfs_dev_ = 0;
  std::unordered_map<uint64_t, bool> is_netns_;
  DeniedSummary denied_;
  Incremental* incremental_ = nullptr;
};

}  // namespace

void FdInventory::BuildIndex() {
  std::sort(processes.begin(), processes.end(),
            [](const ProcessFds& a, const ProcessFds& b) { return a.pid < b.pid; });
  size_t sockets = 0;
  for (const ProcessFds& process : processes) sockets += process.socket_inodes.size();
  std::vector<std::pair<uint64_t, int>> owners;
  owners.reserve(sockets);
  for (const ProcessFds& process : processes) {
    for (uint64_t inode : process.socket_inodes) owners.emplace_back(inode, process.pid);
  }
  std::sort(owners.begin(), owners.end());
  owner_inodes_.clear();
  owner_pids_.clear();
  owner_inodes_.reserve(owners.size());
  owner_pids_.reserve(owners.size());
  for (const auto& [inode, pid] : owners) {
    owner_inodes_.push_back(inode);
    owner_pids_.push_back(pid);
  }
}

const ProcessFds* FdInventory::Find(int pid) const {
  auto it = std::lower_bound(processes.begin(), processes.end(), pid,
                             [](const ProcessFds& process, int key) { return process.pid < key; });
  return it == processes.end() || it->pid != pid ? nullptr : &*it;
}

std::span<const int> FdInventory::SocketOwners(uint64_t inode) const {
  const auto [first, last] = std::equal_range(owner_inodes_.begin(), owner_inodes_.end(), inode);
  return std::span<const int>(owner_pids_)
      .subspan(static_cast<size_t>(first - owner_inodes_.begin()),
               static_cast<size_t>(last - first));
}

FdInventory TakeFdInventory(const FdInventoryOptions& options) {
  return InventoryReader(options.proc_root).Read();
}

FdInventory FdInventoryCache::Take(const RereadPredicate& reread) {
  ++stats_.takes;
  const bool full =
      full_requested_ || stats_.takes % static_cast<uint64_t>(full_every_) == 1 || full_every_ == 1;
  full_requested_ = false;
  last_full_ = full;
  if (full) ++stats_.full_takes;
  uint64_t reused = 0;
  InventoryReader::Reuse reuse;
  InventoryReader::ReuseByDir reuse_by_dir;
  if (!full) {
    reuse_by_dir = [&](int pid, uint64_t dir_inode) -> const ProcessFds* {
      auto known = by_pid_.find(pid);
      if (known == by_pid_.end() || known->second.proc_dir_inode != dir_inode || dir_inode == 0 ||
          (reread && reread(known->second))) {
        return nullptr;
      }
      ++reused;
      return &known->second;
    };
    reuse = [&](const ProcessFds& identity) -> const ProcessFds* {
      auto known = by_pid_.find(identity.pid);
      if (known == by_pid_.end() ||
          known->second.start_time_unix_ms != identity.start_time_unix_ms ||
          known->second.comm != identity.comm || (reread && reread(known->second))) {
        return nullptr;
      }
      ++reused;
      return &known->second;
    };
  }
  // Processes the predicate re-reads are read against their fd tables; a full take refreshes
  // those tables with a stat of every fd.
  InventoryReader::Incremental incremental;
  incremental.deep = full || deep_requested_;
  incremental.take = stats_.takes;
  incremental.revalidate_every = revalidate_every_;
  last_deep_ = incremental.deep;
  if (incremental.deep) ++stats_.deep_takes;
  deep_requested_ = false;
  std::unordered_map<int, FdTable> tables;
  incremental.table_for = [&](const ProcessFds& identity) -> FdTable* {
    auto known = by_pid_.find(identity.pid);
    if (!reread || known == by_pid_.end() || !reread(known->second)) return nullptr;
    FdTable& table = tables[identity.pid];
    if (auto old = fd_tables_.find(identity.pid); old != fd_tables_.end()) {
      table = std::move(old->second);  // same start time is checked by the reader
    }
    return &table;
  };
  FdInventory inventory =
      InventoryReader(options_.proc_root).Read(reuse, &incremental, reuse_by_dir);
  stats_.processes_reused += reused;
  stats_.processes_read += inventory.processes.size() - reused;
  stats_.fds_stated += incremental.stated;
  stats_.fds_reused += incremental.reused;
  fd_tables_ = std::move(tables);  // tables of processes not re-read (or gone) are dropped
  by_pid_.clear();                 // processes that exited are forgotten
  for (const ProcessFds& process : inventory.processes) by_pid_.emplace(process.pid, process);
  return inventory;
}

namespace {

// Calls `visit(inode, protocol name)` for every socket fd of `pid` (nothing when its fd
// directory cannot be read).
template <typename Visit>
void ForEachSocketProtocol(const std::string& proc_root, int pid, Visit&& visit) {
  const std::string fd_path = proc_root + "/" + std::to_string(pid) + "/fd";
  DirHandle dir(::opendir(fd_path.c_str()));
  if (!dir) return;
  char target[64];
  char name[64];
  while (dirent* entry = ::readdir(dir.get())) {
    if (entry->d_name[0] == '.') continue;
    const std::string link_path = fd_path + "/" + entry->d_name;
    const ssize_t length = ::readlink(link_path.c_str(), target, sizeof(target));
    if (length <= 0) continue;
    const std::string_view link(target, static_cast<size_t>(length));
    if (!link.starts_with("socket:[") || !link.ends_with(']')) continue;
    const ssize_t name_length =
        ::getxattr(link_path.c_str(), "system.sockprotoname", name, sizeof(name));
    if (name_length <= 0) continue;
    // The kernel includes the terminating NUL.
    std::string_view protocol_name(name, static_cast<size_t>(name_length));
    if (protocol_name.ends_with('\0')) protocol_name.remove_suffix(1);
    if (auto inode = ParseInt<uint64_t>(link.substr(8, link.size() - 9))) {
      visit(*inode, protocol_name);
    }
  }
}

}  // namespace

std::vector<uint64_t> SocketInodesByProtocol(const std::string& proc_root, int pid,
                                             std::string_view protocol) {
  std::vector<uint64_t> inodes;
  ForEachSocketProtocol(proc_root, pid, [&](uint64_t inode, std::string_view name) {
    if (name == protocol) inodes.push_back(inode);
  });
  std::sort(inodes.begin(), inodes.end());
  inodes.erase(std::unique(inodes.begin(), inodes.end()), inodes.end());
  return inodes;
}

std::vector<uint64_t> SocketInodesByProtocolCached(const std::string& proc_root, int pid,
                                                   std::string_view protocol,
                                                   const std::vector<uint64_t>& held,
                                                   std::unordered_map<uint64_t, bool>& known) {
  const bool all_known =
      std::all_of(held.begin(), held.end(), [&](uint64_t inode) { return known.contains(inode); });
  if (all_known) {
    std::vector<uint64_t> inodes;
    for (uint64_t inode : held) {
      if (known.at(inode)) inodes.push_back(inode);
    }
    return inodes;
  }
  // Only sockets seen are learnt: an unreadable directory (the process exited) teaches nothing.
  std::vector<uint64_t> matching;
  ForEachSocketProtocol(proc_root, pid, [&](uint64_t inode, std::string_view name) {
    known[inode] = name == protocol;
    if (name == protocol) matching.push_back(inode);
  });
  std::sort(matching.begin(), matching.end());
  matching.erase(std::unique(matching.begin(), matching.end()), matching.end());
  return matching;
}

bool ParseProcStat(std::string_view stat, std::string* comm, uint64_t* start_ticks) {
  // "pid (comm) state ppid ...": comm may contain ')' so the last one closes it.
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return false;
  }
  *comm = std::string(stat.substr(open + 1, close - open - 1));
  // Fields after comm start at field 3 (state); starttime is field 22.
  std::string_view rest = stat.substr(close + 1);
  int field = 2;
  while (!rest.empty()) {
    const size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const size_t end = std::min(rest.find_first_of(" \n"), rest.size());
    ++field;
    if (field == 22) {
      auto ticks = ParseInt<uint64_t>(rest.substr(0, end));
      if (!ticks) return false;
      *start_ticks = *ticks;
      return true;
    }
    rest.remove_prefix(end);
    if (!rest.empty() && rest.front() == '\n') break;
  }
  return false;
}

int64_t ParseBootTimeSeconds(std::string_view proc_stat) {
  size_t position = 0;
  while (position < proc_stat.size()) {
    const size_t end = std::min(proc_stat.find('\n', position), proc_stat.size());
    std::string_view line = proc_stat.substr(position, end - position);
    if (line.starts_with("btime ")) {
      line.remove_prefix(6);
      return ParseInt<int64_t>(line).value_or(0);
    }
    position = end + 1;
  }
  return 0;
}

}  // namespace ad
