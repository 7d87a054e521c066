#include "scan/cni_node_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>

#include "sources/proc/fd_inventory.h"

namespace ad {
namespace {

int64_t SystemMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ReadSmall(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

CniNodeSource::CniNodeSource(CniSourceOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = SystemMs;
}

void CniNodeSource::Track(CniConfigState& state, int64_t now) {
  // An unreadable directory says nothing about the chain: the gaps stay as they are.
  if (!state.dir_readable && !state.errors.empty()) return;
  const bool broken = !state.istio_cni_chained;
  const bool open = !gaps_.empty() && gaps_.back().end_unix_ms == 0;
  const int64_t mtime = state.active_mtime_unix_ms;
  if (broken && !open) {
    CniChainGap gap;
    gap.file = state.active_file;
    gap.start_unix_ms = (mtime > last_good_ms_ && mtime <= now) ? mtime : now;
    gaps_.push_back(std::move(gap));
    if (gaps_.size() > options_.max_gaps) {
      gaps_.erase(gaps_.begin());
      ++gaps_dropped_;
    }
  } else if (broken && open && gaps_.back().file.empty() && !state.active_file.empty()) {
    gaps_.back().file = state.active_file;  // no config at first, then a file without istio-cni
  } else if (!broken && open) {
    CniChainGap& gap = gaps_.back();
    gap.end_unix_ms = (mtime > gap.start_unix_ms && mtime <= now) ? mtime : now;
  }
  if (!broken) last_good_ms_ = now;
}

void CniNodeSource::Collect(NodeSnapshot& snapshot) {
  CniConfigState state =
      cni::ReadCniConfDir(options_.host_root, options_.conf_dir, options_.limits);
  Track(state, options_.clock());
  state.gaps = gaps_;
  state.gaps_dropped = gaps_dropped_;
  // Without CRI the pods' start is their pause process's; only needed while gaps exist.
  if (!gaps_.empty() && !snapshot.cri.available) {
    state.netns_starts = NetnsStartTimes(snapshot, options_.proc_root);
  }
  snapshot.cni = std::move(state);
}

std::vector<NetnsStart> NetnsStartTimes(const NodeSnapshot& snapshot,
                                        const std::string& proc_root) {
  std::vector<NetnsStart> starts;
  const int64_t boot_seconds = ParseBootTimeSeconds(ReadSmall(proc_root + "/stat"));
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (boot_seconds <= 0 || ticks <= 0) return starts;
  for (const NetnsSnapshot& netns : snapshot.netns) {
    if (netns.netns.is_host || netns.netns.pids.empty()) continue;
    NetnsStart oldest;
    for (int pid : netns.netns.pids) {
      std::string comm;
      uint64_t start_ticks = 0;
      if (!ParseProcStat(ReadSmall(proc_root + "/" + std::to_string(pid) + "/stat"), &comm,
                         &start_ticks)) {
        continue;
      }
      const int64_t started =
          boot_seconds * 1000 +
          static_cast<int64_t>(start_ticks * 1000 / static_cast<uint64_t>(ticks));
      if (oldest.pid == 0 || started < oldest.started_unix_ms) {
        oldest = {netns.netns.inode, started, pid};
      }
    }
    if (oldest.pid != 0) starts.push_back(oldest);
  }
  return starts;
}

}  // namespace ad
