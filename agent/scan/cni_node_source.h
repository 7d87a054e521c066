// The node's CNI config directory as a node source (CNI_CHAIN_BROKEN). Reads the directory on
// every collection (a few small files) and, being long-lived in the daemon and in `watch`,
// remembers the gaps: when the active chain lacked istio-cni. A gap starts at the broken file's
// mtime when that is later than the last good observation (the content that lacks istio-cni was
// written then), else at the observation; it ends likewise when a chain with istio-cni is back.
// While gaps exist and CRI is not available, the start time of each pod netns's oldest process
// (the pause process) stands in for the sandbox's created_at.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "model/cni.h"
#include "scan/node_source.h"
#include "sources/cni/cni_conf.h"

namespace ad {

struct CniSourceOptions {
  std::string host_root;
  std::string conf_dir = "/etc/cni/net.d";
  std::string proc_root = "/proc";
  cni::CniReadLimits limits;
  size_t max_gaps = 16;            // older gaps are dropped (counted)
  std::function<int64_t()> clock;  // unix ms; default: the system clock
};

class CniNodeSource : public NodeSource {
 public:
  explicit CniNodeSource(CniSourceOptions options);
  std::string_view name() const override { return "cni"; }
  void Collect(NodeSnapshot& snapshot) override;
  std::string dir() const { return options_.host_root + options_.conf_dir; }

 private:
  void Track(CniConfigState& state, int64_t now);

  CniSourceOptions options_;
  std::vector<CniChainGap> gaps_;
  size_t gaps_dropped_ = 0;
  int64_t last_good_ms_ = 0;  // the last collection that saw istio-cni chained
};

// Oldest-process start time per netns of the snapshot (pids from discovery), for netns with pids.
std::vector<NetnsStart> NetnsStartTimes(const NodeSnapshot& snapshot, const std::string& proc_root);

}  // namespace ad
