#include "scan/ztunnel_resource_node_source.h"

#include <netinet/tcp.h>
#include <sys/stat.h>

#include <algorithm>
#include <thread>
#include <unordered_set>

#include "model/result.h"
#include "sources/netns/netns_guard.h"
#include "sources/proc/process_resources.h"
#include "sources/sockdiag/inet_diag.h"

namespace ad {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

struct CloseWaitCount {
  uint32_t count = 0;
  uint32_t netns = 0;
  bool truncated = false;
  std::vector<SourceError> errors;
};

// CLOSE_WAIT TCP sockets in each of `netns_paths` (in-kernel state filter), kept when `owned`
// holds their inode. One thread enters each netns in turn through a NetnsGuard.
CloseWaitCount CountCloseWait(const std::vector<std::string>& netns_paths,
                              const std::vector<uint64_t>* owned, uint64_t* dumps) {
  CloseWaitCount out;
  std::jthread([&] {
    std::unordered_set<uint64_t> dumped_inodes;
    int failures = 0;
    for (const std::string& path : netns_paths) {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0 || !dumped_inodes.insert(st.st_ino).second) continue;
      auto guard = NetnsGuard::Enter(path);
      if (!guard.ok()) continue;  // gone since discovery: nothing of ztunnel's left there
      ++*dumps;
      auto inodes = TcpSocketInodesInStates(1u << TCP_CLOSE_WAIT);
      if (!inodes.ok()) {
        if (failures++ == 0) {
          SourceError error = inodes.error();
          error.message = "CLOSE_WAIT dump in " + path + ": " + error.message;
          out.errors.push_back(std::move(error));
        }
        continue;
      }
      ++out.netns;
      if (owned == nullptr) continue;
      for (uint64_t inode : *inodes) {
        if (inode != 0 && std::binary_search(owned->begin(), owned->end(), inode)) ++out.count;
      }
    }
    if (failures > 1) {
      out.errors.back().message += " (and " + std::to_string(failures - 1) + " more netns)";
    }
  }).join();
  return out;
}

}  // namespace

void ZtunnelResourceNodeSource::Collect(NodeSnapshot& snapshot) {
  std::map<uint64_t, std::string> path_by_inode;
  for (const NetnsSnapshot& netns : snapshot.netns) {
    if (!netns.netns.PrimaryPath().empty()) {
      path_by_inode.emplace(netns.netns.inode, netns.netns.PrimaryPath());
    }
  }
  std::map<int, Trend> trends;
  std::vector<ZtunnelResourceUsage> usages;
  for (const ProcessNetnsFds& process : snapshot.processes) {
    if (process.role != ProcessRole::kZtunnel) continue;
    ZtunnelResourceUsage usage;
    usage.pid = process.pid;
    std::string problems;
    Result<ProcessResources> read = ReadProcessResources(
        process.pid, ProcessResourceOptions{options_.proc_root, options_.cgroup_root}, &problems);
    if (!read.ok()) {
      SourceError error = read.error();
      error.message = "pid " + std::to_string(process.pid) + ": " + error.message;
      usage.errors.push_back(std::move(error));
      usages.push_back(std::move(usage));
      continue;  // exited since the fd inventory: nothing to judge, and no trend to keep
    }
    usage.open_fds = read->open_fds;
    usage.fd_soft_limit = read->fd_limit_known ? read->fd_limit.soft : 0;
    usage.fd_limit_unlimited = read->fd_limit_known && read->fd_limit.unlimited;
    usage.rss_bytes = read->rss_bytes / kMiB * kMiB;  // coarse: an idle poll compares equal
    usage.cgroup = read->cgroup;
    usage.memory_limit_bytes =
        read->memory_limit_known && !read->memory_limit.unlimited ? read->memory_limit.bytes : 0;
    usage.memory_unlimited = read->memory_limit_known && read->memory_limit.unlimited;
    if (!problems.empty()) {
      usage.errors.push_back(SourceError{
          SourceKind::kProc, "pid " + std::to_string(process.pid) + ": " + problems, 0});
    }
    if (options_.close_wait) {
      std::vector<std::string> paths = {options_.proc_root + "/" + std::to_string(process.pid) +
                                        "/ns/net"};
      for (uint64_t inode : process.netns_fd_inodes) {
        if (paths.size() >= options_.max_close_wait_netns) {
          usage.close_wait_truncated = true;
          break;
        }
        if (auto it = path_by_inode.find(inode); it != path_by_inode.end()) {
          paths.push_back(it->second);
        }
      }
      const std::vector<uint64_t>* owned = socket_inodes_ ? socket_inodes_(process.pid) : nullptr;
      CloseWaitCount count = CountCloseWait(paths, owned, &close_wait_dumps_);
      usage.close_wait_netns = count.netns;
      usage.errors.insert(usage.errors.end(), count.errors.begin(), count.errors.end());
      if (owned == nullptr) {
        usage.errors.push_back(SourceError{SourceKind::kProc,
                                           "pid " + std::to_string(process.pid) +
                                               ": socket inodes unknown; CLOSE_WAIT not counted",
                                           0});
      } else {
        Trend trend;
        if (auto old = trends_.find(process.pid);
            old != trends_.end() && old->second.start_time_unix_ms == process.start_time_unix_ms) {
          trend = std::move(old->second);  // same process: extend its trend
        }
        trend.start_time_unix_ms = process.start_time_unix_ms;
        trend.counts.push_back(count.count);
        const size_t window = std::max<size_t>(options_.close_wait_window, 1);
        if (trend.counts.size() > window) {
          trend.counts.erase(trend.counts.begin(),
                             trend.counts.end() - static_cast<std::ptrdiff_t>(window));
        }
        usage.close_wait_counts = trend.counts;
        trends.emplace(process.pid, std::move(trend));
      }
    }
    usages.push_back(std::move(usage));
  }
  trends_ = std::move(trends);  // processes gone are forgotten
  std::sort(
      usages.begin(), usages.end(),
      [](const ZtunnelResourceUsage& a, const ZtunnelResourceUsage& b) { return a.pid < b.pid; });
  snapshot.ztunnel_resources = std::move(usages);
}

}  // namespace ad
