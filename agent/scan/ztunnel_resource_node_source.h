// How close each ztunnel process is to its limits (ZTUNNEL_RESOURCE_PRESSURE's data): open fds
// against its soft RLIMIT_NOFILE, RSS against its memory cgroup's limit, and its TCP sockets in
// CLOSE_WAIT over the last few collections. Runs after the ZDS source, which names the ztunnel
// processes and holds their socket inodes (fd inventory). Read-only: procfs, cgroupfs, sock_diag.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "scan/node_source.h"

namespace ad {

struct ZtunnelResourceOptions {
  std::string proc_root = "/proc";
  std::string cgroup_root = "/sys/fs/cgroup";  // with --host-root prepended
  // CLOSE_WAIT sockets are counted in ztunnel's own netns and in the pod netns it holds (where
  // its in-pod sockets live) in rotation: its own netns at a round's first collection, this many
  // pod netns per collection; a count joins the trend once every netns was counted (a round). Pod
  // netns past max_close_wait_netns are never counted (reported as truncated).
  size_t close_wait_netns_per_scan = 4;
  size_t max_close_wait_netns = 1024;
  size_t close_wait_window = 4;  // counts kept per ztunnel process (oldest dropped)
  bool close_wait = true;
  // A collection this soon after the last dumps of the same process reports its trend as it was
  // instead of dumping. Each dump walks the kernel's whole TCP established hash (shared by every
  // netns, 256 Ki buckets on a 24 GiB node: ~1.5 ms here), so `serve` dumps about every 30 s.
  std::chrono::milliseconds close_wait_min_interval{0};
};

class ZtunnelResourceNodeSource : public NodeSource {
 public:
  // `socket_inodes(pid)`: the sorted socket inodes the ztunnel `pid` holds (from the fd
  // inventory), nullptr when unknown.
  using SocketInodes = std::function<const std::vector<uint64_t>*(int pid)>;
  ZtunnelResourceNodeSource(ZtunnelResourceOptions options, SocketInodes socket_inodes)
      : options_(std::move(options)), socket_inodes_(std::move(socket_inodes)) {}
  std::string_view name() const override { return "ztunnel-resources"; }
  void Collect(NodeSnapshot& snapshot) override;
  uint64_t close_wait_dumps() const { return close_wait_dumps_; }

 private:
  struct Trend {
    int64_t start_time_unix_ms = 0;
    std::vector<uint32_t> counts;         // one per complete round, oldest first
    std::map<uint64_t, uint32_t> latest;  // per netns inode (0: its own netns): last count
    std::set<uint64_t> visited;           // netns counted in the current round
    uint32_t round_netns = 0;             // netns of the last complete round
    bool truncated = false;               // the last collection met max_close_wait_netns
    std::chrono::steady_clock::time_point dumped_at{};  // the last dumps (close_wait_min_interval)
  };
  void CountCloseWait(const ProcessNetnsFds& process,
                      const std::map<uint64_t, std::string>& path_by_inode,
                      ZtunnelResourceUsage& usage, std::map<int, Trend>& trends);
  ZtunnelResourceOptions options_;
  SocketInodes socket_inodes_;
  std::map<int, Trend> trends_;  // by pid
  uint64_t close_wait_dumps_ = 0;
};

}  // namespace ad
