// Findings: what analysis concludes, with evidence and a hint. The code table lives in
// finding.cc: name, severity, meaning, hint, and the alert and runbook that page for the code. It
// renders `ambient-doctor findings`, and the PrometheusRule and runbooks are tested against it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/rule.h"

namespace ad {

enum class Severity : uint8_t { kInfo, kWarning, kCritical };
std::string_view SeverityName(Severity s);  // "info", "warning", "critical"

// Every finding the agent can emit. Names (FindingCodeName) are stable API: they appear in the
// JSON report, gRPC, metric labels and alert rules.
enum class FindingCode : uint8_t {
  kMixedBackend,
  kIncompleteRuleset,
  kHostNetnsEnrolled,
  kDuplicateRule,
  kBackendDrift,
  kDataplaneConflict,
  kProbeSnatMissing,
  kNetnsUnreadable,
  kZtunnelListenersMissing,
  kRedirectMissing,
  kZdsPending,
  kZdsStall,
  kZdsDisconnected,
  kZtunnelStaleWorkload,
  kMultipleZtunnels,
  kHboneConnectFailures,
  kMeshBypass,
  kTracingUnavailable,
  // In-pod prerequisites (DNS capture, what ztunnel binds):
  kDnsCaptureBroken,
  kInpodProxyBlocked,
  // Probe path:
  kProbePathBroken,
  // CNI chain:
  kCniChainBroken,
  kNftBackendUnusable,
  // ztunnel health:
  kZtunnelResourcePressure,
  kZtunnelCertUnhealthy,
  // Desired state (Kubernetes API) versus the node:
  kPodNotEnrolled,
  kEnrollmentAnnotationStale,
  kPodEnrolledAgainstIntent,
  kZtunnelNetnsStale,
  // Not a code: the number of codes. Keep it last. finding.cc's table has one row per code, in
  // this order, and a static_assert fails the build when a row is missing or out of place.
  kCount,
};
inline constexpr size_t kFindingCodeCount = static_cast<size_t>(FindingCode::kCount);

struct FindingCodeInfo {
  FindingCode code;
  std::string_view name;  // SCREAMING_SNAKE
  Severity severity;
  std::string_view meaning;
  std::string_view hint;  // the usual cause and a safe fix; a check may give a sharper one
  // The alert of deploy/monitoring/prometheusrule.yaml that pages for the code
  // ("AmbientZdsStall") and its runbook ("docs/runbooks/AmbientZdsStall.md"); both "" when no
  // alert does (finding_alerts_test holds them to the rule file and the runbooks).
  std::string_view alert;
  std::string_view runbook;
};
// Every code, once, in enum order (which is also the documentation order and the order findings
// of equal severity and netns sort in).
std::span<const FindingCodeInfo> AllFindingCodes();
const FindingCodeInfo& FindingCodeDetails(FindingCode code);
std::string_view FindingCodeName(FindingCode code);
std::optional<FindingCode> ParseFindingCode(std::string_view name);

struct Finding {
  FindingCode code = FindingCode::kNetnsUnreadable;
  Severity severity = Severity::kInfo;
  std::string netns_path;
  uint64_t netns_inode = 0;
  // What the finding is about within its netns, set by the check ("iptables-nft ipv4 nat
  // ISTIO_OUTPUT: -A ...", "15001/15006"). Identity = code + netns inode + subject; never the
  // summary, the pod name or a /proc path, which change without the condition changing.
  std::string subject;
  std::string pod;  // "namespace/name" when known
  std::string summary;
  std::vector<std::string> evidence;
  std::string hint;
  int64_t since_unix_ms = 0;  // when the condition was first seen (aged findings); 0 = unknown

  std::string_view code_name() const { return FindingCodeName(code); }
};

// The one order of findings in an analysis, a report and the engine's steps: severity
// (critical first), then netns path, code (enum order), subject. Stable.
bool FindingBefore(const Finding& a, const Finding& b);
void SortFindings(std::vector<Finding>& findings);

// Per-netns conclusion of the Istio recognizer.
enum class DataplaneMode : uint8_t { kNone, kAmbient, kSidecar, kConflict };
std::string_view DataplaneModeName(DataplaneMode m);  // "none", "ambient", "sidecar", "conflict"

struct AmbientVariant {
  bool dns_capture = false;
  bool ingress_mode = false;  // ambient.istio.io/bypass-inbound-capture
  std::vector<std::string> virtual_interfaces;
  bool ipv6 = false;

  auto operator<=>(const AmbientVariant&) const = default;
  std::string Describe() const;  // "dns,ipv6", "ingress,vif=eth1+eth2", "base"
};

// Where a netns stands in the istio-cni -> ztunnel hand-off (ZDS). kNotApplicable when no ZDS
// data was collected or neither side knows the netns.
enum class ZdsState : uint8_t { kNotApplicable, kHandedOff, kPending, kStalled };
std::string_view ZdsStateName(ZdsState s);  // "n.a.", "handed-off", "pending", "stalled"

struct NetnsClassification {
  uint64_t netns_inode = 0;
  std::string netns_path;
  bool is_host = false;
  DataplaneMode mode = DataplaneMode::kNone;
  std::set<Backend> ambient_backends;  // backends that hold in-pod ambient rules
  std::set<Backend> sidecar_backends;
  std::set<Family> families;  // families with ambient rules (inet nft counts as v4+v6)
  std::optional<AmbientVariant> variant;
  bool host_rules_present = false;  // ISTIO_POSTRT / istio-ambient-nat postrouting
  std::set<Backend> host_backends;

  // Joined from CRI and the ZDS sources (empty / n.a. when they were not collected).
  std::string pod;  // "namespace/name"
  std::string pod_uid;
  ZdsState zds_state = ZdsState::kNotApplicable;
  std::vector<uint16_t> ztunnel_listeners;  // of 15001/15006/15008, sorted
  std::vector<int> ztunnel_pids;            // ztunnel processes serving the netns (fd or listener)
};

}  // namespace ad
