// Snapshot data of the kubelet probe path: the host netns's conntrack entries of probe
// connections that never saw a reply. Plain data, filled by the read-only conntrack source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/rule.h"
#include "model/source_error.h"

namespace ad {

// One conntrack entry of a probe connection. Kubelet's probe is SNATed in the host netns's
// POSTROUTING, so the original tuple is node -> pod and the probe SNAT address is the reply
// tuple's destination (pod -> 169.254.7.127).
struct ProbeConntrackEntry {
  Family family = Family::kIpv4;
  std::string orig_src;  // the node address kubelet's socket used
  std::string orig_dst;  // the pod IP
  uint16_t orig_sport = 0;
  uint16_t orig_dport = 0;  // the probed port
  std::string reply_src;    // the pod IP (as long as nothing DNATs the probe)
  std::string reply_dst;    // the probe SNAT address
  uint16_t reply_sport = 0;
  uint16_t reply_dport = 0;
  uint8_t tcp_state = 0;   // TCP_CONNTRACK_*: 1 SYN_SENT; 0 when the kernel sent no protoinfo
  uint32_t status = 0;     // IPS_* bits (IPS_SEEN_REPLY 0x2 clear = UNREPLIED)
  uint32_t timeout_s = 0;  // seconds left before the kernel drops the entry
  uint32_t id = 0;         // CTA_ID
  // CTA_TIMESTAMP start (net.netfilter.nf_conntrack_timestamp=1 only, never turned on by us).
  int64_t start_unix_ms = 0;

  bool operator==(const ProbeConntrackEntry&) const = default;
};

// "SYN_SENT", "ESTABLISHED", ... (conntrack's names); "state N" beyond the known ones.
std::string TcpConntrackStateName(uint8_t state);

// What the conntrack source read in the host netns. Equality ignores the dump's cost and the
// count of entries a user-space filter walked (both change on every poll of a busy node), so a
// quiet poll stays equal to the previous one.
struct ProbeConntrackState {
  bool collected = false;  // the source ran (it may still have failed: errors)
  std::string netns_path;  // where it read (the node's host netns)
  // "kernel": ctnetlink filtered the dump (CTA_FILTER on the reply tuple + CTA_STATUS);
  // "user-space": the kernel refused the filter, every entry was parsed here (bounded);
  // "empty": the netns's nf_conntrack_count was 0, so nothing was dumped.
  std::string filter;
  std::vector<std::string> snat_addresses;   // the probe SNAT sources filtered on
  std::vector<ProbeConntrackEntry> entries;  // unreplied probe entries, at most max_entries
  uint64_t matched = 0;                      // unreplied probe entries in total
  uint64_t examined = 0;                     // entries parsed (user-space filter: the table)
  bool truncated = false;  // entries (or the user-space walk) was cut at its bound
  // net.netfilter.nf_conntrack_tcp_timeout_syn_sent of the host netns (0: unreadable). An
  // unreplied SYN_SENT entry has been waiting for its reply at least (this - timeout_s) seconds.
  uint32_t syn_sent_timeout_s = 0;
  double dump_ms = 0;
  std::vector<SourceError> errors;

  bool operator==(const ProbeConntrackState& other) const {
    return collected == other.collected && netns_path == other.netns_path &&
           filter == other.filter && snat_addresses == other.snat_addresses &&
           entries == other.entries && matched == other.matched && truncated == other.truncated &&
           syn_sent_timeout_s == other.syn_sent_timeout_s && errors == other.errors;
  }
};

}  // namespace ad
