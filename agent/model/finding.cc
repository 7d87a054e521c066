#include "model/finding.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <tuple>

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

namespace {

using enum FindingCode;

// One row per code, in enum order; a code with an alert names it and its runbook page.
constexpr std::array<FindingCodeInfo, kFindingCodeCount> kFindingCodes = {{
    {kMixedBackend, "MIXED_BACKEND", Severity::kCritical,
     "Istio in-pod ambient rules exist in more than one netfilter backend of one netns (the "
     "istio-cni backend flip, istio#61020).",
     "istio-cni switched iptables backend between restarts (istio#61020, fixed in 1.29.8, "
     "1.30.5, 1.31.1); upgrade, pin FORCE_IPTABLES_BINARY, and remove the stale copy (restart "
     "the pod or reboot the node).",
     "AmbientRedirectMixedBackend", "docs/runbooks/AmbientRedirectMixedBackend.md"},
    {kIncompleteRuleset, "INCOMPLETE_RULESET", Severity::kCritical,
     "Istio in-pod chains exist but a required rule, jump or policy route is missing, or the "
     "rules are out of order.",
     "Something removed or reordered Istio's in-pod rules or routes (another CNI, a manual "
     "change, a partial cleanup); restart the pod, or the istio-cni agent with reconcile on, "
     "to re-apply them.",
     "AmbientRedirectIncomplete", "docs/runbooks/AmbientRedirectIncomplete.md"},
    {kHostNetnsEnrolled, "HOST_NETNS_ENROLLED", Severity::kCritical,
     "In-pod ambient redirection chains were found in the host network namespace (a "
     "hostNetwork pod was enrolled).",
     "A hostNetwork pod was enrolled in ambient, so the node's own traffic is redirected; label "
     "it istio.io/dataplane-mode=none and remove the ISTIO_PRERT/ISTIO_OUTPUT chains or "
     "istio-ambient-* tables from the host netns.",
     "AmbientHostNetnsEnrolled", "docs/runbooks/AmbientHostNetnsEnrolled.md"},
    {kDuplicateRule, "DUPLICATE_RULE", Severity::kWarning,
     "The same rule appears more than once in one Istio chain (or one base-chain jump into "
     "an Istio chain is repeated).",
     "Istio's rules were applied twice (re-run outside the agent or a racing reconcile); delete "
     "the extra copy, or restart the pod so istio-cni re-creates its rules once.",
     "AmbientRedirectDrift", "docs/runbooks/AmbientRedirectDrift.md"},
    {kBackendDrift, "BACKEND_DRIFT", Severity::kWarning,
     "A pod's ambient rules live in a different backend than the node's Istio host rules (or "
     "than most pods).",
     "The pod was enrolled by an istio-cni agent that used another backend (backend flip or "
     "nft/iptables migration); restart the pod so it is re-enrolled with the node's backend."},
    {kDataplaneConflict, "DATAPLANE_CONFLICT", Severity::kWarning,
     "Sidecar and ambient redirection rules are both present in one netns.",
     "The pod is both sidecar-injected and enrolled in ambient; drop the injection or set "
     "istio.io/dataplane-mode=none so only one dataplane captures traffic.",
     "AmbientRedirectDrift", "docs/runbooks/AmbientRedirectDrift.md"},
    {kProbeSnatMissing, "PROBE_SNAT_MISSING", Severity::kWarning,
     "Kubelet probe SNAT for ambient pods is incomplete: host rule or probe set missing, or a "
     "pod IP is not in the probe set.",
     "Kubelet probes to ambient pods are not SNAT-ed to the probe address and get redirected to "
     "ztunnel; restart the istio-cni node agent so it re-creates the host rules and probe "
     "sets."},
    {kNetnsUnreadable, "NETNS_UNREADABLE", Severity::kWarning,
     "A network namespace, or some of its sources, could not be read.",
     "Run the agent with CAP_SYS_ADMIN, CAP_NET_ADMIN and host PID/mounts; a netns that vanished "
     "during the scan (pod deleted) can be ignored."},
    {kZtunnelListenersMissing, "ZTUNNEL_LISTENERS_MISSING", Severity::kCritical,
     "A netns has ambient redirect rules but no ztunnel listener on 15001/15006/15008 (or only "
     "some of them): redirected traffic is black-holed.",
     "ztunnel has no proxy in this pod: the ZDS add never reached it (see ZDS_* findings; a "
     "third-party ZDS client can steal adds), or ztunnel restarted and lost it. Restart the "
     "pod to re-run the hand-off, or restart ztunnel on the node for a fresh ZDS snapshot.",
     "AmbientZtunnelListenersMissing", "docs/runbooks/AmbientZtunnelListenersMissing.md"},
    {kRedirectMissing, "REDIRECT_MISSING", Severity::kCritical,
     "ztunnel serves the netns (in-pod listeners, a held netns fd, or an HBONE workload for the "
     "pod IP on this node) but the netns has no Istio redirect rules: traffic bypasses the "
     "mesh.",
     "The pod's traffic bypasses ztunnel (no mTLS, no policy) although the mesh counts it as "
     "enrolled: something flushed Istio's in-pod rules (another CNI, a manual flush, an "
     "iptables backend change). Restart the pod, or istio-cni with reconcile on, to re-apply "
     "them.",
     "AmbientMeshBypass", "docs/runbooks/AmbientMeshBypass.md"},
    {kZdsPending, "ZDS_PENDING", Severity::kInfo,
     "istio-cni holds the pod netns but ztunnel does not yet (or its workloadState is Pending), "
     "for less than the stall threshold.",
     "Normal for a moment after pod start or a ztunnel restart; it becomes ZDS_STALL if it "
     "lasts past the stall threshold."},
    {kZdsStall, "ZDS_STALL", Severity::kCritical,
     "The ZDS hand-off has been pending for at least the stall threshold (default 30 s): a "
     "netns held by istio-cni only or Pending in ztunnel, unread data on an accepted ZDS "
     "connection, or ztunnel not ready on \"workload proxy manager\" (the istio-cni deadlock "
     "fixed in 1.29.6/1.30.3).",
     "istio-cni handed the netns over (or tried) but ztunnel has no proxy for it. If ztunnel is "
     "not ready on \"workload proxy manager\" and istio-cni stopped logging ZDS events, this is "
     "the ZDS deadlock (istio#60786): upgrade to 1.29.6/1.30.3+ and restart istio-cni on this "
     "node (restarting ztunnel does not help). If workloadState is Pending, read ztunnel's "
     "\"failure to start proxy\" log.",
     "AmbientZdsStall", "docs/runbooks/AmbientZdsStall.md"},
    {kZdsDisconnected, "ZDS_DISCONNECTED", Severity::kCritical,
     "istio-cni listens on the ZDS socket but no ztunnel is connected, or no ZDS listener "
     "exists while ztunnel runs.",
     "New pods cannot be handed to ztunnel. Check that the istio-cni node agent runs and that "
     "both DaemonSets mount the same /var/run/ztunnel hostPath; ztunnel reconnects with backoff "
     "(up to 15 s). A foreign client must be stopped, then ztunnel restarted.",
     "AmbientZdsDisconnected", "docs/runbooks/AmbientZdsDisconnected.md"},
    {kZtunnelStaleWorkload, "ZTUNNEL_STALE_WORKLOAD", Severity::kWarning,
     "ztunnel holds a netns or a workloadState entry for a pod that no longer exists.",
     "ztunnel missed the DelWorkload (disconnected while the pod was deleted) and keeps the "
     "proxy and the netns alive; restarting ztunnel reconciles at the next ZDS snapshot."},
    {kMultipleZtunnels, "MULTIPLE_ZTUNNELS", Severity::kInfo,
     "Two or more ztunnel processes serve the same netns (upgrade overlap).",
     "Expected briefly during a ztunnel upgrade (SO_REUSEPORT listeners); if it persists, the "
     "old ztunnel did not drain: check its termination grace period."},
    {kHboneConnectFailures, "HBONE_CONNECT_FAILURES", Severity::kWarning,
     "HBONE connections (:15008) from a netns were refused, reset or timed out above the "
     "threshold in the tracing window, split by same-node and remote destinations.",
     "Timeouts (SYN without SYN-ACK) to remote nodes point at a NetworkPolicy, security group "
     "or firewall dropping TCP 15008; failures to same-node pods only point at the node "
     "datapath (istio#59754); refusals mean the destination pod has no ztunnel listener on "
     "15008; resets after pod churn point at stale pooled connections (ztunnel#1637).",
     "AmbientHboneConnectFailures", "docs/runbooks/AmbientHboneConnectFailures.md"},
    {kMeshBypass, "MESH_BYPASS", Severity::kCritical,
     "In an ambient netns, an application TCP connection to a non-loopback destination was "
     "established without a ztunnel accept on 15001 for it and without ztunnel's mark 0x539: "
     "it escaped redirection.",
     "The pod's outbound traffic leaves without mTLS or policy: its REDIRECT rule is missing or "
     "bypassed (see the netns's rule findings); restart the pod, or istio-cni with reconcile on, "
     "to re-apply Istio's in-pod rules.",
     "AmbientMeshBypass", "docs/runbooks/AmbientMeshBypass.md"},
    {kTracingUnavailable, "TRACING_UNAVAILABLE", Severity::kInfo,
     "The eBPF flow tracer could not be loaded, so no flow-based check ran (the reason is in "
     "the evidence).",
     "Give the agent CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) and run it on a kernel with BTF "
     "(/sys/kernel/btf/vmlinux); lockdown=confidentiality forbids tracing altogether."},
    // In-pod prerequisites:
    {kDnsCaptureBroken, "DNS_CAPTURE_BROKEN", Severity::kCritical,
     "The netns captures DNS (nat port 53 -> REDIRECT 15053) but ztunnel's DNS proxy has no UDP "
     "and TCP listener on 15053 there while its other in-pod listeners are up, or the DNS "
     "capture rules are half present (udp without tcp, IPv4 without IPv6).",
     "A ztunnel that lost or never opened its in-pod DNS listener, or a partial rule cleanup. "
     "Restart the ztunnel pod on this node (it re-creates every in-pod listener); for missing "
     "rules restart the pod so istio-cni re-applies them, or turn DNS capture off for it "
     "(annotation ambient.istio.io/dns-capture: \"false\") if it must not be captured.",
     "AmbientDnsCaptureBroken", "docs/runbooks/AmbientDnsCaptureBroken.md"},
    {kInpodProxyBlocked, "INPOD_PROXY_BLOCKED", Severity::kCritical,
     "The pod's in-pod proxy is pending or absent and its netns lacks what ztunnel binds: lo is "
     "down, or lo has no ::1 while IPv6 is enabled there, so [::1]:15053 fails with "
     "EADDRNOTAVAIL (istio#52858, ztunnel#1272, ztunnel#1611). It is the cause of the netns's "
     "ZDS_PENDING / ZDS_STALL / ZTUNNEL_LISTENERS_MISSING.",
     "Bring lo up, or re-add ::1 to it (`ip -6 addr add ::1/128 dev lo` in the pod netns), or "
     "disable IPv6 in the pod netns consistently; find what removed it (an init container, a "
     "CNI plugin). ztunnel retries every 5 s and starts the proxy by itself.",
     "AmbientInpodProxyBlocked", "docs/runbooks/AmbientInpodProxyBlocked.md"},
    // Probe path:
    {kProbePathBroken, "PROBE_PATH_BROKEN", Severity::kWarning,
     "Kubelet probe connections to an enrolled pod, SNATed to the probe address, stay "
     "unreplied (SYN_SENT, UNREPLIED in the host netns's conntrack) for at least the "
     "probe-path threshold while the probe SNAT rule and probe set are complete.",
     "The probe reaches the pod's path but its reply never comes back: something between the "
     "host and the pod drops traffic from or to 169.254.7.127 (an eBPF CNI's host firewall, a "
     "cloud security group or NetworkPolicy, istio#52208, #58531). Allow the probe SNAT "
     "address in that datapath (for Cilium: do not drop packets from the host's "
     "169.254.7.127), then watch the pod become Ready."},
    // CNI chain:
    {kCniChainBroken, "CNI_CHAIN_BROKEN", Severity::kCritical,
     "While ambient pods run on the node, the CNI config the runtime uses (the first loadable "
     "file by name of its CNI config directory: --cni-conf-dir, else the one the runtime "
     "reports, else /etc/cni/net.d; not judged without one) does not chain istio-cni, or "
     "istio-cni's kubeconfig is missing; the daemon also names the pods whose sandbox started "
     "while the chain lacked "
     "istio-cni (warning: never captured, istio#55968).",
     "The primary CNI rewrote its conflist and dropped istio-cni (Cilium needs "
     "cni.exclusive=false); fix the primary CNI's config ownership, restart the istio-cni node "
     "agent so it re-inserts itself, then delete the pods started meanwhile.",
     "AmbientCniChainBroken", "docs/runbooks/AmbientCniChainBroken.md"},
    {kNftBackendUnusable, "NFT_BACKEND_UNUSABLE", Severity::kInfo,
     "The node's nftables userspace cannot print JSON (istio-cni 1.31 then falls back to "
     "iptables) or is older than the nft that wrote the rules, so an nft-mode install may run "
     "iptables, or nft cannot list Istio's tables properly.",
     "Install an nft built with JSON support (Debian/Ubuntu nftables has it) and at least the "
     "version istio-cni's image ships, or pin istio-cni to iptables mode explicitly so the "
     "backend does not change silently."},
    // ztunnel health:
    {kZtunnelResourcePressure, "ZTUNNEL_RESOURCE_PRESSURE", Severity::kWarning,
     "A ztunnel process is near its limits: open fds at 80 % or more of its soft \"Max open "
     "files\", RSS at 90 % or more of its cgroup's memory limit, or its CLOSE_WAIT sockets "
     "growing scan after scan (ztunnel#1629, #1631, #2044).",
     "At its fd limit ztunnel refuses every new connection of the node's pods (EMFILE); at its "
     "memory limit it is OOM-killed and every pod loses its proxy. Raise the ztunnel "
     "DaemonSet's memory limit or the container's nofile limit; CLOSE_WAIT growing means "
     "connections whose peer closed are never closed by ztunnel (a leak fixed in later "
     "releases): upgrade ztunnel, and restart it on this node to release them now.",
     "AmbientZtunnelResourcePressure", "docs/runbooks/AmbientZtunnelResourcePressure.md"},
    {kZtunnelCertUnhealthy, "ZTUNNEL_CERT_UNHEALTHY", Severity::kWarning,
     "ztunnel's certificate for the identity of pods on this node is Unavailable, or expires "
     "within the warning threshold (default 1 h): mTLS to and from those pods fails.",
     "ztunnel could not get or renew the workload certificate from its CA (istiod or another "
     "CA): check ztunnel's log for \"failed to fetch certificate\", that istiod is reachable "
     "from the node on 15012, and the CA's health. Restarting ztunnel re-requests every "
     "certificate.",
     "AmbientZtunnelCertUnhealthy", "docs/runbooks/AmbientZtunnelCertUnhealthy.md"},
    // Desired state (Kubernetes API) versus the node:
    {kPodNotEnrolled, "POD_NOT_ENROLLED", Severity::kCritical,
     "A running pod that Istio's enrollment predicate puts in ambient (pod or namespace label "
     "istio.io/dataplane-mode=ambient, not opted out, not hostNetwork, sidecar or excluded) has "
     "no Istio redirect in its netns and no enabled/pending ambient.istio.io/redirection "
     "annotation, past the enrollment grace period.",
     "istio-cni never enrolled the pod: the label came after the pod's CNI ADD and the node agent "
     "missed the update, istio-cni was not in the CNI chain when the sandbox started "
     "(CNI_CHAIN_BROKEN, istio#55968), or the node agent hung in the ZDS deadlock fixed in "
     "1.29.6/1.30.3 (istio#60786). Read the istio-cni node agent's log for the pod, fix that "
     "cause, then delete the pod so it is re-created and enrolled.",
     "AmbientPodNotEnrolled", "docs/runbooks/AmbientPodNotEnrolled.md"},
    {kEnrollmentAnnotationStale, "ENROLLMENT_ANNOTATION_STALE", Severity::kCritical,
     "The pod's ambient.istio.io/redirection annotation says enabled (or pending longer than "
     "the grace period) but its current netns has no Istio in-pod redirect at all: istiod "
     "advertises it as HBONE while nothing captures its traffic (istio#61182).",
     "Peers' HBONE connections to the pod's 15008 are refused and its own traffic bypasses "
     "ztunnel. Usually the sandbox was re-created under the same pod UID without istio-cni "
     "re-enrolling it (a CNI ADD that never reached istio-cni, or enrollment cut off after the "
     "annotation was written). Delete the pod so it is re-created and enrolled; restarting the "
     "istio-cni node agent re-runs its startup reconcile.",
     "AmbientPodNotEnrolled", "docs/runbooks/AmbientPodNotEnrolled.md"},
    {kPodEnrolledAgainstIntent, "POD_ENROLLED_AGAINST_INTENT", Severity::kWarning,
     "A pod's netns holds Istio in-pod redirect rules although Istio's predicate keeps it out of "
     "ambient: labelled istio.io/dataplane-mode=none, sidecar-injected, hostNetwork (with a "
     "selector that would enrol it otherwise), or in an excluded namespace.",
     "istio-cni enrolled a pod it must not capture: 1.27.0-1.30.3 enrol hostNetwork pods "
     "(istio#61168), node agents before 1.30 ignore EXCLUDE_NAMESPACES (istio#59471), or the "
     "opt-out came after enrollment and the removal did not run. Restart the pod so its CNI ADD "
     "applies the current intent, and upgrade istio-cni for the hostNetwork case."},
    {kZtunnelNetnsStale, "ZTUNNEL_NETNS_STALE", Severity::kCritical,
     "ztunnel keeps state for the pod's UID and holds a netns that no live pod has, but not the "
     "pod's current sandbox netns: it serves the pod's previous netns (istio#61182, the check "
     "of istio PR #61183 done from outside).",
     "The pod's sandbox was re-created under the same UID and the new netns was never handed to "
     "ztunnel, so the pod's traffic is not proxied (or black-holed where its rules exist). "
     "Delete the pod so it is re-created and handed over afresh; restarting ztunnel on the node "
     "releases the stale netns.",
     "AmbientZtunnelNetnsStale", "docs/runbooks/AmbientZtunnelNetnsStale.md"},
}};

// A row is missing, out of place or incomplete: the build fails here, not at run time.
constexpr bool RowComplete(const FindingCodeInfo& info, size_t index) {
  constexpr std::string_view kRunbookDir = "docs/runbooks/";
  const bool runbook_matches =
      info.alert.empty()
          ? info.runbook.empty()
          : info.runbook.size() == kRunbookDir.size() + info.alert.size() + 3 &&
                info.runbook.starts_with(kRunbookDir) &&
                info.runbook.substr(kRunbookDir.size(), info.alert.size()) == info.alert &&
                info.runbook.ends_with(".md");
  return static_cast<size_t>(info.code) == index && !info.name.empty() && !info.meaning.empty() &&
         !info.hint.empty() && runbook_matches;
}
constexpr bool TableComplete() {
  for (size_t i = 0; i < kFindingCodes.size(); ++i) {
    if (!RowComplete(kFindingCodes[i], i)) return false;
  }
  return true;
}
static_assert(TableComplete(), "kFindingCodes needs one complete row per FindingCode, in order");

}  // namespace

std::span<const FindingCodeInfo> AllFindingCodes() { return kFindingCodes; }

const FindingCodeInfo& FindingCodeDetails(FindingCode code) {
  const auto index = static_cast<size_t>(code);
  // Only FindingCode::kCount (not a code) or a cast integer get here; fail loudly, never as info.
  if (index >= kFindingCodes.size()) std::abort();
  return kFindingCodes[index];
}

std::string_view FindingCodeName(FindingCode code) { return FindingCodeDetails(code).name; }

std::optional<FindingCode> ParseFindingCode(std::string_view name) {
  for (const FindingCodeInfo& info : AllFindingCodes()) {
    if (info.name == name) return info.code;
  }
  return std::nullopt;
}

bool FindingBefore(const Finding& a, const Finding& b) {
  if (a.severity != b.severity) return a.severity > b.severity;
  return std::tie(a.netns_path, a.code, a.subject) < std::tie(b.netns_path, b.code, b.subject);
}

void SortFindings(std::vector<Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), FindingBefore);
}

}  // namespace ad
