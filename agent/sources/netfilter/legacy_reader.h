// Internals of the iptables-legacy reader, exposed for unit tests: decoding an
// IPT_SO_GET_ENTRIES blob is pure and must reject every corrupt layout with an error.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "model/result.h"
#include "model/rule.h"
#include "sources/netfilter/readers.h"
#include "sources/netfilter/xt_compat.h"

namespace ad::legacy {

constexpr int kNumHooks = 5;  // NF_INET_NUMHOOKS

// The family-independent part of ipt_getinfo / ip6t_getinfo.
struct TableLayout {
  uint32_t valid_hooks = 0;
  std::array<uint32_t, kNumHooks> hook_entry{};
  std::array<uint32_t, kNumHooks> underflow{};
  uint32_t num_entries = 0;
  uint32_t size = 0;
};

// Decodes the entry blob of one table into chains and normalized rules.
Result<Table> DecodeTableBlob(Family family, const std::string& table_name,
                              const TableLayout& layout, std::span<const uint8_t> blob,
                              const ReadLimits& limits, const xt::SetNameResolver& resolve_set);

}  // namespace ad::legacy
