// What the Kubernetes API says about this node, as plain data: the node's pods (only the fields
// Istio's ambient enrollment predicate and the pod <-> netns pairing read), the namespaces (their
// dataplane-mode label), the node itself (its taints), and the state of the API source that
// produced them. Filled by sources/kube (list + watch), read by analysis; no I/O here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/source_error.h"

namespace ad {

// Names the predicate reads (istio-cni's enablement selectors, kubernetes-and-enrollment facts §1).
inline constexpr std::string_view kLabelDataplaneMode = "istio.io/dataplane-mode";
inline constexpr std::string_view kAnnotationRedirection = "ambient.istio.io/redirection";
inline constexpr std::string_view kAnnotationSidecarStatus = "sidecar.istio.io/status";
inline constexpr std::string_view kTaintCniNotReady = "cni.istio.io/not-ready";

struct KubePod {
  std::string uid;
  std::string name;
  std::string namespace_name;
  std::string node_name;         // spec.nodeName
  std::string resource_version;  // metadata.resourceVersion
  // Label istio.io/dataplane-mode ("ambient", "none", ...); absent when the pod has no such label.
  std::optional<std::string> dataplane_mode;
  // Annotation ambient.istio.io/redirection ("enabled", "pending", "disabled"); absent when unset.
  std::optional<std::string> redirection;
  // Annotation sidecar.istio.io/status present (any value): a sidecar-injected pod.
  bool has_sidecar_status = false;
  std::string app_label;      // label `app` (ztunnel's pods: app=ztunnel)
  std::string k8s_app_label;  // label `k8s-app` (istio-cni's pods: k8s-app=istio-cni-node)
  bool host_network = false;  // spec.hostNetwork
  std::string phase;          // status.phase: Pending, Running, Succeeded, Failed, Unknown
  // status.podIPs[].ip in order; status.podIP alone when podIPs is absent. Empty: no IP yet.
  std::vector<std::string> pod_ips;
  bool ready = false;  // condition Ready is "True"
  // metadata.creationTimestamp / deletionTimestamp as seconds since the epoch (RFC 3339 in the
  // API); 0 / absent when missing or unreadable.
  int64_t creation_unix_s = 0;
  std::optional<int64_t> deletion_unix_s;

  bool operator==(const KubePod&) const = default;
};

struct KubeNamespace {
  std::string name;
  std::string resource_version;
  std::optional<std::string> dataplane_mode;  // label istio.io/dataplane-mode

  bool operator==(const KubeNamespace&) const = default;
};

struct KubeTaint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute

  bool operator==(const KubeTaint&) const = default;
};

struct KubeNode {
  std::string name;
  std::string resource_version;
  std::vector<KubeTaint> taints;

  bool operator==(const KubeNode&) const = default;
};

// Why the API source has no trustworthy data. Stable names (KubeApiReasonName) for reports,
// logs and metric labels.
enum class KubeApiReason : uint8_t {
  kNone,           // healthy (or not started)
  kDisabled,       // turned off by configuration
  kNoCredentials,  // no in-cluster environment / service-account token, no kubeconfig
  kBadConfig,      // kubeconfig or CA unreadable, node name missing
  kUnauthorized,   // HTTP 401
  kForbidden,      // HTTP 403 (RBAC)
  kThrottled,      // HTTP 429, waiting for Retry-After
  kUnreachable,    // connect, TLS or DNS failure, connection dropped
  kHung,           // no answer within the deadline
  kGarbage,        // a body that is not the JSON the API returns
  kServerError,    // another HTTP status (5xx, 404, ...)
};

inline std::string_view KubeApiReasonName(KubeApiReason reason) {
  switch (reason) {
    case KubeApiReason::kNone:
      return "none";
    case KubeApiReason::kDisabled:
      return "disabled";
    case KubeApiReason::kNoCredentials:
      return "no-credentials";
    case KubeApiReason::kBadConfig:
      return "bad-config";
    case KubeApiReason::kUnauthorized:
      return "unauthorized";
    case KubeApiReason::kForbidden:
      return "forbidden";
    case KubeApiReason::kThrottled:
      return "throttled";
    case KubeApiReason::kUnreachable:
      return "unreachable";
    case KubeApiReason::kHung:
      return "hung";
    case KubeApiReason::kGarbage:
      return "garbage";
    case KubeApiReason::kServerError:
      return "server-error";
  }
  return "unknown";
}

// One watched collection (pods of this node, namespaces, this node).
struct KubeResourceStatus {
  // An initial list has completed since the last relist began: the collection mirrors the API as
  // of resource_version (or as of the last event while the watch is up).
  bool synced = false;
  bool watching = false;  // a watch stream is open right now
  std::string resource_version;
  KubeApiReason reason = KubeApiReason::kNone;  // the last failure, kNone once it recovered
  std::string
      message;         // the last failure in words ("GET /api/v1/pods...: HTTP 403 Forbidden: ...")
  uint64_t lists = 0;  // LIST requests answered in full (every page of one list counts once)
  uint64_t relists = 0;     // lists made because the watch's version expired (410)
  uint64_t reconnects = 0;  // watches re-opened after a timeout, drop or error
  uint64_t events = 0;      // watch events applied (ADDED/MODIFIED/DELETED)
  uint64_t bookmarks = 0;

  bool operator==(const KubeResourceStatus&) const = default;
};

struct KubeApiStatus {
  bool enabled = false;
  std::string server;                           // https://host:port (never the token)
  std::string node_name;                        // whose pods are listed
  KubeApiReason reason = KubeApiReason::kNone;  // the worst current reason of the resources
  std::string message;
  KubeResourceStatus pods;
  KubeResourceStatus namespaces;
  KubeResourceStatus node;

  // Every collection is synced and none is failing: desired-state judgments may use the data.
  bool healthy() const {
    return enabled && reason == KubeApiReason::kNone && pods.synced && namespaces.synced &&
           node.synced;
  }
  bool operator==(const KubeApiStatus&) const = default;
};

// A consistent copy of what the source holds, sorted (pods by namespace/name, namespaces by name).
struct KubeSnapshot {
  KubeApiStatus status;
  std::vector<KubePod> pods;
  std::vector<KubeNamespace> namespaces;
  std::optional<KubeNode> node;
  // Bumped on every change to the pods, namespaces or node and on every change of health (a
  // reason set or cleared, a collection synced). Bookmarks and counters alone do not bump it, so
  // a quiet cluster does not make a consumer recompute: equal generations mean equal data.
  uint64_t generation = 0;
};

// The source's failure as a source error ("kube-api": reason and message), for the outputs that
// list degraded sources (GetStatus, metrics, the daemon's log); nullopt when it is healthy, off,
// or still making its first list without a failure.
inline std::optional<SourceError> KubeApiError(const KubeApiStatus& status) {
  if (!status.enabled || status.reason == KubeApiReason::kNone) return std::nullopt;
  return SourceError{SourceKind::kKubeApi,
                     std::string(KubeApiReasonName(status.reason)) + ": " + status.message};
}

}  // namespace ad
