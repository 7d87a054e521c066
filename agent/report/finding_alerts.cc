#include "report/finding_alerts.h"

namespace ad {

std::string_view AlertForFinding(FindingCode code) {
  using enum FindingCode;
  switch (code) {
    case kZdsStall:
      return "AmbientZdsStall";
    case kMixedBackend:
      return "AmbientRedirectMixedBackend";
    case kZtunnelListenersMissing:
      return "AmbientZtunnelListenersMissing";
    // The redirect_state values of these pods (host_enrolled, conflict, incomplete, duplicate).
    case kIncompleteRuleset:
    case kHostNetnsEnrolled:
    case kDuplicateRule:
    case kDataplaneConflict:
      return "AmbientRedirectDrift";
    case kRedirectMissing:
    case kMeshBypass:
      return "AmbientMeshBypass";
    case kHboneConnectFailures:
      return "AmbientHboneConnectFailures";
    // issue 10, in-pod prerequisites:
    case kDnsCaptureBroken:
      return "AmbientDnsCaptureBroken";
    case kInpodProxyBlocked:
      return "AmbientInpodProxyBlocked";
    // issue 10, CNI chain group:
    case kCniChainBroken:
      return "AmbientCniChainBroken";
    // issue 10, ztunnel health:
    case kZtunnelResourcePressure:
      return "AmbientZtunnelResourcePressure";
    case kZtunnelCertUnhealthy:
      return "AmbientZtunnelCertUnhealthy";
    default:
      return "";
  }
}

std::string RunbookForFinding(FindingCode code) {
  const std::string_view alert = AlertForFinding(code);
  return alert.empty() ? std::string() : "docs/runbooks/" + std::string(alert) + ".md";
}

}  // namespace ad
