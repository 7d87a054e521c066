#include "scan/ztunnel_resource_node_source.h"

#include <netinet/tcp.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "model/result.h"
#include "sources/netns/netns_guard.h"
#include "sources/netns/netns_workers.h"
#include "sources/proc/process_resources.h"
#include "sources/sockdiag/inet_diag.h"

namespace ad {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

struct CloseWaitDump {
  std::map<uint64_t, uint32_t> counts;  // by the key the caller gave each netns
  std::vector<SourceError> errors;
};

// CLOSE_WAIT TCP sockets in each netns of `batch` (key, path), filtered by state in the kernel,
// kept when `owned` holds their inode. One worker enters each netns in turn through a NetnsGuard.
// A netns that is gone (or fails) has no count.
CloseWaitDump DumpCloseWait(const std::vector<std::pair<uint64_t, std::string>>& batch,
                            const std::vector<uint64_t>& owned, uint64_t* dumps) {
  CloseWaitDump out;
  NetnsWorkers::Shared().Run([&] {
    int failures = 0;
    for (const auto& [key, path] : batch) {
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
      uint32_t count = 0;
      for (uint64_t inode : *inodes) {
        if (inode != 0 && std::binary_search(owned.begin(), owned.end(), inode)) ++count;
      }
      out.counts[key] = count;
    }
    if (failures > 1) {
      out.errors.back().message += " (and " + std::to_string(failures - 1) + " more netns)";
    }
  });
  return out;
}

}  // namespace

void ZtunnelResourceNodeSource::CountCloseWait(const ProcessNetnsFds& process,
                                               const std::map<uint64_t, std::string>& path_by_inode,
                                               ZtunnelResourceUsage& usage,
                                               std::map<int, Trend>& trends) {
  const std::vector<uint64_t>* owned = socket_inodes_ ? socket_inodes_(process.pid) : nullptr;
  if (owned == nullptr) {
    usage.errors.push_back(SourceError{
        SourceKind::kProc,
        "pid " + std::to_string(process.pid) + ": socket inodes unknown; CLOSE_WAIT not counted",
        0});
    return;
  }
  auto old = trends_.find(process.pid);
  if (old == trends_.end() || old->second.start_time_unix_ms != process.start_time_unix_ms) {
    // A process seen for the first time is not counted yet: a one-shot report pays nothing for
    // a trend it cannot judge, and watch/serve count from their second collection on.
    Trend fresh;
    fresh.start_time_unix_ms = process.start_time_unix_ms;
    trends.emplace(process.pid, std::move(fresh));
    return;
  }
  Trend trend = std::move(old->second);
  const auto now = std::chrono::steady_clock::now();
  if (options_.close_wait_min_interval.count() > 0 &&
      now - trend.dumped_at < options_.close_wait_min_interval) {
    usage.close_wait_counts = trend.counts;
    usage.close_wait_netns = trend.round_netns;
    usage.close_wait_truncated = trend.truncated;
    trends.emplace(process.pid, std::move(trend));
    return;
  }
  trend.dumped_at = now;
  // Its own netns and the pod netns it holds, a few per collection: a round is complete once each
  // was counted, and only a complete round adds a count to the trend. Every dump walks the whole
  // TCP hash, so its own netns too is counted once a round (at the round's first collection).
  constexpr uint64_t kOwnNetns = 0;
  std::vector<uint64_t> pods;
  for (uint64_t inode : process.netns_fd_inodes) {
    if (inode == process.own_netns_inode || !path_by_inode.contains(inode)) continue;
    if (pods.size() >= options_.max_close_wait_netns) {
      usage.close_wait_truncated = true;
      break;
    }
    pods.push_back(inode);
  }
  std::vector<std::pair<uint64_t, std::string>> batch;
  if (!trend.visited.contains(kOwnNetns)) {
    batch.emplace_back(kOwnNetns,
                       options_.proc_root + "/" + std::to_string(process.pid) + "/ns/net");
  }
  size_t pods_in_batch = 0;
  for (uint64_t inode : pods) {
    if (pods_in_batch >= options_.close_wait_netns_per_scan) break;
    if (trend.visited.contains(inode)) continue;
    batch.emplace_back(inode, path_by_inode.at(inode));
    ++pods_in_batch;
  }
  CloseWaitDump dump = DumpCloseWait(batch, *owned, &close_wait_dumps_);
  usage.errors.insert(usage.errors.end(), dump.errors.begin(), dump.errors.end());
  for (const auto& [key, path] : batch) {
    trend.visited.insert(key);
    if (auto count = dump.counts.find(key); count != dump.counts.end()) {
      trend.latest[key] = count->second;
    } else {
      trend.latest.erase(key);  // gone or failed: counts nothing this round
    }
  }
  std::erase_if(trend.latest, [&](const auto& entry) {
    return entry.first != kOwnNetns && !std::binary_search(pods.begin(), pods.end(), entry.first);
  });
  const bool round_complete = std::all_of(
      pods.begin(), pods.end(), [&](uint64_t inode) { return trend.visited.contains(inode); });
  if (round_complete) {
    uint32_t total = 0;
    for (const auto& [key, count] : trend.latest) total += count;
    trend.counts.push_back(total);
    const size_t window = std::max<size_t>(options_.close_wait_window, 1);
    if (trend.counts.size() > window) {
      trend.counts.erase(trend.counts.begin(),
                         trend.counts.end() - static_cast<std::ptrdiff_t>(window));
    }
    trend.round_netns = static_cast<uint32_t>(trend.latest.size());
    trend.visited.clear();
  }
  usage.close_wait_counts = trend.counts;
  usage.close_wait_netns = trend.round_netns;
  trend.truncated = usage.close_wait_truncated;
  trends.emplace(process.pid, std::move(trend));
}

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
    if (options_.close_wait) CountCloseWait(process, path_by_inode, usage, trends);
    usages.push_back(std::move(usage));
  }
  trends_ = std::move(trends);  // processes gone are forgotten
  std::sort(
      usages.begin(), usages.end(),
      [](const ZtunnelResourceUsage& a, const ZtunnelResourceUsage& b) { return a.pid < b.pid; });
  snapshot.ztunnel_resources = std::move(usages);
}

}  // namespace ad
