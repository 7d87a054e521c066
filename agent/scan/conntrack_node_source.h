// The kubelet probe path: unreplied probe connections in the host netns's conntrack, read with a
// kernel-filtered ctnetlink dump on a thread that enters the host netns (NetnsGuard). Host netns
// only: pod netns conntrack is never read. Failures land in snapshot.probe_conntrack.errors.
#pragma once

#include <string>
#include <string_view>

#include "scan/node_source.h"
#include "sources/conntrack/conntrack_reader.h"

namespace ad {

class ConntrackNodeSource : public NodeSource {
 public:
  explicit ConntrackNodeSource(ProbeConntrackOptions options) : options_(std::move(options)) {}
  std::string_view name() const override { return "conntrack"; }
  void Collect(NodeSnapshot& snapshot) override;

 private:
  ProbeConntrackOptions options_;
};

// Reads in `netns_path` (entered on a throwaway thread, always restored).
ProbeConntrackState ReadProbeConntrackIn(const std::string& netns_path,
                                         const ProbeConntrackOptions& options);

}  // namespace ad
