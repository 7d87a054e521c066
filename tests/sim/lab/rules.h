// Istio ambient redirect rules as text, generated from compact templates that follow the facts
// tables (istio-redirect-rules.md §2.1, §3.2, §4). The output is what the istio-cni agent feeds to
// `ip(6)tables-restore --noflush` and `nft -f`, byte-compatible with Istio's golden files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/finding.h"
#include "model/rule.h"

namespace ad::lab {

// Addresses and uid that differ between production and Istio's unit tests.
struct SnatConfig {
  std::string ipv4 = "169.254.7.127";
  std::string ipv6 = "fd16:9254:7127:1337:ffff:ffff:ffff:ffff";
  uint32_t kubelet_uid = 0;  // nft host rule matches the kubelet socket owner (goldens: 1000)
};

// The IPv6 SNAT address Istio's unit tests (and therefore the in-pod goldens) use.
inline constexpr const char* kIstioTestSnatIpv6 = "e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164";

inline constexpr const char* kProbeSetV4 = "istio-inpod-probes-v4";
inline constexpr const char* kProbeSetV6 = "istio-inpod-probes-v6";

// Deviations from Istio's output, used by the lab's fault injection. Defaults produce Istio's text.
struct RuleTweaks {
  int extra_output_jumps = 0;           // nat OUTPUT -> ISTIO_OUTPUT appended again
  bool omit_outbound_redirect = false;  // drop the outbound 15001 REDIRECT (N12)
  bool flush_tables = true;             // nft: emit `flush table` (off to share a table)
};

// In-pod rules for one family (kIpv4 or kIpv6) as restore input, `* mangle` ... `COMMIT`.
std::string IptablesInpodRestore(const AmbientVariant& variant, Family family,
                                 const SnatConfig& snat, const RuleTweaks& tweaks = {});

// Host probe SNAT rules for one family as restore input (nat ISTIO_POSTRT).
std::string IptablesHostRestore(Family family, const SnatConfig& snat);

// In-pod rules as one nft transaction (`inet istio-ambient-{nat,mangle,raw}`); variant.ipv6 adds
// the ip6 twins.
std::string NftInpodScript(const AmbientVariant& variant, const SnatConfig& snat,
                           const RuleTweaks& tweaks = {});

// Host probe SNAT chain (`inet istio-ambient-nat` postrouting); the sets must already exist.
std::string NftHostScript(bool ipv6, const SnatConfig& snat);

// One probe-set member: a pod IP and the pod UID Istio stores as the comment.
struct ProbeMember {
  std::string ip;
  std::string pod_uid;
};

// nft sets istio-inpod-probes-v4/-v6 in `inet istio-ambient-nat` with their elements.
std::string NftProbeSetsScript(bool ipv6, const std::vector<ProbeMember>& v4_members,
                               const std::vector<ProbeMember>& v6_members);

// `ipset restore` input creating one hash:ip probe set with comments and filling it.
std::string IpsetProbeRestore(Family family, const std::vector<ProbeMember>& members);

// Sidecar-mode rules in native nft (`inet istio-proxy-nat`), modelled on Istio's sidecar capture;
// they never collide with the ambient tables or chains of any backend.
std::string NftSidecarScript();

}  // namespace ad::lab
