// Layout of a legacy_blob_fuzz input, shared by the target and the seed capture tool: this
// header (host byte order, as IPT_SO_GET_INFO returns it), then the IPT_SO_GET_ENTRIES blob.
#pragma once

#include <cstdint>

namespace ad::fuzz {

struct LegacyBlobHeader {
  uint8_t ipv6 = 0;   // bit 0: decode as ip6t_entry instead of ipt_entry
  uint8_t table = 0;  // index into kLegacyTableNames (modulo its size)
  uint8_t reserved[2] = {};
  uint32_t valid_hooks = 0;
  uint32_t hook_entry[5] = {};
  uint32_t underflow[5] = {};
  uint32_t num_entries = 0;
};

inline constexpr const char* kLegacyTableNames[] = {"filter", "nat", "mangle", "raw", "security"};

}  // namespace ad::fuzz
