// One whole-node scan: discovery, then every netns inspected on a small worker pool.
#pragma once

#include "model/snapshot.h"
#include "scan/inspector.h"
#include "sources/netns/discovery.h"

namespace ad {

struct ScanOptions {
  DiscoveryOptions discovery;
  int workers = 2;
  std::string node_name;  // default: $NODE_NAME, else hostname
};

NodeSnapshot ScanNode(const ScanOptions& options, NetnsInspector& inspector);

}  // namespace ad
