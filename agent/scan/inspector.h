// The per-netns source interface the scanner drives. The kernel implementation combines the
// netfilter, routing and ipset readers; tests can substitute fakes.
#pragma once

#include <memory>

#include "model/snapshot.h"
#include "sources/netfilter/readers.h"

namespace ad {

class NetnsInspector {
 public:
  virtual ~NetnsInspector() = default;
  // Reads one netns. Must be thread-safe; never throws; failures land in snapshot.errors.
  virtual NetnsSnapshot Inspect(const NetnsRecord& netns) = 0;
};

struct InspectorOptions {
  // Istio's probe ipsets live in the host netns only; a node scan skips the ipset dump elsewhere
  // (≈ 20 µs per netns). The `rules` listing reads everything.
  bool ipsets_in_host_only = false;
};

std::unique_ptr<NetnsInspector> MakeKernelInspector(const ReadLimits& limits,
                                                    InspectorOptions options = {});

}  // namespace ad
