// One whole-node scan: discovery, then every netns inspected on a small worker pool.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/snapshot.h"
#include "model/source_options.h"
#include "scan/inspector.h"
#include "scan/node_source.h"

namespace ad {

struct DiscoveryCache;  // sources/netns/discovery.h

struct ScanOptions {
  DiscoveryOptions discovery;
  int workers = 2;
  std::string node_name;  // default: $NODE_NAME, else hostname
  // Run after the netns inspection, in this order (shared: scans reuse them).
  std::vector<std::shared_ptr<NodeSource>> node_sources;
};

// The node's name: `configured` when given, else $NODE_NAME (the DaemonSet's downward API),
// else the hostname, else "unknown".
std::string ResolveNodeName(const std::string& configured);

// A partial scan (the daemon's steady state): discovery runs, but a netns the previous snapshot
// holds and that is not in `reinspect` is copied from it (its record refreshed: paths and pids
// change without its rules changing) instead of being read again. New netns are always read.
struct ScanReuse {
  // Consumed: the netns and node data taken over are moved out of it (the caller replaces it
  // with the new snapshot), so a steady-state scan copies nothing it did not read.
  NodeSnapshot* previous = nullptr;
  std::set<uint64_t> reinspect;  // netns inodes to read again
  // Netns taken over from `previous` whose listening sockets alone are read again
  // (NetnsInspector::RefreshListeners); `relisten_all` = every netns taken over.
  std::set<uint64_t> relisten;
  bool relisten_all = false;
  // False: the node-wide sources (ZDS socket, fd inventory, ztunnel admin, CRI) are not polled in
  // this scan; their data is taken from `previous`, and listeners of re-read netns keep the
  // owners attributed before (same socket inode) until the next poll.
  bool node_sources = true;
  // Discovery's bind mounts by path from the last partial scan (DiscoveryCache); optional.
  DiscoveryCache* discovery = nullptr;
};

// Listener owners come from the fd inventory, which a scan without node sources does not take:
// the sockets of `now` that were in `before` get the owners attributed to them there.
void CarryListenerOwners(const NetnsSnapshot& before, NetnsSnapshot& now);

NodeSnapshot ScanNode(const ScanOptions& options, NetnsInspector& inspector,
                      const ScanReuse* reuse = nullptr);

}  // namespace ad
