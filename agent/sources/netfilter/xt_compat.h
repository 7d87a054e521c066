// Pure decoders for the x_tables payloads that iptables-nft stores inside nf_tables `match` /
// `target` compat expressions (NFTNL_EXPR_MT_INFO / NFTNL_EXPR_TG_INFO). No libnftnl and no
// syscalls here, so the decoders can be fuzzed with hand-made byte strings without root.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/rule.h"

namespace ad::xt {

// ipset index -> set name; returns "" when the name is not known.
using SetNameResolver = std::function<std::string(uint16_t index)>;

// Appends the matches one xt match contributes (none for a no-op such as a bare "-m tcp"). The
// comment match fills *comment instead. Short or undecodable payloads become a kUnknown match.
void DecodeMatch(Family family, std::string_view name, uint32_t revision,
                 std::span<const uint8_t> payload, const SetNameResolver& resolve_set,
                 std::vector<Match>* matches, std::string* comment);

// Decodes one xt target; short or unknown payloads become a kUnknown action.
Action DecodeTarget(Family family, std::string_view name, uint32_t revision,
                    std::span<const uint8_t> payload);

// Canonical text of 4 (ipv4) or 16 (ipv6) network-order address bytes.
std::string AddressText(Family family, const uint8_t* bytes);

// "addr/len" for a contiguous prefix; "addr/mask-address" otherwise. `mask` may be null (= full).
std::string PrefixText(Family family, const uint8_t* addr, const uint8_t* mask);

// NAT target text "addr[-addr][:port[-port]]" ("[v6]:port" for ipv6 with a port). Ports are in
// host order. Empty parts are left out.
std::string NatTargetText(Family family, const uint8_t* min_addr, const uint8_t* max_addr,
                          bool has_addr, uint16_t min_port, uint16_t max_port, bool has_port);

}  // namespace ad::xt
