// Desired versus actual enrollment: which pods of the node Istio's predicate puts in the mesh, the
// netns each pod runs in, and whether that netns holds Istio's in-pod redirect. Pure functions of
// the node snapshot, the recognizer's classifications and the Kubernetes API source's copy. They
// produce POD_NOT_ENROLLED, ENROLLMENT_ANNOTATION_STALE, POD_ENROLLED_AGAINST_INTENT and
// ZTUNNEL_NETNS_STALE, and per pod the story `explain` prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/history.h"
#include "model/finding.h"
#include "model/kube.h"
#include "model/snapshot.h"

namespace ad {

// Values of the names in model/kube.h that the predicate and the checks compare with
// (shared/facts/kubernetes-and-enrollment.md §1-2).
namespace enrollment {
inline constexpr std::string_view kDataplaneModeAmbient = "ambient";
inline constexpr std::string_view kDataplaneModeNone = "none";
inline constexpr std::string_view kRedirectionEnabled = "enabled";
inline constexpr std::string_view kRedirectionPending = "pending";
// Read as a user opt-out by Istio 1.21 and older only; never written by Istio.
inline constexpr std::string_view kRedirectionDisabled = "disabled";
inline constexpr std::string_view kPhaseRunning = "Running";
inline constexpr std::string_view kPhaseSucceeded = "Succeeded";
inline constexpr std::string_view kPhaseFailed = "Failed";
}  // namespace enrollment

struct DesiredOptions {
  // istio-cni's EXCLUDE_NAMESPACES (chart default [kube-system]); --exclude-namespaces.
  std::vector<std::string> exclude_namespaces = {"kube-system"};
  // A pod is judged only once it (and its CRI sandbox) has existed this long, so a pod
  // being set up is not a finding; also how long a `pending` annotation without rules, or an
  // annotation outliving a removal, may last (--enrollment-grace).
  int64_t enrollment_grace_ms = 30'000;
};

// ---- Istio's enrollment predicate (istio-cni CompiledEnablementSelectors.Matches) ----

enum class DesiredState : uint8_t { kUnknown, kAmbient, kNotAmbient };
std::string_view DesiredStateName(DesiredState state);  // "unknown", "ambient", "not_ambient"

// The rule that decided, in evaluation order (first hit wins).
enum class DesiredReason : uint8_t {
  kExcludedNamespace,  // namespace in EXCLUDE_NAMESPACES: istio-cni returns before any check
  kHostNetwork,        // spec.hostNetwork (rule 1; absent in istio-cni 1.27.0-1.30.3)
  kSidecar,            // annotation sidecar.istio.io/status present (rule 2)
  kPodLabelAmbient,    // pod label istio.io/dataplane-mode=ambient (rule 3)
  kPodOptedOut,        // pod label istio.io/dataplane-mode=none (rule 4 refuses it)
  kNamespaceAmbient,   // namespace label istio.io/dataplane-mode=ambient (rule 4)
  kNoSelector,         // no selector matched (rule 5)
  kNamespaceUnknown,   // the pod's labels do not decide and its namespace is not known
};
// "excluded_namespace", "host_network", "sidecar", "pod_label_ambient", "pod_opted_out",
// "namespace_ambient", "no_selector", "namespace_unknown".
std::string_view DesiredReasonName(DesiredReason reason);

struct DesiredVerdict {
  DesiredState state = DesiredState::kUnknown;
  DesiredReason reason = DesiredReason::kNamespaceUnknown;
  std::string why;  // one sentence naming the label/annotation/rule that decided
};

// `ns` is the pod's namespace (nullptr when the API source does not have it).
DesiredVerdict EvaluateDesired(const KubePod& pod, const KubeNamespace* ns,
                               const DesiredOptions& options);

// ---- Whether a pod may be judged at all ----

enum class JudgeBlock : uint8_t {
  kNone,         // judgeable
  kOtherNode,    // spec.nodeName is another node
  kTerminal,     // Succeeded or Failed
  kTerminating,  // deletionTimestamp set
  kNotRunning,   // Pending, Unknown or no phase yet
  kNoIp,         // no status.podIPs / podIP yet
  kAgeUnknown,   // no creation time, or no snapshot time
  kYoung,        // younger than the grace period (pod or its sandbox)
};
std::string_view JudgeBlockName(JudgeBlock block);

struct Judgeability {
  JudgeBlock block = JudgeBlock::kNone;
  std::string why;  // why not, or "Running for 5m3s with IPs 10.0.0.5"
  bool judgeable() const { return block == JudgeBlock::kNone; }
};

// The age counts from the later of the pod's creation and `sandbox_created_unix_ms`, the paired
// CRI sandbox's creation (0 when unknown): a sandbox re-made under an old pod is being set up
// again. (istio-cni enrolls at the sandbox's CNI ADD, before any image is pulled.)
Judgeability JudgePod(const KubePod& pod, std::string_view node_name, int64_t now_unix_ms,
                      int64_t sandbox_created_unix_ms, const DesiredOptions& options);

// ---- Pod <-> netns pairing ----

enum class PairMethod : uint8_t {
  kNone,        // not paired (`detail` says why)
  kCriSandbox,  // the CRI sandbox of the pod's UID names the netns (inode)
  kPodIp,       // one of status.podIPs is on an interface inside the netns (istio-cni's scan)
  kHostNetwork  // hostNetwork pod: the host netns
};
std::string_view PairMethodName(PairMethod method);  // "none", "cri", "pod_ip", "host_network"

struct NetnsPairing {
  PairMethod method = PairMethod::kNone;
  uint64_t netns_inode = 0;  // 0 when unpaired
  std::string netns_path;    // "" when the netns was not scanned
  // Index into snapshot.netns (and the classifications); nullopt when unpaired or not scanned.
  std::optional<size_t> netns_index;
  std::string sandbox_id;               // kCriSandbox
  int64_t sandbox_created_unix_ms = 0;  // kCriSandbox, 0 when unknown
  std::string detail;                   // how it was paired, or why not
};

// By the CRI sandbox when CRI answered, else by the pod's IPs found inside exactly one netns.
NetnsPairing PairPodNetns(const KubePod& pod, const NodeSnapshot& snapshot);

// ---- Desired versus actual ----

// What the paired netns shows.
enum class RedirectSeen : uint8_t {
  kUnknown,     // not paired, not scanned, unreadable, or a netfilter backend was not read
  kRedirected,  // Istio in-pod ambient rules in at least one backend (complete or not)
  kAbsent,      // every backend read, no Istio in-pod ambient rules
};
std::string_view RedirectSeenName(RedirectSeen seen);  // "unknown", "redirected", "absent"

// One pod's whole desired-state story (what `explain pod` prints of it).
struct PodStory {
  std::string pod;  // "namespace/name"
  std::string uid;
  DesiredVerdict desired;
  Judgeability judge;
  NetnsPairing pairing;
  RedirectSeen redirect = RedirectSeen::kUnknown;
  std::string redirect_detail;            // "ambient rules in nft (mode ambient)", or why unknown
  std::optional<std::string> annotation;  // ambient.istio.io/redirection
  std::optional<FindingCode> finding;     // the desired-state finding raised for the pod
  std::vector<std::string> notes;         // facts worth showing that raised nothing
  std::string verdict;  // "in the mesh", "should be but is not: ...", "not judged: ..."
};

struct DesiredAnalysis {
  bool judged = false;            // the API source was healthy, so stories were judged
  std::string skip_reason;        // when not judged: why the API source's data is not used
  std::vector<PodStory> pods;     // the API source's pods, in its order
  std::vector<Finding> findings;  // in SortFindings order
};

// The entry point. `netns` are the classifications of snapshot.netns, in its order (what
// Analyze returned); `kube` is the API source's copy, judged only while kube.status.healthy().
// `history` ages the conditions that need a grace of their own (a `pending` annotation without
// rules, an annotation that outlives a removal); keep one History for this function only (not the
// one Analyze ages). nullptr: a one-shot report, where those conditions are noted but raise
// nothing.
DesiredAnalysis AnalyzeDesired(const NodeSnapshot& snapshot,
                               const std::vector<NetnsClassification>& netns,
                               const KubeSnapshot& kube, const DesiredOptions& options,
                               History* history = nullptr);

// Findings only, classifying the snapshot's netns itself (one-shot callers and tests).
std::vector<Finding> DesiredStateFindings(const NodeSnapshot& snapshot, const KubeSnapshot& kube,
                                          const DesiredOptions& options);

// The story of pod "namespace/name" in `desired`, or nullptr (`explain pod`).
const PodStory* FindStory(const DesiredAnalysis& desired, std::string_view pod);

// Pods by desired state, counting only this node's pods that are not terminal (the
// `ambient_doctor_pods_desired{state}` gauge: ambient, not_ambient; unknown while a namespace is
// not yet known).
struct DesiredCounts {
  size_t ambient = 0;
  size_t not_ambient = 0;
  size_t unknown = 0;
};
DesiredCounts CountDesired(const DesiredAnalysis& desired);

// Appends the pod's desired state to the evidence of `findings` in netns paired with a pod
// (INCOMPLETE_RULESET, ZTUNNEL_LISTENERS_MISSING, ZDS_* keep their codes; the line says whether
// the pod should be in the mesh at all).
void AddDesiredEvidence(const DesiredAnalysis& desired, std::vector<Finding>& findings);

}  // namespace ad
