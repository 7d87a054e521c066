// Helpers shared by the iptables and nft text parsers (internal to ad_text).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/snapshot.h"

namespace ad::text {

// Splits on blanks; double-quoted words keep their blanks and lose the quotes (backslash escapes
// the next character). When `nft_punctuation` is set, '{', '}' and ';' outside quotes are words of
// their own, as nft's scanner treats them.
std::vector<std::string> Tokenize(std::string_view line, bool nft_punctuation);

// Unsigned 32-bit number in decimal or 0x-hex; nullopt on anything else.
std::optional<uint32_t> ParseU32(std::string_view s);

// "a.b.c.d[/len|/mask]" or "v6[/len]" -> canonical prefix with host bits cleared, e.g.
// "169.254.7.127/32", "::1/128" (RFC 5952 text via inet_ntop). nullopt if not an address.
std::optional<std::string> CanonicalPrefix(std::string_view text);

// Bare address in canonical text, no prefix length ("fd00::5").
std::optional<std::string> CanonicalAddress(std::string_view text);

// IP protocol number for "tcp", "udp", "icmp", "ipv6-icmp"/"icmpv6", "sctp" or a number.
std::optional<uint32_t> ProtocolNumber(std::string_view name);

// Port or range "a", "a:b" (iptables) / "a-b" (nft) -> (first, last).
std::optional<std::pair<uint32_t, uint32_t>> ParsePortRange(std::string_view text);

// Conntrack state list "RELATED,ESTABLISHED" / "established,related" -> kCtState bit mask.
std::optional<uint32_t> ParseCtStates(std::string_view list);

std::string Lower(std::string_view s);
std::string Upper(std::string_view s);
std::string Join(const std::vector<std::string>& words, size_t first, size_t last);

SourceError ParseError(SourceKind source, size_t line_number, std::string_view message);

}  // namespace ad::text
