// Fuzz target: a file of the node's CNI config directory (written by the CNI plugins' installers,
// read as untrusted bytes). The first byte picks the file name (.conflist or .conf), the rest is
// the file. Any bytes give a verdict, never a crash; a file that loads keeps the invariants the
// CNI checks rely on.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sources/cni/cni_conf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string name = (data[0] & 1) == 0 ? "10-net.conflist" : "10-net.conf";
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const ad::cni::CniParsedConf parsed = ad::cni::ParseCniConf(name, bytes, 1 << 16);
  if (!parsed.error.empty()) return 0;
  if (parsed.plugin_types.empty()) std::abort();
  for (const std::string& type : parsed.plugin_types) {
    if (type.empty()) std::abort();
  }
  const bool istio = std::find(parsed.plugin_types.begin(), parsed.plugin_types.end(),
                               "istio-cni") != parsed.plugin_types.end();
  if (parsed.istio_cni != istio) std::abort();
  if (!parsed.istio_has_kubeconfig && !parsed.istio_kubeconfig.empty()) std::abort();
  return 0;
}
