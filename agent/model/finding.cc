#include "model/finding.h"

namespace ad {

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "unknown";
}

std::string_view DataplaneModeName(DataplaneMode m) {
  switch (m) {
    case DataplaneMode::kNone:
      return "none";
    case DataplaneMode::kAmbient:
      return "ambient";
    case DataplaneMode::kSidecar:
      return "sidecar";
    case DataplaneMode::kConflict:
      return "conflict";
  }
  return "unknown";
}

std::string_view ZdsStateName(ZdsState s) {
  switch (s) {
    case ZdsState::kNotApplicable:
      return "n.a.";
    case ZdsState::kHandedOff:
      return "handed-off";
    case ZdsState::kPending:
      return "pending";
    case ZdsState::kStalled:
      return "stalled";
  }
  return "n.a.";
}

std::string AmbientVariant::Describe() const {
  std::string text;
  auto add = [&text](std::string_view part) {
    if (!text.empty()) text += ',';
    text += part;
  };
  if (dns_capture) add("dns");
  if (ingress_mode) add("ingress");
  if (!virtual_interfaces.empty()) {
    std::string vif = "vif=";
    for (size_t i = 0; i < virtual_interfaces.size(); ++i) {
      if (i > 0) vif += '+';
      vif += virtual_interfaces[i];
    }
    add(vif);
  }
  if (ipv6) add("ipv6");
  return text.empty() ? "base" : text;
}

const std::vector<FindingCodeInfo>& AllFindingCodes() {
  static const std::vector<FindingCodeInfo> codes = {
      {"MIXED_BACKEND", Severity::kCritical,
       "Istio in-pod ambient rules exist in more than one netfilter backend of one netns (the "
       "istio-cni backend flip, istio#61020)."},
      {"INCOMPLETE_RULESET", Severity::kCritical,
       "Istio in-pod chains exist but a required rule, jump or policy route is missing, or the "
       "rules are out of order."},
      {"HOST_NETNS_ENROLLED", Severity::kCritical,
       "In-pod ambient redirection chains were found in the host network namespace (a "
       "hostNetwork pod was enrolled)."},
      {"DUPLICATE_RULE", Severity::kWarning,
       "The same rule appears more than once in one Istio chain (or one base-chain jump into "
       "an Istio chain is repeated)."},
      {"BACKEND_DRIFT", Severity::kWarning,
       "A pod's ambient rules live in a different backend than the node's Istio host rules (or "
       "than most pods)."},
      {"DATAPLANE_CONFLICT", Severity::kWarning,
       "Sidecar and ambient redirection rules are both present in one netns."},
      {"PROBE_SNAT_MISSING", Severity::kWarning,
       "Kubelet probe SNAT for ambient pods is incomplete: host rule or probe set missing, or a "
       "pod IP is not in the probe set."},
      {"NETNS_UNREADABLE", Severity::kWarning,
       "A network namespace, or some of its sources, could not be read."},
      {"ZTUNNEL_LISTENERS_MISSING", Severity::kCritical,
       "A netns has ambient redirect rules but no ztunnel listener on 15001/15006/15008 (or only "
       "some of them): redirected traffic is black-holed."},
      {"REDIRECT_MISSING", Severity::kCritical,
       "ztunnel serves the netns (in-pod listeners, a held netns fd, or an HBONE workload for the "
       "pod IP on this node) but the netns has no Istio redirect rules: traffic bypasses the "
       "mesh."},
      {"ZDS_PENDING", Severity::kInfo,
       "istio-cni holds the pod netns but ztunnel does not yet (or its workloadState is Pending), "
       "for less than the stall threshold."},
      {"ZDS_STALL", Severity::kCritical,
       "The ZDS hand-off has been pending for at least the stall threshold (default 30 s): a "
       "netns held by istio-cni only or Pending in ztunnel, unread data on an accepted ZDS "
       "connection, or ztunnel not ready on \"workload proxy manager\" (the istio-cni deadlock "
       "fixed in 1.29.6/1.30.3)."},
      {"ZDS_DISCONNECTED", Severity::kCritical,
       "istio-cni listens on the ZDS socket but no ztunnel is connected, or no ZDS listener "
       "exists while ztunnel runs."},
      {"ZTUNNEL_STALE_WORKLOAD", Severity::kWarning,
       "ztunnel holds a netns or a workloadState entry for a pod that no longer exists."},
      {"MULTIPLE_ZTUNNELS", Severity::kInfo,
       "Two or more ztunnel processes serve the same netns (upgrade overlap)."},
  };
  return codes;
}

const FindingCodeInfo* LookupFindingCode(std::string_view code) {
  for (const FindingCodeInfo& info : AllFindingCodes()) {
    if (info.code == code) return &info;
  }
  return nullptr;
}

}  // namespace ad
