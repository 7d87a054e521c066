// One whole-node scan: discovery, then every netns inspected on a small worker pool.
#pragma once

#include <memory>
#include <vector>

#include "model/snapshot.h"
#include "scan/inspector.h"
#include "scan/node_source.h"
#include "sources/netns/discovery.h"

namespace ad {

struct ScanOptions {
  DiscoveryOptions discovery;
  int workers = 2;
  std::string node_name;  // default: $NODE_NAME, else hostname
  // Run after the netns inspection, in this order (shared: scans reuse them).
  std::vector<std::shared_ptr<NodeSource>> node_sources;
};

NodeSnapshot ScanNode(const ScanOptions& options, NetnsInspector& inspector);

}  // namespace ad
