// The redirect drift state of one pod netns: a fixed set of label values for the
// `ambient_doctor_pods{redirect_state}` metric (and any other output that wants one word per pod).
// Pure: derived from the recognizer's classification and the findings of that netns only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/desired_state.h"

namespace ad {

// In precedence order: when several apply, the first one wins, so every netns is counted once.
// The order puts a cause before its symptoms (a backend flip leaves incomplete or duplicated
// rules; a dataplane conflict makes the ambient rules look incomplete), then black-holed or
// bypassed traffic before a harmless duplicate.
enum class RedirectState : uint8_t {
  kHostEnrolled,      // the host netns holds in-pod ambient chains (HOST_NETNS_ENROLLED)
  kMixedBackend,      // ambient rules in more than one backend (MIXED_BACKEND)
  kConflict,          // sidecar and ambient rules together (DATAPLANE_CONFLICT / mode conflict)
  kIncomplete,        // Istio chains with a rule, jump or route missing (INCOMPLETE_RULESET)
  kListenersMissing,  // redirect rules but no ztunnel listener (ZTUNNEL_LISTENERS_MISSING)
  kRedirectMissing,   // ztunnel serves the netns but it has no redirect rules (REDIRECT_MISSING)
  kDuplicate,         // a rule or jump repeated, traffic still redirected (DUPLICATE_RULE)
  kHealthy,           // complete ambient redirection, none of the above
  // No ambient redirection. With a judged Kubernetes API source, the pod should be in the mesh
  // (POD_NOT_ENROLLED, ENROLLMENT_ANNOTATION_STALE) or its intent is unknown (no pod paired);
  // without one, nothing says whether it should.
  kNotEnrolled,
  // No ambient redirection, and the Kubernetes API says the pod is not meant to be in the mesh
  // (not labelled, opted out, sidecar, hostNetwork, excluded namespace).
  kOutOfMesh,
};
inline constexpr int kRedirectStateCount = static_cast<int>(RedirectState::kOutOfMesh) + 1;

// "host_enrolled", "mixed_backend", "conflict", "incomplete", "listeners_missing",
// "redirect_missing", "duplicate", "healthy", "not_enrolled", "out_of_mesh" (stable metric
// label values).
std::string_view RedirectStateName(RedirectState state);
// Every state, in precedence order.
const std::array<RedirectState, kRedirectStateCount>& AllRedirectStates();

// The state of one netns given its classification and the findings of the whole node (only those
// with the netns's inode are used). nullopt when the netns is not a pod's to count: the host netns
// unless it is enrolled, and a netns with NETNS_UNREADABLE and no rule finding (a partial read
// cannot show it healthy; the finding says what was not read).
// `out_of_mesh`: netns (inodes) of judged pods Istio's predicate keeps out of the mesh
// (OutOfMeshNetns); nullptr without a judged API source.
std::optional<RedirectState> ClassifyRedirectState(const NetnsClassification& netns,
                                                   const std::vector<Finding>& findings,
                                                   const std::set<uint64_t>* out_of_mesh = nullptr);

// The netns paired with a judged pod whose desired state is not ambient; empty when the desired
// state was not judged.
std::set<uint64_t> OutOfMeshNetns(const DesiredAnalysis& desired);

}  // namespace ad
