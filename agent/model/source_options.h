// What the kernel sources are asked to read, as plain data: the engine's configuration and the
// scan carry these without including the sources that act on them (sources/netns/discovery.h,
// sources/netfilter/readers.h), so the layers above the engine never see the kernel's headers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ad {

// Where netns discovery looks (DiscoverNetns).
struct DiscoveryOptions {
  std::string proc_root = "/proc";  // empty = do not scan processes
  std::vector<std::string> netns_dirs = {"/var/run/netns",
                                         "/run/containerd/io.containerd.grpc.v1.cri/netns"};
  std::string host_netns_path;  // empty = <proc_root>/1/ns/net
  std::string name_glob;        // only bind mounts whose file name matches (fnmatch); "" = all
};

// Bounds of the netfilter readers.
struct ReadLimits {
  size_t max_rules_per_netns = 200000;  // beyond this the reader stops and reports truncation
  size_t max_set_elements = 200000;
};

}  // namespace ad
