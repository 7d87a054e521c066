// In-process netfilter readers. Each reads the netns the *calling thread* is in (enter it with
// NetnsGuard first), never writes, and reports failures as SourceError values.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/result.h"
#include "model/rule.h"
#include "model/source_options.h"  // ReadLimits

namespace ad {

// All nf_tables tables (every family) with chains, rules and sets. Tables written by iptables-nft
// are tagged Backend::kIptablesNft, the rest Backend::kNft.
Result<std::vector<Table>> ReadNfTables(const ReadLimits& limits);

// Names from /proc/thread-self/net/ip_tables_names (ipv4) or ip6_tables_names (ipv6). Reading this
// file never instantiates a table; querying a table that is not listed would.
Result<std::vector<std::string>> ReadLegacyTableNames(Family family);

// x_tables via IPT_SO_GET_INFO / IPT_SO_GET_ENTRIES (IP6T_* for ipv6), only for `table_names`
// (which must come from ReadLegacyTableNames).
Result<std::vector<Table>> ReadLegacyTables(Family family,
                                            const std::vector<std::string>& table_names,
                                            const ReadLimits& limits);

// ipset sets with members (netlink NFNL_SUBSYS_IPSET, list only).
Result<std::vector<IpSet>> ReadIpSets(const ReadLimits& limits);

}  // namespace ad
