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
    // Certificates: one per identity, sorted, never without one; a chain without entries has no
    // expiry.
    for (size_t i = 0; i < dump->certificates.size(); ++i) {
      const ad::ZtunnelCertificate& certificate = dump->certificates[i];
      if (certificate.identity.empty()) std::abort();
      if (i > 0 && !(dump->certificates[i - 1].identity < certificate.identity)) std::abort();
      if (certificate.chain_length == 0 && certificate.expires_unix_ms != 0) std::abort();
    }
  } else if (dump.error().message.empty()) {
    std::abort();
  }
  // The sibling parsers see the same bytes: they are fed by the same peer.
  (void)ad::ztunnel::ParseMetrics(input);
  (void)ad::ztunnel::ParseReadiness(500, input);
  (void)ad::ztunnel::ParseRfc3339UnixMs(input);
  return 0;
}
