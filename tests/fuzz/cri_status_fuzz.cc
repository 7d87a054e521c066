// Fuzz target: where a container runtime says its CNI config lives. The runtime-wide verbose CRI
// Status info (StatusResponse.info): info["config"] and info["cniconfig"] (containerd's CRI
// config and go-cni's ConfigResult, JSON) and info["lastCNILoadStatus"]; and CRI-O's TOML
// configuration (GET /config). The input is split at its first NUL byte (config, then cniconfig)
// and, in further calls, given whole as cniconfig and as CRI-O's TOML. Any bytes give a value or
// an error; a value keeps the invariants the CNI source relies on (a directory is absolute,
// bounded and free of NUL; the pod network is one of the networks).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sources/cri/runtime_status.h"

namespace {

void Check(const ad::Result<ad::cri::RuntimeCniConfig>& parsed) {
  if (!parsed.ok()) {
    if (parsed.error().message.empty()) std::abort();
    return;
  }
  const std::string& dir = parsed->conf_dir;
  if (!dir.empty()) {
    if (dir.front() != '/' || dir.size() > ad::cri::kMaxConfDirBytes) std::abort();
    if (dir.find('\0') != std::string::npos) std::abort();
    if (parsed->conf_dir_key.empty()) std::abort();
  }
  if (!parsed->pod_network.empty() && std::find(parsed->networks.begin(), parsed->networks.end(),
                                                parsed->pod_network) == parsed->networks.end()) {
    std::abort();
  }
  if (parsed->last_load_status.size() > ad::cri::kMaxLoadStatusBytes + 3) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view config = input.substr(0, nul);
  const std::string_view cniconfig =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  Check(ad::cri::ParseRuntimeCniConfig(config, cniconfig, cniconfig));
  Check(ad::cri::ParseRuntimeCniConfig({}, input, {}));
  const auto crio = ad::cri::ParseCrioNetworkDir(input);
  if (crio.ok() && !crio->empty()) {
    if (crio->front() != '/' || crio->size() > ad::cri::kMaxConfDirBytes) std::abort();
    if (crio->find('\0') != std::string::npos) std::abort();
  } else if (!crio.ok() && crio.error().message.empty()) {
    std::abort();
  }
  return 0;
}
