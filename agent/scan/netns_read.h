// One netns read now, outside a node scan: what `rules` prints and the API's GetNetnsRules
// answers. The caller names the netns by path or by the record of a scan; the kernel read (and the
// netns switch it needs) stays in this layer.
#pragma once

#include <string>

#include "model/result.h"
#include "model/snapshot.h"

namespace ad {

// Reads the netns at `path` (a bind mount or /proc/<pid>/ns/net) on the calling thread.
Result<NetnsSnapshot> ReadNetnsAtPath(const std::string& path);

// Reads `record` on a shared worker thread made for netns switches (never the caller's: a gRPC
// thread must not setns).
NetnsSnapshot ReadNetnsOnWorker(const NetnsRecord& record);
// The same for a path.
Result<NetnsSnapshot> ReadNetnsAtPathOnWorker(const std::string& path);

}  // namespace ad
