// The kubelet probe path: unreplied probe connections in the host netns's conntrack, read with a
// kernel-filtered ctnetlink dump on a thread that enters the host netns (NetnsGuard). Host netns
// only: pod netns conntrack is never read. Failures land in snapshot.probe_conntrack.errors.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "scan/node_source.h"
#include "sources/conntrack/conntrack_reader.h"

namespace ad {

class ConntrackNodeSource : public NodeSource {
 public:
  // A read younger than `min_interval` (of the same host netns) is reused instead of dumping again.
  explicit ConntrackNodeSource(ProbeConntrackOptions options,
                               std::chrono::milliseconds min_interval = {})
      : options_(std::move(options)), min_interval_(min_interval) {}
  std::string_view name() const override { return "conntrack"; }
  void Collect(NodeSnapshot& snapshot) override;

 private:
  ProbeConntrackOptions options_;
  std::chrono::milliseconds min_interval_;
  std::optional<ProbeConntrackState> last_;
  bool last_with_ipv6_ = false;  // the last read dumped the IPv6 table too
  std::chrono::steady_clock::time_point last_read_{};
};

// Reads in `netns_path` (entered on a throwaway thread, always restored).
ProbeConntrackState ReadProbeConntrackIn(const std::string& netns_path,
                                         const ProbeConntrackOptions& options);

}  // namespace ad
