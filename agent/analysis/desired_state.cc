// Istio's enrollment predicate, the judging rules and the pod <-> netns pairing
// (shared/facts/kubernetes-and-enrollment.md §1-2). Pure: no clock, no API, no kernel.
#include "analysis/desired_state.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>

namespace ad {
namespace {

using namespace std::string_literals;

std::string Quoted(std::string_view key, std::string_view value) {
  return std::string(key) + "=" + std::string(value);
}

bool IsExcluded(std::string_view ns, const DesiredOptions& options) {
  return std::find(options.exclude_namespaces.begin(), options.exclude_namespaces.end(), ns) !=
         options.exclude_namespaces.end();
}

DesiredVerdict Verdict(DesiredState state, DesiredReason reason, std::string why) {
  return DesiredVerdict{state, reason, std::move(why)};
}

// Rules 3-5: the selectors, once no exclusion applied.
DesiredVerdict BySelectors(const KubePod& pod, const KubeNamespace* ns) {
  const auto& label = pod.dataplane_mode;
  if (label == enrollment::kDataplaneModeAmbient) {
    return Verdict(
        DesiredState::kAmbient, DesiredReason::kPodLabelAmbient,
        "pod label " + Quoted(kLabelDataplaneMode, *label) + " (namespace labels do not matter)");
  }
  if (label == enrollment::kDataplaneModeNone) {
    return Verdict(DesiredState::kNotAmbient, DesiredReason::kPodOptedOut,
                   "pod label " + Quoted(kLabelDataplaneMode, *label) + " opts it out");
  }
  if (ns == nullptr) {
    return Verdict(DesiredState::kUnknown, DesiredReason::kNamespaceUnknown,
                   "namespace " + pod.namespace_name +
                       " is not known yet and the pod's labels "
                       "do not decide");
  }
  if (ns->dataplane_mode == enrollment::kDataplaneModeAmbient) {
    return Verdict(DesiredState::kAmbient, DesiredReason::kNamespaceAmbient,
                   "namespace " + ns->name + " has label " +
                       Quoted(kLabelDataplaneMode, *ns->dataplane_mode) +
                       " and the pod does not opt out (label " +
                       (label ? Quoted(kLabelDataplaneMode, *label) : "absent"s) + ")");
  }
  return Verdict(DesiredState::kNotAmbient, DesiredReason::kNoSelector,
                 "neither the pod nor namespace " + ns->name + " has label " +
                     Quoted(kLabelDataplaneMode, enrollment::kDataplaneModeAmbient));
}

std::string JoinIps(const std::vector<std::string>& ips) {
  std::string text;
  for (const std::string& ip : ips) text += (text.empty() ? "" : ", ") + ip;
  return text;
}

std::string Duration(int64_t ms) {
  const int64_t s = ms / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  if (s < 86400) return std::to_string(s / 3600) + "h" + std::to_string(s % 3600 / 60) + "m";
  return std::to_string(s / 86400) + "d" + std::to_string(s % 86400 / 3600) + "h";
}

// "fd00::0005" and "fd00::5" are one address: compare the kernel's spelling (the snapshot's) with
// the API server's through one canonical form. Unparsable text is kept as it is.
std::string CanonicalIp(const std::string& text) {
  std::array<unsigned char, 16> bytes{};
  std::array<char, INET6_ADDRSTRLEN> out{};
  for (int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, text.c_str(), bytes.data()) == 1 &&
        inet_ntop(family, bytes.data(), out.data(), out.size()) != nullptr) {
      return out.data();
    }
  }
  return text;
}

NetnsPairing Unpaired(std::string why) {
  NetnsPairing pairing;
  pairing.detail = std::move(why);
  return pairing;
}

std::optional<size_t> ScannedIndex(const NodeSnapshot& snapshot, uint64_t inode) {
  for (size_t i = 0; i < snapshot.netns.size(); ++i) {
    if (snapshot.netns[i].netns.inode == inode) return i;
  }
  return std::nullopt;
}

void FillNetns(NetnsPairing& pairing, const NodeSnapshot& snapshot, uint64_t inode) {
  pairing.netns_inode = inode;
  pairing.netns_index = ScannedIndex(snapshot, inode);
  if (pairing.netns_index) {
    pairing.netns_path = snapshot.netns[*pairing.netns_index].netns.PrimaryPath();
  }
}

// The newest ready sandbox of the UID (CRI lists ready ones only; a re-made sandbox replaces the
// old one).
const PodIdentity* CriSandbox(const NodeSnapshot& snapshot, std::string_view uid) {
  const PodIdentity* best = nullptr;
  for (const PodIdentity& pod : snapshot.cri.pods) {
    if (pod.uid != uid) continue;
    if (best == nullptr || pod.created_at_unix_ms > best->created_at_unix_ms) best = &pod;
  }
  return best;
}

NetnsPairing PairByIp(const KubePod& pod, const NodeSnapshot& snapshot, const std::string& note);

NetnsPairing PairByCri(const KubePod& pod, const NodeSnapshot& snapshot) {
  const PodIdentity* sandbox = CriSandbox(snapshot, pod.uid);
  if (sandbox == nullptr) {
    return Unpaired("CRI (" + snapshot.cri.endpoint + ") has no ready sandbox for pod uid " +
                    pod.uid);
  }
  if (sandbox->netns_inode == 0) {
    // Some runtimes' verbose status names no netns: istio-cni's own scan pairs by IP then too.
    NetnsPairing pairing = PairByIp(
        pod, snapshot, " (CRI sandbox " + sandbox->sandbox_id + " names no resolvable netns)");
    pairing.sandbox_id = sandbox->sandbox_id;
    pairing.sandbox_created_unix_ms = sandbox->created_at_unix_ms;
    return pairing;
  }
  NetnsPairing pairing;
  pairing.method = PairMethod::kCriSandbox;
  pairing.sandbox_id = sandbox->sandbox_id;
  pairing.sandbox_created_unix_ms = sandbox->created_at_unix_ms;
  FillNetns(pairing, snapshot, sandbox->netns_inode);
  const std::string& path = sandbox->netns_path.empty() ? pairing.netns_path : sandbox->netns_path;
  pairing.detail = "CRI sandbox " + sandbox->sandbox_id + " of uid " + pod.uid + ": netns " +
                   (path.empty() ? "" : path + " ") + "(inode " +
                   std::to_string(sandbox->netns_inode) + ")" +
                   (pairing.netns_index ? "" : ", not among the scanned netns");
  return pairing;
}

// istio-cni's own netns scan (istio#61211): a netns is the pod's when an interface in it holds one
// of the pod's IPs. Two netns holding them (a leaked netns with a reused IP) pair nothing.
NetnsPairing PairByIp(const KubePod& pod, const NodeSnapshot& snapshot, const std::string& note) {
  std::set<std::string> wanted;  // canonical spellings
  for (const std::string& ip : pod.pod_ips) wanted.insert(CanonicalIp(ip));
  std::map<size_t, std::string> hits;  // netns index -> "10.0.0.5 on eth0"
  for (size_t i = 0; i < snapshot.netns.size(); ++i) {
    const NetnsSnapshot& netns = snapshot.netns[i];
    if (netns.netns.is_host) continue;
    for (const InterfaceAddress& address : netns.routing.addresses) {
      if (address.ifname == "lo" || !wanted.contains(CanonicalIp(address.address))) continue;
      if (!hits.contains(i)) hits[i] = address.address + " on " + address.ifname;
    }
  }
  if (hits.empty()) {
    return Unpaired("no scanned netns has an interface with pod IP(s) " + JoinIps(pod.pod_ips) +
                    note);
  }
  if (hits.size() > 1) {
    return Unpaired(std::to_string(hits.size()) + " netns carry the pod's IP(s) " +
                    JoinIps(pod.pod_ips) + ": ambiguous" + note);
  }
  NetnsPairing pairing;
  pairing.method = PairMethod::kPodIp;
  FillNetns(pairing, snapshot, snapshot.netns[hits.begin()->first].netns.inode);
  pairing.detail = "pod IP " + hits.begin()->second + " inside netns " + pairing.netns_path +
                   " (inode " + std::to_string(pairing.netns_inode) + ")" + note;
  return pairing;
}

}  // namespace

std::string_view DesiredStateName(DesiredState state) {
  switch (state) {
    case DesiredState::kAmbient:
      return "ambient";
    case DesiredState::kNotAmbient:
      return "not_ambient";
    case DesiredState::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view DesiredReasonName(DesiredReason reason) {
  switch (reason) {
    case DesiredReason::kExcludedNamespace:
      return "excluded_namespace";
    case DesiredReason::kHostNetwork:
      return "host_network";
    case DesiredReason::kSidecar:
      return "sidecar";
    case DesiredReason::kPodLabelAmbient:
      return "pod_label_ambient";
    case DesiredReason::kPodOptedOut:
      return "pod_opted_out";
    case DesiredReason::kNamespaceAmbient:
      return "namespace_ambient";
    case DesiredReason::kNoSelector:
      return "no_selector";
    case DesiredReason::kNamespaceUnknown:
      break;
  }
  return "namespace_unknown";
}

DesiredVerdict EvaluateDesired(const KubePod& pod, const KubeNamespace* ns,
                               const DesiredOptions& options) {
  // The CNI plugin returns before any ambient check, and the node agent (>= 1.30) never enables
  // a pod of an excluded namespace, whatever its labels.
  if (IsExcluded(pod.namespace_name, options)) {
    return Verdict(DesiredState::kNotAmbient, DesiredReason::kExcludedNamespace,
                   "namespace " + pod.namespace_name +
                       " is in istio-cni's excluded namespaces (EXCLUDE_NAMESPACES)");
  }
  if (pod.host_network) {
    return Verdict(DesiredState::kNotAmbient, DesiredReason::kHostNetwork,
                   "spec.hostNetwork is true (never captured; istio-cni 1.27.0-1.30.3 lacked "
                   "this check, istio#61168)");
  }
  if (pod.has_sidecar_status) {
    return Verdict(
        DesiredState::kNotAmbient, DesiredReason::kSidecar,
        "annotation " + std::string(kAnnotationSidecarStatus) + " is present (sidecar-injected)");
  }
  return BySelectors(pod, ns);
}

std::string_view JudgeBlockName(JudgeBlock block) {
  switch (block) {
    case JudgeBlock::kNone:
      return "judgeable";
    case JudgeBlock::kOtherNode:
      return "other_node";
    case JudgeBlock::kTerminal:
      return "terminal";
    case JudgeBlock::kTerminating:
      return "terminating";
    case JudgeBlock::kNotRunning:
      return "not_running";
    case JudgeBlock::kNoIp:
      return "no_ip";
    case JudgeBlock::kAgeUnknown:
      return "age_unknown";
    case JudgeBlock::kYoung:
      return "young";
  }
  return "unknown";
}

Judgeability JudgePod(const KubePod& pod, std::string_view node_name, int64_t now_unix_ms,
                      int64_t sandbox_created_unix_ms, const DesiredOptions& options) {
  auto blocked = [](JudgeBlock block, std::string why) {
    return Judgeability{block, std::move(why)};
  };
  if (!node_name.empty() && pod.node_name != node_name) {
    return blocked(JudgeBlock::kOtherNode,
                   "the pod runs on node " + (pod.node_name.empty() ? "(none)"s : pod.node_name));
  }
  if (pod.phase == enrollment::kPhaseSucceeded || pod.phase == enrollment::kPhaseFailed) {
    return blocked(JudgeBlock::kTerminal,
                   "the pod is " + pod.phase + " (terminal: never enrolled)");
  }
  if (pod.deletion_unix_s) {
    return blocked(JudgeBlock::kTerminating, "the pod is being deleted");
  }
  if (pod.phase != enrollment::kPhaseRunning) {
    return blocked(JudgeBlock::kNotRunning,
                   "the pod is " + (pod.phase.empty() ? "without a phase"s : pod.phase));
  }
  if (pod.pod_ips.empty()) return blocked(JudgeBlock::kNoIp, "the pod has no IP yet");
  const int64_t started = pod.creation_unix_s * 1000;
  if (started <= 0 || now_unix_ms == 0) {
    return blocked(JudgeBlock::kAgeUnknown, "the pod's creation time is unknown");
  }
  const int64_t since = std::max(started, sandbox_created_unix_ms);
  const int64_t age = now_unix_ms - since;
  if (age < options.enrollment_grace_ms) {
    return blocked(JudgeBlock::kYoung, std::string(since == started ? "the pod was created "
                                                                    : "its sandbox was made ") +
                                           Duration(std::max<int64_t>(age, 0)) + " ago (grace " +
                                           Duration(options.enrollment_grace_ms) + ")");
  }
  return {JudgeBlock::kNone, "Running for " + Duration(age) + " with IPs " + JoinIps(pod.pod_ips)};
}

std::string_view PairMethodName(PairMethod method) {
  switch (method) {
    case PairMethod::kCriSandbox:
      return "cri";
    case PairMethod::kPodIp:
      return "pod_ip";
    case PairMethod::kHostNetwork:
      return "host_network";
    case PairMethod::kNone:
      break;
  }
  return "none";
}

NetnsPairing PairPodNetns(const KubePod& pod, const NodeSnapshot& snapshot) {
  if (pod.host_network) {
    const NetnsSnapshot* host = snapshot.Host();
    if (host == nullptr) return Unpaired("hostNetwork pod, and the host netns was not scanned");
    NetnsPairing pairing;
    pairing.method = PairMethod::kHostNetwork;
    FillNetns(pairing, snapshot, host->netns.inode);
    pairing.detail =
        "hostNetwork pod: the host netns (inode " + std::to_string(host->netns.inode) + ")";
    return pairing;
  }
  if (snapshot.cri.available) return PairByCri(pod, snapshot);
  return PairByIp(pod, snapshot, " (CRI did not answer)");
}

std::string_view RedirectSeenName(RedirectSeen seen) {
  switch (seen) {
    case RedirectSeen::kRedirected:
      return "redirected";
    case RedirectSeen::kAbsent:
      return "absent";
    case RedirectSeen::kUnknown:
      break;
  }
  return "unknown";
}

}  // namespace ad
