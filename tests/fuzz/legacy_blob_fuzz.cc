// Fuzz target: the iptables-legacy IPT_SO_GET_ENTRIES blob decoder. The input is a
// LegacyBlobHeader (what IPT_SO_GET_INFO said) followed by the entry blob; the announced size is
// the blob's, so every input reaches the entry walk. Seeds are real tables read from netns
// loaded by iptables-legacy-restore.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "legacy_blob_input.h"
#include "sources/netfilter/legacy_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ad::fuzz::LegacyBlobHeader header;
  if (size < sizeof(header)) return 0;
  std::memcpy(&header, data, sizeof(header));
  ad::legacy::TableLayout layout;
  layout.valid_hooks = header.valid_hooks;
  for (int hook = 0; hook < ad::legacy::kNumHooks; ++hook) {
    layout.hook_entry[hook] = header.hook_entry[hook];
    layout.underflow[hook] = header.underflow[hook];
  }
  layout.num_entries = header.num_entries;
  layout.size = static_cast<uint32_t>(size - sizeof(header));
  const ad::Family family = (header.ipv6 & 1) != 0 ? ad::Family::kIpv6 : ad::Family::kIpv4;
  const std::string table =
      ad::fuzz::kLegacyTableNames[header.table % std::size(ad::fuzz::kLegacyTableNames)];
  // The kernel's blob is 8-byte aligned (xt entries hold u64 counters): decode a copy like it.
  auto blob = std::make_unique_for_overwrite<uint64_t[]>((layout.size + 7) / 8);
  std::memcpy(blob.get(), data + sizeof(header), layout.size);
  const ad::xt::SetNameResolver resolve_set = [](uint16_t index) {
    return index % 2 == 0 ? "set" + std::to_string(index) : std::string();
  };
  ad::ReadLimits limits;
  limits.max_rules_per_netns = 2000;  // small enough that the limit path is reachable
  auto decoded = ad::legacy::DecodeTableBlob(
      family, table, layout,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(blob.get()), layout.size), limits,
      resolve_set);
  if (decoded.ok()) {
    size_t rules = 0;
    for (const ad::Chain& chain : decoded->chains) {
      rules += chain.rules.size();
      for (const ad::Rule& rule : chain.rules) {
        (void)ad::RenderRule(ad::Backend::kIptablesLegacy, family, chain.name, rule);
      }
    }
    if (rules > limits.max_rules_per_netns) std::abort();
  } else if (decoded.error().message.empty()) {
    std::abort();
  }
  return 0;
}
