#include "sources/netns/discovery.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <map>
#include <memory>
#include <utility>

#include "base/unique_fd.h"

namespace ad {
namespace {

constexpr SourceKind kSource = SourceKind::kNetns;

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};
using DirHandle = std::unique_ptr<DIR, DirCloser>;

using NetnsKey = DiscoveryCache::Key;

// A file is a network namespace when it lives on nsfs and nsfs says it is a net namespace.
// Plain files left behind in a netns dir (e.g. after an unmount) are skipped.
// A bind-mounted network namespace in a netns directory: nsfs and of type net. One openat and
// calls on the fd (one path lookup per entry; discovery runs before the parallel scan).
std::optional<NetnsKey> NetnsFileKey(int dir_fd, const std::string& name, int* error) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) {
    *error = errno;
    return std::nullopt;
  }
  struct statfs fs {};
  struct stat st {};
  if (::fstatfs(fd.get(), &fs) != 0 || static_cast<uint64_t>(fs.f_type) != NSFS_MAGIC ||
      ::ioctl(fd.get(), NS_GET_NSTYPE) != CLONE_NEWNET || ::fstat(fd.get(), &st) != 0) {
    *error = 0;  // not a network namespace: skipped silently
    return std::nullopt;
  }
  return NetnsKey{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

std::optional<NetnsKey> StatNetns(const std::string& path, int* error) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    *error = errno;
    return std::nullopt;
  }
  return NetnsKey{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

class Collector {
 public:
  NetnsRecord& At(const NetnsKey& key) {
    auto [it, inserted] = by_key_.try_emplace(key);
    if (inserted) {
      it->second.dev = key.first;
      it->second.inode = key.second;
    }
    return it->second;
  }
  std::map<NetnsKey, NetnsRecord>& records() { return by_key_; }

 private:
  std::map<NetnsKey, NetnsRecord> by_key_;
};

void AddPath(NetnsRecord& record, const std::string& path) {
  if (std::find(record.paths.begin(), record.paths.end(), path) == record.paths.end()) {
    record.paths.push_back(path);
  }
}

// Whether the mount table may have changed since the last call: true the first time (the watch
// is opened then) and when it cannot be watched. Reading is not needed: poll() itself takes note.
bool MountTableChanged(DiscoveryCache& cache) {
  if (!cache.mount_table.valid()) {
    cache.mount_table =
        UniqueFd(::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    return true;
  }
  pollfd watch{cache.mount_table.get(), POLLPRI, 0};
  return ::poll(&watch, 1, 0) != 0;  // POLLERR | POLLPRI on a change; -1: cannot tell
}

// `cache`: what the last discovery found by path (read), what this one finds (`found`).
// `mounts_quiet`: the mount table did not change since the last discovery.
void ScanNetnsDir(const std::string& dir_path, const std::string& name_glob, Collector* collector,
                  std::vector<SourceError>* warnings, DiscoveryCache* cache, bool mounts_quiet,
                  std::map<std::string, DiscoveryCache::Entry>* found) {
  DirHandle dir(::opendir(dir_path.c_str()));
  if (!dir) {
    if (errno != ENOENT) {  // an absent runtime dir is normal (no containerd / no CRI-O)
      warnings->push_back(ErrnoError(kSource, "opendir(" + dir_path + ")"));
    }
    return;
  }
  std::vector<std::pair<std::string, uint64_t>> entries;  // name, d_ino
  while (dirent* entry = ::readdir(dir.get())) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") {
      continue;
    }
    if (!name_glob.empty() && ::fnmatch(name_glob.c_str(), name.c_str(), 0) != 0) {
      continue;
    }
    entries.emplace_back(std::move(name), entry->d_ino);
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& [name, entry_inode] : entries) {
    const std::string path = dir_path + "/" + name;
    if (cache != nullptr) {
      auto known = cache->by_path.find(path);
      if (known != cache->by_path.end()) {
        const NetnsKey key = known->second.key;
        const bool same_file =
            mounts_quiet && entry_inode != 0 && known->second.entry_inode == entry_inode;
        // stat() follows the bind mount: the nsfs identity while the netns is mounted there.
        struct stat st {};
        if (same_file || (::fstatat(::dirfd(dir.get()), name.c_str(), &st, 0) == 0 &&
                          NetnsKey{st.st_dev, st.st_ino} == key)) {
          ++cache->hits;
          if (same_file) ++cache->unstated;
          AddPath(collector->At(key), path);
          found->emplace(path, DiscoveryCache::Entry{key, entry_inode});
          continue;
        }
      }
      ++cache->checks;
    }
    int error = 0;
    if (auto key = NetnsFileKey(::dirfd(dir.get()), name, &error)) {
      AddPath(collector->At(*key), path);
      if (found != nullptr) found->emplace(path, DiscoveryCache::Entry{*key, entry_inode});
    } else if (error != 0 && error != ENOENT) {
      warnings->push_back(ErrnoError(kSource, "open(" + path + ")", error));
    }
  }
}

std::optional<int> ParsePid(const char* name) {
  int pid = 0;
  const char* end = name + std::char_traits<char>::length(name);
  auto [ptr, ec] = std::from_chars(name, end, pid);
  if (ec != std::errc() || ptr != end || pid <= 0) {
    return std::nullopt;
  }
  return pid;
}

void ScanProc(const std::string& proc_root, Collector* collector,
              std::vector<SourceError>* warnings) {
  DirHandle dir(::opendir(proc_root.c_str()));
  if (!dir) {
    warnings->push_back(ErrnoError(kSource, "opendir(" + proc_root + ")"));
    return;
  }
  std::vector<int> pids;
  while (dirent* entry = ::readdir(dir.get())) {
    if (auto pid = ParsePid(entry->d_name)) {
      pids.push_back(*pid);
    }
  }
  std::sort(pids.begin(), pids.end());
  // Permission failures are summarised in one warning: on a locked-down node there can be many.
  int denied = 0;
  std::optional<SourceError> first_denied;
  for (int pid : pids) {
    const std::string path = proc_root + "/" + std::to_string(pid) + "/ns/net";
    int error = 0;
    auto key = StatNetns(path, &error);
    if (!key) {
      // Processes exit all the time (ENOENT/ESRCH); kernel threads have no ns link to follow.
      if (error == EACCES || error == EPERM) {
        ++denied;
        if (!first_denied) first_denied = ErrnoError(kSource, "stat(" + path + ")", error);
      }
      continue;
    }
    NetnsRecord& record = collector->At(*key);
    AddPath(record, path);
    record.pids.push_back(pid);
  }
  if (first_denied) {
    if (denied > 1) {
      first_denied->message += " (and " + std::to_string(denied - 1) + " more processes)";
    }
    warnings->push_back(*first_denied);
  }
}

}  // namespace

Result<NetnsRecord> NetnsRecordForPath(const std::string& path) {
  int error = 0;
  const std::optional<NetnsKey> key = StatNetns(path, &error);
  if (!key) return ErrnoError(kSource, "stat(" + path + ")", error);
  NetnsRecord record;
  record.dev = key->first;
  record.inode = key->second;
  record.paths = {path};
  return record;
}

std::vector<NetnsRecord> DiscoverNetns(const DiscoveryOptions& options,
                                       std::vector<SourceError>* warnings, DiscoveryCache* cache) {
  std::vector<SourceError> ignored;
  if (warnings == nullptr) {
    warnings = &ignored;
  }
  Collector collector;
  std::map<std::string, DiscoveryCache::Entry> found;
  // Checked before the directories are read: a mount after this is seen by the next discovery.
  const bool mounts_quiet = cache != nullptr && !MountTableChanged(*cache);
  for (const std::string& dir : options.netns_dirs) {
    ScanNetnsDir(dir, options.name_glob, &collector, warnings, cache, mounts_quiet, &found);
  }
  if (cache != nullptr) cache->by_path = std::move(found);
  if (!options.proc_root.empty()) {
    ScanProc(options.proc_root, &collector, warnings);
  }

  std::string host_path = options.host_netns_path;
  const bool host_defaulted = host_path.empty() && !options.proc_root.empty();
  if (host_defaulted) {
    host_path = options.proc_root + "/1/ns/net";
  }
  if (!host_path.empty()) {
    int error = 0;
    auto key = StatNetns(host_path, &error);
    if (!key && host_defaulted) {
      // PID 1 hidden (hardened procfs, sandbox): the agent runs with hostNetwork, so its own netns
      // is the host's. Say so, since a non-hostNetwork agent would pick the wrong one.
      const std::string self_path = "/proc/self/ns/net";
      int self_error = 0;
      key = StatNetns(self_path, &self_error);
      if (key) {
        warnings->push_back(ErrnoError(kSource,
                                       "stat(" + host_path +
                                           ") for the host netns; using this process's netns "
                                           "instead (pass --host-netns to choose)",
                                       error));
        host_path = self_path;
      }
    }
    if (key) {
      NetnsRecord& host = collector.At(*key);
      host.is_host = true;
      AddPath(host, host_path);
    } else {
      warnings->push_back(ErrnoError(kSource, "stat(" + host_path + ") for the host netns", error));
    }
  }

  std::vector<NetnsRecord> records;
  records.reserve(collector.records().size());
  for (auto& [key, record] : collector.records()) {
    // Bind mounts first: they outlive the processes and make the better primary path.
    std::stable_partition(record.paths.begin(), record.paths.end(), [](const std::string& p) {
      return !std::string_view(p).ends_with("/ns/net");
    });
    records.push_back(std::move(record));
  }
  std::sort(records.begin(), records.end(), [](const NetnsRecord& a, const NetnsRecord& b) {
    if (a.is_host != b.is_host) {
      return a.is_host;
    }
    if (a.PrimaryPath() != b.PrimaryPath()) {
      return a.PrimaryPath() < b.PrimaryPath();
    }
    return std::pair(a.dev, a.inode) < std::pair(b.dev, b.inode);
  });
  return records;
}

}  // namespace ad
