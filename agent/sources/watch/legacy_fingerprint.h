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

#include "model/result.h"
#include "sources/unique_fd.h"

namespace ad::watch {

class LegacyFingerprint {
 public:
  // Fails only when neither family can be fingerprinted (the error of IPv4 then).
  static Result<LegacyFingerprint> Open();

  // A hash of the table names and every listed table's GET_INFO layout.
  Result<uint64_t> Gate();
  // Gate() plus a hash of every listed table's entries.
  Result<uint64_t> ContentHash();

 private:
  struct FamilyHandles {
    UniqueFd names;   // /proc/thread-self/net/ip{,6}_tables_names opened inside the netns
    UniqueFd socket;  // raw socket of the family, for getsockopt
  };
  LegacyFingerprint() = default;
  Result<uint64_t> Fingerprint(bool with_entries);

  FamilyHandles ipv4_;
  FamilyHandles ipv6_;
};

}  // namespace ad::watch
