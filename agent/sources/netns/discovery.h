// Finds every network namespace on the node: bind mounts in netns directories and
// /proc/<pid>/ns/net links, deduplicated by (dev, inode).
#pragma once

#include <string>
#include <vector>

#include "model/result.h"
#include "model/snapshot.h"

namespace ad {

struct DiscoveryOptions {
  std::string proc_root = "/proc";  // empty = do not scan processes
  std::vector<std::string> netns_dirs = {"/var/run/netns",
                                         "/run/containerd/io.containerd.grpc.v1.cri/netns"};
  std::string host_netns_path;  // empty = <proc_root>/1/ns/net
  std::string name_glob;        // only bind mounts whose file name matches (fnmatch); "" = all
};

// Never fails as a whole: unreadable directories and processes become warnings.
// The record of one netns given by path (a bind mount or /proc/<pid>/ns/net): its dev and inode
// by stat(), the path as its only path. An error names stat, the path and errno.
Result<NetnsRecord> NetnsRecordForPath(const std::string& path);

std::vector<NetnsRecord> DiscoverNetns(const DiscoveryOptions& options,
                                       std::vector<SourceError>* warnings);

}  // namespace ad
