// What the desired-state checks read from the Kubernetes API: the few fields of this node's pods
// and of the namespaces that Istio's enrollment predicate, the judging rules and the pod <-> netns
// pairing need. Plain data, filled by the API source (or by tests); nothing here talks to the API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ad {

// Label, annotation and taint names Istio uses for ambient enrollment
// (shared/facts/kubernetes-and-enrollment.md §1-2).
namespace kube {
inline constexpr std::string_view kDataplaneModeLabel = "istio.io/dataplane-mode";
inline constexpr std::string_view kDataplaneModeAmbient = "ambient";
inline constexpr std::string_view kDataplaneModeNone = "none";
inline constexpr std::string_view kSidecarStatusAnnotation = "sidecar.istio.io/status";
inline constexpr std::string_view kRedirectionAnnotation = "ambient.istio.io/redirection";
inline constexpr std::string_view kRedirectionEnabled = "enabled";
inline constexpr std::string_view kRedirectionPending = "pending";
// Read as a user opt-out by Istio 1.21 and older only; never written by Istio.
inline constexpr std::string_view kRedirectionDisabled = "disabled";
inline constexpr std::string_view kPhaseRunning = "Running";
inline constexpr std::string_view kPhaseSucceeded = "Succeeded";
inline constexpr std::string_view kPhaseFailed = "Failed";
}  // namespace kube

// One pod as the API server last described it.
struct KubePodFacts {
  std::string uid;
  std::string name;
  std::string namespace_name;
  std::string node_name;  // spec.nodeName
  std::string phase;      // status.phase: Pending, Running, Succeeded, Failed, Unknown
  bool host_network = false;
  // status.podIPs (or status.podIP when podIPs is absent), as the API server spells them.
  std::vector<std::string> pod_ips;
  int64_t created_at_unix_ms = 0;   // metadata.creationTimestamp
  int64_t started_at_unix_ms = 0;   // status.startTime (0: not started or not reported)
  int64_t deleting_at_unix_ms = 0;  // metadata.deletionTimestamp (0: not being deleted)
  // Label istio.io/dataplane-mode: nullopt when absent ("" is a present, empty label).
  std::optional<std::string> dataplane_mode;
  bool has_sidecar_status = false;  // annotation sidecar.istio.io/status present (any value)
  // Annotation ambient.istio.io/redirection: nullopt when absent.
  std::optional<std::string> redirection;
};

struct KubeNamespaceFacts {
  std::string name;
  std::optional<std::string> dataplane_mode;  // label istio.io/dataplane-mode
};

// The API source's current picture. Analysis judges nothing from a view that is not usable.
struct KubeView {
  // Pods and namespaces have been listed and the source is healthy now. False before the first
  // list, and while degraded (no credentials, 401/403, unreachable, garbage): `degraded_reason`
  // then says why.
  bool usable = false;
  std::string degraded_reason;
  std::vector<KubePodFacts> pods;  // this node's pods (spec.nodeName); others are ignored
  std::vector<KubeNamespaceFacts> namespaces;
};

}  // namespace ad
