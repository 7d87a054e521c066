// Read-only ctnetlink dump of kubelet probe connections that never saw a reply, in the netns of
// the calling thread (the node's host netns; the caller enters it with NetnsGuard).
//
// Kubelet's probe is SNATed in POSTROUTING, so conntrack holds it as node -> pod (original) and
// pod -> SNAT address (reply): the match is on the reply tuple's destination. The kernel filters
// the dump to unreplied TCP (CTA_FILTER with CTA_FILTER_REPLY_FLAGS on the reply tuple's protocol,
// CTA_STATUS/CTA_STATUS_MASK for "IPS_SEEN_REPLY clear"), so a healthy node's dump returns next to
// nothing; the SNAT address is compared here. Every dump walks the kernel's whole conntrack hash
// (shared by all netns), so there is one dump per family that has SNAT addresses, not one per
// address. A kernel that refuses the filter (EOPNOTSUPP/EINVAL) gets the status filter alone, then
// an unfiltered dump, parsed here and bounded by max_examined.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/conntrack.h"
#include "model/istio_facts.h"
#include "model/result.h"

namespace ad {

struct ProbeConntrackOptions {
  std::vector<std::string> snat_v4 = {std::string(istio::kProbeSnatV4)};
  std::vector<std::string> snat_v6 = {std::string(istio::kProbeSnatV6)};
  size_t max_entries = 1024;      // unreplied probe entries kept (the rest only counted)
  size_t max_examined = 262144;   // user-space filter: entries parsed at most (then cut)
  bool force_user_space = false;  // skip the kernel filter (tests and the bench)
};

// One dump per SNAT address (kernel filter) or per family (user-space filter). An unavailable
// ctnetlink (no nf_conntrack_netlink, EPERM) is the error; a refused filter is not.
Result<ProbeConntrackState> ReadProbeConntrack(const ProbeConntrackOptions& options);

// net.netfilter.nf_conntrack_tcp_timeout_syn_sent of the calling thread's netns (0: unreadable).
uint32_t ReadSynSentTimeout();

}  // namespace ad
