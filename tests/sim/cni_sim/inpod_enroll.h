// istio-cni's per-pod enrollment steps, done by cni-sim for pods whose pods-file line carries
// enrollment info (facts: istio-redirect-rules.md §7 "Enrollment order"): CreateInpodRules (in-pod
// rules + policy routes, inside the pod netns) -> AddWorkload to ztunnel, wait for the ack -> pod
// IP into the host probe set. Removal: probe set -> DeleteInpodRules -> DelWorkload. Rule text
// comes from the lab's generators (lab/rules.h) and is loaded with the real tools (lab/exec.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "model/result.h"

namespace ad::sim {

struct PodEnrollment {
  std::string backend = "iptables-nft";  // "iptables-nft" | "legacy" | "nft"
  bool dns_capture = true;
  bool ipv6 = false;
  std::string host_netns_path;  // where the probe sets (ipset or nft) live
  std::string ipv4;             // probe-set member
  std::string ipv6_address;     // probe-set member in istio-inpod-probes-v6 (ipv6 only)
};

bool operator==(const PodEnrollment& a, const PodEnrollment& b);

// Pods-file trailing fields: `backend=B dns=0|1 ipv6=0|1 host=PATH ip=A [ip6=A]`.
std::string EnrollmentFields(const PodEnrollment& enrollment);
// `fields` are the key=value words after the five pod fields; host= and ip= are required.
Result<PodEnrollment> ParseEnrollmentFields(const std::vector<std::string>& fields);

// In-pod rules and the fwmark policy routes inside `netns_path`. Non-retryable on failure.
Result<std::monostate> CreateInpodRules(const std::string& netns_path, const PodEnrollment& pod);
// Removes the Istio chains/tables and the policy routes again; other rules stay.
Result<std::monostate> DeleteInpodRules(const std::string& netns_path, const PodEnrollment& pod);
// Host probe set membership: ipset for the iptables backends, nft set for nft; comment = uid.
Result<std::monostate> AddToHostProbeSet(const std::string& pod_uid, const PodEnrollment& pod);
Result<std::monostate> RemoveFromHostProbeSet(const PodEnrollment& pod);

// `iptables-save` text -> `iptables-restore --noflush` text deleting the jumps into ISTIO_*
// chains from other chains, then flushing and deleting the ISTIO_* chains. Empty: nothing to do.
std::string IptablesIstioDeleteScript(std::string_view save_output);

}  // namespace ad::sim
