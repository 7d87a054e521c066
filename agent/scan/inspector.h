// The per-netns source interface the scanner drives. The kernel implementation combines the
// netfilter, routing and ipset readers; tests can substitute fakes.
#pragma once

#include <memory>

#include "model/snapshot.h"
#include "model/source_options.h"

namespace ad {

class NetnsInspector {
 public:
  virtual ~NetnsInspector() = default;
  // Reads one netns. Must be thread-safe; never throws; failures land in snapshot.errors.
  virtual NetnsSnapshot Inspect(const NetnsRecord& netns) = 0;
  // Reads only the listening sockets of an already inspected netns again (ztunnel opens and
  // closes its in-pod listeners without any netfilter or routing event): replaces
  // snapshot.listeners, reads.listeners and the listener read's errors. Same rules as Inspect.
  // The default inspects the whole netns and keeps its listener part.
  virtual void RefreshListeners(NetnsSnapshot& snapshot);
};

// The SourceKind of listener read errors (RefreshListeners replaces those, and only those).
inline constexpr SourceKind kListenerErrorKind = SourceKind::kSockDiag;

struct InspectorOptions {
  // Istio's probe ipsets live in the host netns only; a node scan skips the ipset dump elsewhere
  // (≈ 20 µs per netns). The `rules` listing reads everything.
  bool ipsets_in_host_only = false;
  // ztunnel's UDP 15053 DNS listeners, looked up where it has in-pod TCP listeners
  // (DNS_CAPTURE_BROKEN). Off only for benches measuring the cost of the cause checks.
  bool dns_udp_listeners = true;
};

std::unique_ptr<NetnsInspector> MakeKernelInspector(const ReadLimits& limits,
                                                    InspectorOptions options = {});

}  // namespace ad
