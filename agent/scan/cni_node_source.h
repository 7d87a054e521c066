// The node's CNI config directory as a node source (CNI_CHAIN_BROKEN). Reads the directory on
// every collection (a few small files) and, being long-lived in the daemon and in `watch`,
// remembers the gaps: when the active chain lacked istio-cni. A gap starts at the broken file's
// mtime when that is later than the last good observation (the content that lacks istio-cni was
// written then), else at the observation; it ends likewise when a chain with istio-cni is back.
// While gaps exist and CRI is not available, the start time of each pod netns's oldest process
// (the pause process) stands in for the sandbox's created_at.
//
// Which directory: the one given (--cni-conf-dir), else the one the container runtime reports
// (containerd's verbose CRI Status: k3s, MicroK8s and OpenShift keep it elsewhere), else
// /etc/cni/net.d when it exists, is readable and holds a config file. Without any, the chain is
// not judged: a missing default says nothing about where the runtime reads its config.
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
  // The directory to read, a host path, given (--cni-conf-dir): read as is, whether it exists or
  // not. Empty: the directory the runtime reports (snapshot.cri, filled by the CRI source that
  // runs before), else `fallback_dir` if it exists, is readable and holds a config file, else
  // none: the chain is then not judged (CniConfigState::not_judged says why).
  std::string conf_dir = "/etc/cni/net.d";
  std::string fallback_dir = "/etc/cni/net.d";
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
  // The directory the last collection read (host root included); before any, the given one.
  std::string dir() const { return dir_.empty() ? options_.host_root + options_.conf_dir : dir_; }

 private:
  void Track(CniConfigState& state, int64_t now);

  CniSourceOptions options_;
  std::string dir_;              // read by the last collection; its gap history belongs to it
  std::string runtime_;          // the runtime that last reported its directory
  std::string runtime_dir_;      // and that directory (a host path)
  std::string runtime_network_;  // and the pod network it loaded from there
  std::vector<CniChainGap> gaps_;
  size_t gaps_dropped_ = 0;
  int64_t last_good_ms_ = 0;  // the last collection that saw istio-cni chained
};

// Oldest-process start time per netns of the snapshot (pids from discovery), for netns with pids.
// The directory to read and its origin, or none with the reason (ResolveCniDir's answer).
struct CniDirChoice {
  std::string conf_dir;  // a host path; empty: none
  CniDirOrigin origin = CniDirOrigin::kNone;
  std::string not_judged;  // origin kNone: why, and which flag to set
};
// Decides the directory from the options, what the CRI source found in this scan and the
// directory the runtime reported before (used while it does not answer). Lists the fallback
// directory only (no file is opened).
CniDirChoice ResolveCniDir(const CniSourceOptions& options, const CriState& cri,
                           const std::string& runtime_dir_before = {});

std::vector<NetnsStart> NetnsStartTimes(const NodeSnapshot& snapshot, const std::string& proc_root);

}  // namespace ad
