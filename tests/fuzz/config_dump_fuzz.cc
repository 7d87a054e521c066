// Fuzz target: ztunnel /config_dump JSON from an untrusted peer. ParseConfigDump must return a
// value or an error for any bytes, never crash, and keep its outputs consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sources/ztunnel/admin_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto dump = ad::ztunnel::ParseConfigDump(input);
  if (dump.ok()) {
    // Every address that survived is canonical, so re-canonicalizing is the identity.
    for (const ad::ZtunnelWorkload& workload : dump->workloads) {
      for (const std::string& ip : workload.ips) {
        if (ad::ztunnel::CanonicalWorkloadIp(ip) != ip) std::abort();
      }
    }
    if (dump->warnings.size() > dump->skipped_entries) std::abort();
  } else if (dump.error().message.empty()) {
    std::abort();
  }
  // The sibling parsers see the same bytes: they are fed by the same peer.
  (void)ad::ztunnel::ParseMetrics(input);
  (void)ad::ztunnel::ParseReadiness(500, input);
  return 0;
}
