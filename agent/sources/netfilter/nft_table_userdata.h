// Decoder of an nf_tables table's userdata (NFTA_TABLE_USERDATA), pure: no libnftnl, no kernel.
//
// The layout is libnftnl's udata TLV list: per entry a type byte, a length byte and `length`
// value bytes, back to back. Table entry types (libnftnl's enum nftnl_udata_table_types):
//   0 comment: a NUL-terminated string (every nft since table comments);
//   1 creator version: 4 bytes, major, minor, micro and the stable release number (0: none);
//   2 creator build time: 8 bytes, seconds since the epoch, big-endian.
// Types 1 and 2 are written by newer nftables only (2025, "table: Embed creating nft version into
// userdata"); the nft reading a table compares them with its own and, when it is older, prints
// "# Warning: table <family> <name> was created by a newer version of nftables? Content may be
// incomplete!". An nft that does not know types 1 and 2 (Debian 12's 1.0.6 with libnftnl 1.2.4)
// skips them silently. Such an nft rejects the whole userdata when a known entry has the wrong
// length (comment without NUL; version not 4 bytes, build time not 8) and then lists no table.
#pragma once

#include <cstdint>
#include <span>

#include "model/rule.h"

namespace ad::nft {

inline constexpr uint8_t kTableUdataComment = 0;
inline constexpr uint8_t kTableUdataCreatorVersion = 1;
inline constexpr uint8_t kTableUdataCreatorBuildTime = 2;

// Never fails: what cannot be decoded is named in `error`, and what was decoded before it is
// kept. Unknown entry types are skipped, as nft does.
NftTableUserdata DecodeTableUserdata(std::span<const uint8_t> data);

}  // namespace ad::nft
