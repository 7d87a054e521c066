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

std::unique_ptr<NetnsInspector> MakeKernelInspector(const ReadLimits& limits);

}  // namespace ad
