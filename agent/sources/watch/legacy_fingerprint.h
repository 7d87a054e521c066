// iptables-legacy has no change events, so its state is fingerprinted instead. Opened inside the
// netns (worker thread + NetnsGuard): the ip_tables_names / ip6_tables_names fds and one raw socket
// per family stay bound to that netns, so later checks need no setns.
//  - Gate (~9 us v4+v6): the table names plus IPT_SO_GET_INFO of each *listed* table (probing an
//    unlisted table would create it). Misses same-size replaces (-R).
//  - Content hash (~90 us): IPT_SO_GET_ENTRIES of each listed table into a zeroed buffer, hashed
//    without the per-entry counters and comefrom, so traffic and -Z do not change it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad::watch {

class LegacyFingerprint {
 public:
  // Fails only when neither family can be fingerprinted (the error of IPv4 then).
  static Result<LegacyFingerprint> Open();

  // A hash of the table names and every listed table's GET_INFO layout. While the netns has no
  // legacy table at all, the IPv6 names are read at every kIpv6QuietEvery-th gate only (the last
  // IPv6 part is reused in between): Istio writes IPv4 rules whenever it writes IPv6 ones, so a
  // new legacy rule set shows in the IPv4 names at once, and an IPv6-only table within that many
  // gates (or at the next content hash, which reads both): 1.25 reads a gate instead of 2.
  Result<uint64_t> Gate();
  static constexpr int kIpv6QuietEvery = 4;
  // Gate() plus a hash of every listed table's entries.
  Result<uint64_t> ContentHash();

 private:
  struct FamilyHandles {
    UniqueFd names;   // /proc/thread-self/net/ip{,6}_tables_names opened inside the netns
    UniqueFd socket;  // raw socket of the family, for getsockopt
  };
  LegacyFingerprint() = default;
  // Starts a hash with the IPv4 part; `ipv4_tables`: how many tables IPv4 listed.
  Result<uint64_t> HashIpv4(bool with_entries, size_t* ipv4_tables);

  FamilyHandles ipv4_;
  FamilyHandles ipv6_;
  // The IPv6 part of the last gate while it listed no table (what quiet gates reuse), and the
  // quiet gates since it was read.
  std::optional<uint64_t> quiet_ipv6_part_;
  int quiet_ipv6_gates_ = 0;
};

}  // namespace ad::watch
