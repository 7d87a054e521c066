#include "scan/conntrack_node_source.h"

#include <algorithm>
#include <utility>

#include "sources/netns/netns_guard.h"
#include "sources/netns/netns_workers.h"

namespace ad {

ProbeConntrackState ReadProbeConntrackIn(const std::string& netns_path,
                                         const ProbeConntrackOptions& options) {
  ProbeConntrackState state;
  // setns only on a worker thread: the caller's thread keeps its netns whatever happens.
  NetnsWorkers::Shared().Run([&] {
    Result<NetnsGuard> guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) {
      SourceError error = guard.error();
      error.kind = SourceKind::kConntrack;
      state.errors.push_back(std::move(error));
      return;
    }
    Result<ProbeConntrackState> read = ReadProbeConntrack(options);
    if (!read.ok()) {
      state.errors.push_back(read.error());
      return;
    }
    state = std::move(read).value();
  });
  state.collected = true;
  state.netns_path = netns_path;
  return state;
}

void ConntrackNodeSource::Collect(NodeSnapshot& snapshot) {
  const NetnsSnapshot* host = snapshot.Host();
  if (host == nullptr || host->unreadable) {
    snapshot.probe_conntrack = {};  // the host's own NETNS_UNREADABLE says why: nothing to add
    return;
  }
  // Each dump walks the whole conntrack hash: skip the IPv6 one on a node without IPv6 pods.
  ProbeConntrackOptions options = options_;
  const bool ipv6_pods =
      std::any_of(snapshot.netns.begin(), snapshot.netns.end(), [](const NetnsSnapshot& netns) {
        return !netns.netns.is_host &&
               std::any_of(netns.routing.addresses.begin(), netns.routing.addresses.end(),
                           [](const InterfaceAddress& a) {
                             return a.family == Family::kIpv6 && a.global_scope && a.ifname != "lo";
                           });
      });
  if (!ipv6_pods) options.snat_v6.clear();
  const auto now = std::chrono::steady_clock::now();
  if (last_ && min_interval_.count() > 0 && now - last_read_ < min_interval_ &&
      last_->netns_path == host->netns.PrimaryPath() && last_with_ipv6_ == ipv6_pods) {
    snapshot.probe_conntrack = *last_;
    return;
  }
  snapshot.probe_conntrack = ReadProbeConntrackIn(host->netns.PrimaryPath(), options);
  last_ = snapshot.probe_conntrack;
  last_with_ipv6_ = ipv6_pods;
  last_read_ = now;
}

}  // namespace ad
