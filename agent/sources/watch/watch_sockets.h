// Change-notification sockets of one netns: the nf_tables event socket (NFNLGRP_NFTABLES), the
// GETGEN request socket (a cheap "did anything commit?" gate) and the rtnetlink rule/route event
// socket. Each is bound to the netns of the thread that opens it, so open them on a worker thread
// inside a NetnsGuard; afterwards they are read from any thread. All are read-only: they subscribe
// and ask, and never send anything that changes state.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad::watch {

// One nf_tables transaction as announced by its NEWGEN message (the end of a commit).
struct NftCommit {
  uint32_t generation = 0;
  uint32_t committer_pid = 0;
  std::string committer_name;  // comm of the committing process, e.g. "iptables-nft"
};

struct NftDrain {
  std::vector<NftCommit> commits;  // at most kMaxCommitsPerDrain; see commits_dropped
  uint32_t commits_dropped = 0;    // NEWGENs beyond the bound (still counted)
  uint32_t object_messages = 0;    // NEWRULE, DELCHAIN, ... (not NEWGEN)
  bool overflow = false;           // ENOBUFS: events were lost, the netns needs a full re-read
  std::optional<SourceError> error;
};

inline constexpr size_t kMaxCommitsPerDrain = 64;

// NETLINK_NETFILTER socket subscribed to NFNLGRP_NFTABLES, non-blocking. NETLINK_NO_ENOBUFS is
// deliberately never set: a lost event must surface as an overflow.
class NftEventSocket {
 public:
  // receive_buffer 0 keeps the kernel default (212992); tests shrink it to provoke ENOBUFS.
  static Result<NftEventSocket> Open(int receive_buffer = 0);
  int fd() const { return fd_.get(); }
  // Reads everything queued now (never blocks).
  NftDrain Drain();

 private:
  explicit NftEventSocket(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// NETLINK_NETFILTER request socket for NFT_MSG_GETGEN (~3 us per call on an open socket).
class NftGenerationGate {
 public:
  static Result<NftGenerationGate> Open();
  Result<uint32_t> Generation();

 private:
  explicit NftGenerationGate(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
  uint32_t sequence_ = 0;
};

struct RouteDrain {
  uint32_t rule_messages = 0;       // RTM_NEWRULE / RTM_DELRULE (IPv4 and IPv6)
  uint32_t route_messages = 0;      // RTM_NEWROUTE / RTM_DELROUTE
  std::set<uint32_t> route_tables;  // the routing tables those messages were about
  bool overflow = false;            // ENOBUFS
  std::optional<SourceError> error;
};

// NETLINK_ROUTE socket in RTNLGRP_IPV4_RULE, _IPV6_RULE, _IPV4_ROUTE and _IPV6_ROUTE, non-blocking
// (no CAP_NET_ADMIN needed).
class RouteEventSocket {
 public:
  static Result<RouteEventSocket> Open(int receive_buffer = 0);
  int fd() const { return fd_.get(); }
  RouteDrain Drain();

 private:
  explicit RouteEventSocket(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace ad::watch
