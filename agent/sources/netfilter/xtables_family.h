// The per-family types and constants of the iptables-legacy (x_tables) getsockopt interface,
// shared by the legacy reader and the legacy change fingerprint.
#pragma once

// clang-format off: the uapi headers need the socket and in.h types first.
#include <netinet/in.h>
#include <sys/socket.h>
// clang-format on
#include <linux/netfilter/x_tables.h>
#include <linux/netfilter_ipv4/ip_tables.h>
#include <linux/netfilter_ipv6/ip6_tables.h>

#include "model/source_error.h"

namespace ad::xt {

struct Ipv4 {
  using Entry = ipt_entry;
  using GetInfo = ipt_getinfo;
  using GetEntries = ipt_get_entries;
  static constexpr int kDomain = AF_INET;
  static constexpr int kLevel = IPPROTO_IP;
  static constexpr int kGetInfo = IPT_SO_GET_INFO;
  static constexpr int kGetEntries = IPT_SO_GET_ENTRIES;
  static constexpr const char* kNamesFile = "/proc/thread-self/net/ip_tables_names";
  static constexpr SourceKind kSource = SourceKind::kLegacyIpv4;
};

struct Ipv6 {
  using Entry = ip6t_entry;
  using GetInfo = ip6t_getinfo;
  using GetEntries = ip6t_get_entries;
  static constexpr int kDomain = AF_INET6;
  static constexpr int kLevel = IPPROTO_IPV6;
  static constexpr int kGetInfo = IP6T_SO_GET_INFO;
  static constexpr int kGetEntries = IP6T_SO_GET_ENTRIES;
  static constexpr const char* kNamesFile = "/proc/thread-self/net/ip6_tables_names";
  static constexpr SourceKind kSource = SourceKind::kLegacyIpv6;
};

}  // namespace ad::xt
