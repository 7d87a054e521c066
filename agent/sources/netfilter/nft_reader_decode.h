// Register-tracking decoder from one nf_tables rule's expression list to a normalized Rule.
// Internal to the nft reader (it includes libnftnl); xt compat payloads go to xt_compat.h.
#pragma once

#include <libnftnl/rule.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "model/rule.h"
#include "sources/netfilter/xt_compat.h"

namespace ad::nft {

struct DecodedRule {
  Rule rule;            // not yet canonicalized
  bool has_xt = false;  // carried an xt `match`/`target` compat expression (iptables-nft)
};

// `table_family` gives the address width in ip/ip6 tables; inet tables take it from the
// `meta nfproto` compare that precedes an address match. Never fails: what cannot be decoded
// becomes kUnknown matches or actions.
DecodedRule DecodeRule(nftnl_rule* rule, Family table_family,
                       const xt::SetNameResolver& resolve_ipset);

// Key width in bytes (NFTNL_SET_KEY_LEN) of a set or map of the rule's table, 0 when unknown.
// It tells a concatenated lookup key's extent exactly; without it the decoder infers the extent
// from the order the key's registers were written.
using SetKeyWidth = std::function<uint32_t(std::string_view set_name)>;
DecodedRule DecodeRule(nftnl_rule* rule, Family table_family,
                       const xt::SetNameResolver& resolve_ipset, const SetKeyWidth& key_width);

// Comment stored in nftables userdata: a TLV list (type u8, len u8, value) whose `comment_type`
// entry is a NUL-terminated string. Empty when absent or malformed.
std::string UserdataComment(const uint8_t* data, uint32_t len, uint8_t comment_type);

}  // namespace ad::nft
