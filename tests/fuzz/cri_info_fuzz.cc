// Fuzz target: the CRI verbose sandbox info JSON (PodSandboxStatusResponse.info["info"]) that a
// container runtime returns. Any bytes give a value or an error; a value keeps the invariants
// the CRI source relies on. Seeds: containerd/CRI-O shapes from the shared corpus and unit tests.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sources/cri/sandbox_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto info = ad::cri::ParseSandboxInfo(input);
  if (info.ok()) {
    if (info->pid < 0) std::abort();
    if (info->netns_closed && !info->netns_path.empty()) std::abort();
  } else if (info.error().message.empty()) {
    std::abort();
  }
  return 0;
}
