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

namespace {

// Why the runtime gave no directory: not asked, not answering, or not saying.
std::string RuntimeSilence(const CriState& cri) {
  if (cri.available) {
    return (cri.runtime.empty() ? std::string("the CRI runtime") : cri.runtime) +
           " does not report its CNI config directory" +
           (cri.cni_note.empty() ? std::string() : " (" + cri.cni_note + ")");
  }
  if (cri.errors.empty()) return "the container runtime was not asked (--no-cri)";
  return "no container runtime answered over CRI (" + cri.errors.front().message + ")";
}

}  // namespace

CniDirChoice ResolveCniDir(const CniSourceOptions& options, const CriState& cri,
                           const std::string& runtime_dir_before) {
  if (!options.conf_dir.empty()) return {options.conf_dir, CniDirOrigin::kFlag, {}};
  if (!cri.cni_conf_dir.empty()) return {cri.cni_conf_dir, CniDirOrigin::kRuntime, {}};
  // A runtime's config changes only with its restart: the directory it reported stays in use
  // while it does not answer.
  if (!runtime_dir_before.empty()) return {runtime_dir_before, CniDirOrigin::kRuntime, {}};
  const std::string fallback = options.host_root + options.fallback_dir;
  const std::string why = cni::ProbeCniConfDir(fallback);
  if (why.empty()) return {options.fallback_dir, CniDirOrigin::kDefault, {}};
  return {{},
          CniDirOrigin::kNone,
          RuntimeSilence(cri) + ", and " + fallback + " " + why +
              ": the CNI chain is not judged. Set --cni-conf-dir to the directory the container "
              "runtime reads its CNI config from (a host path; e.g. "
              "/var/lib/rancher/k3s/agent/etc/cni/net.d on k3s)"};
}

void CniNodeSource::Collect(NodeSnapshot& snapshot) {
  if (!snapshot.cri.cni_conf_dir.empty()) {
    runtime_ = snapshot.cri.runtime;
    runtime_dir_ = snapshot.cri.cni_conf_dir;
    runtime_network_ = snapshot.cri.cni_pod_network;
  }
  CniDirChoice choice = ResolveCniDir(options_, snapshot.cri, runtime_dir_);
  CniConfigState state;
  if (choice.origin != CniDirOrigin::kNone) {
    state = cni::ReadCniConfDir(options_.host_root, choice.conf_dir, options_.limits);
    // The runtime loaded a pod network from a directory we cannot see: it is not mounted here
    // (a pod that mounts only /etc/cni/net.d), which says nothing about the chain.
    if (choice.origin == CniDirOrigin::kRuntime && !state.dir_readable && state.errors.empty() &&
        !runtime_network_.empty()) {
      choice = {{},
                CniDirOrigin::kNone,
                runtime_ + " loaded the pod network \"" + runtime_network_ + "\" from " +
                    runtime_dir_ + ", but " + state.dir +
                    " does not exist here: the CNI chain is not judged. Mount the node's " +
                    runtime_dir_ + " into the agent (read-only, under --host-root), or set " +
                    "--cni-conf-dir"};
    }
  }
  if (choice.origin == CniDirOrigin::kNone) {
    state = CniConfigState{};
    state.collected = true;
    state.host_root = options_.host_root;
    state.not_judged = choice.not_judged;
  }
  state.dir_origin = choice.origin;
  state.runtime = runtime_;
  state.runtime_dir = runtime_dir_;
  // The gap history belongs to one directory: another one (the runtime answered only now, or
  // reports a new one) starts its own. Not judging keeps it.
  if (!state.dir.empty() && state.dir != dir_) {
    gaps_.clear();
    gaps_dropped_ = 0;
    last_good_ms_ = 0;
    dir_ = state.dir;
  }
  if (choice.origin != CniDirOrigin::kNone) Track(state, options_.clock());
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
