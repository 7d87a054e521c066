// Pure parsing of the runtime-specific verbose sandbox info (PodSandboxStatusResponse.info["info"])
// that containerd (1.6, 2.x) and CRI-O return: the pause pid and the netns pin path. The typed
// CRI status carries neither.
#pragma once

#include <string>
#include <string_view>

#include "model/result.h"

namespace ad::cri {

struct SandboxInfo {
  std::string netns_path;     // empty when absent, closed or hostNetwork
  int pid = 0;                // pause / infra process on the host, 0 when unknown
  bool netns_closed = false;  // containerd: netNamespaceClosed (stopped sandbox)
  std::string runtime_type;   // containerd "io.containerd.runc.v2"; empty for CRI-O
};

// Largest info document accepted (containerd emits a few KiB per sandbox).
inline constexpr size_t kMaxSandboxInfoBytes = 4 << 20;

// Extracts pid and netns path. Sources, in order: runtimeSpec.linux.namespaces[type=="network"]
// .path, then sandboxMetadata.Metadata.NetNSPath (containerd 2.x). A closed netns yields no path
// even though containerd keeps the stale one in runtimeSpec. Errors only for malformed JSON.
Result<SandboxInfo> ParseSandboxInfo(std::string_view info_json);

}  // namespace ad::cri
