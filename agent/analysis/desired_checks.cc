// Desired versus actual enrollment per pod: POD_NOT_ENROLLED, ENROLLMENT_ANNOTATION_STALE,
// POD_ENROLLED_AGAINST_INTENT and ZTUNNEL_NETNS_STALE, at most one per pod, and each pod's story.
// Missing data never raises anything: an unhealthy API source, a pod that is not judgeable, an
// unpaired or unread netns, or a ztunnel whose fds were not read only leave a note.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "analysis/checks.h"
#include "analysis/desired_state.h"

namespace ad {
namespace {

using namespace std::string_literals;

bool IsAnnotatedEnrolled(const std::optional<std::string>& annotation) {
  return annotation == enrollment::kRedirectionEnabled ||
         annotation == enrollment::kRedirectionPending;
}

std::string AnnotationText(const std::optional<std::string>& annotation) {
  return "annotation " + std::string(kAnnotationRedirection) + ": " +
         (annotation ? "\"" + *annotation + "\"" : "absent"s);
}

// What ztunnel holds and knows, from the fd inventory and the admin port: enough to tell, by pod
// UID, that ztunnel serves a netns that is no longer the pod's.
struct ZtunnelView {
  bool fds_known = false;  // at least one ztunnel process's netns fds were read
  std::map<uint64_t, std::vector<int>> holders;  // netns inode -> ztunnel pids holding it
  std::map<std::string, std::vector<std::pair<std::string, int>>> states;  // uid -> (state, pid)
  std::map<int, std::vector<uint64_t>> orphans;  // ztunnel pid -> held netns no live pod has
};

// A held netns is an orphan when it is not ztunnel's own or the host's, and no live pod has it:
// with CRI no ready sandbox and no process lives in it; without CRI discovery did not find it
// although /proc was scanned (the same test as ZTUNNEL_STALE_WORKLOAD's).
bool IsOrphan(uint64_t inode, const NodeSnapshot& snapshot, const std::set<uint64_t>& own) {
  const NetnsSnapshot* host = snapshot.Host();
  if (own.contains(inode) || (host != nullptr && host->netns.inode == inode)) return false;
  bool proc_scanned = false;
  for (const NetnsSnapshot& netns : snapshot.netns) {
    if (netns.netns.inode == inode && (!netns.netns.pids.empty() || !snapshot.cri.available)) {
      return false;
    }
    proc_scanned = proc_scanned || !netns.netns.pids.empty();
  }
  if (snapshot.cri.available) {
    return std::none_of(snapshot.cri.pods.begin(), snapshot.cri.pods.end(),
                        [inode](const PodIdentity& pod) { return pod.netns_inode == inode; });
  }
  return proc_scanned;
}

ZtunnelView BuildZtunnelView(const NodeSnapshot& snapshot) {
  ZtunnelView view;
  if (!snapshot.zds_collected) return view;
  std::set<uint64_t> own;
  for (const ProcessNetnsFds& process : snapshot.processes) {
    if (process.role != ProcessRole::kZtunnel) continue;
    view.fds_known = true;
    if (process.own_netns_inode != 0) own.insert(process.own_netns_inode);
    for (uint64_t inode : process.netns_fd_inodes) view.holders[inode].push_back(process.pid);
  }
  for (const ZtunnelAdminState& ztunnel : snapshot.ztunnels) {
    if (ztunnel.netns_inode != 0) own.insert(ztunnel.netns_inode);
    for (const ZtunnelWorkloadState& state : ztunnel.workload_state) {
      view.states[state.pod_uid].emplace_back(state.state, ztunnel.pid);
    }
  }
  for (const auto& [inode, pids] : view.holders) {
    if (!IsOrphan(inode, snapshot, own)) continue;
    for (int pid : pids) view.orphans[pid].push_back(inode);
  }
  return view;
}

struct Context {
  const NodeSnapshot& snapshot;
  const std::vector<NetnsClassification>& netns;
  const DesiredOptions& options;
  History* history;
  ZtunnelView ztunnel;
  std::map<std::string, const KubeNamespace*> namespaces;
  std::string node_name;  // the API source's node name (its pods'), else the snapshot's
};

void SeeRedirect(PodStory& story, const Context& context) {
  if (!story.pairing.netns_index) {
    story.redirect_detail = story.pairing.method == PairMethod::kNone
                                ? "no netns paired: " + story.pairing.detail
                                : "the paired netns was not scanned";
    return;
  }
  const size_t index = *story.pairing.netns_index;
  const NetnsSnapshot& netns = context.snapshot.netns[index];
  if (index >= context.netns.size()) {
    story.redirect_detail = "the netns was not classified";
    return;
  }
  const NetnsClassification& classification = context.netns[index];
  const std::string mode = " (mode " + std::string(DataplaneModeName(classification.mode)) + ")";
  if (!classification.ambient_backends.empty()) {
    story.redirect = RedirectSeen::kRedirected;
    story.redirect_detail = "Istio in-pod ambient rules in " +
                            analysis::BackendList(classification.ambient_backends) + mode;
  } else if (netns.unreadable) {
    story.redirect_detail = "the netns could not be read";
  } else if (!netns.reads.NetfilterComplete()) {
    story.redirect_detail = "not every netfilter backend of the netns was read";
  } else {
    story.redirect = RedirectSeen::kAbsent;
    story.redirect_detail = "no Istio in-pod ambient rules in any netfilter backend" + mode;
  }
}

// The evidence lines every desired-state finding of the pod starts with.
std::vector<std::string> StoryEvidence(const PodStory& story) {
  return {
      "desired " + std::string(DesiredStateName(story.desired.state)) + ": " + story.desired.why,
      "pod " + story.pod + " (uid " + story.uid + "): " + story.judge.why,
      "paired by " + std::string(PairMethodName(story.pairing.method)) + ": " +
          story.pairing.detail,
      "netns: " + story.redirect_detail, AnnotationText(story.annotation)};
}

Finding PodFinding(FindingCode code, const PodStory& story, const Context& context,
                   std::string summary, std::vector<std::string> extra, std::string hint = {}) {
  std::vector<std::string> evidence = StoryEvidence(story);
  evidence.insert(evidence.end(), extra.begin(), extra.end());
  Finding finding = analysis::MakeFinding(code, &context.snapshot.netns[*story.pairing.netns_index],
                                          "pod " + story.uid, std::move(summary),
                                          std::move(evidence), std::move(hint));
  finding.pod = story.pod;
  return finding;
}

// ZTUNNEL_NETNS_STALE (istio PR #61183's check from the outside): ztunnel keeps state for the
// pod's UID, holds no fd of the pod's current netns, and the same ztunnel holds a netns no live
// pod has: the pod's previous netns, its sandbox re-made under the same UID.
std::optional<Finding> CheckZtunnelNetns(const PodStory& story, const Context& context) {
  const ZtunnelView& view = context.ztunnel;
  auto states = view.states.find(story.uid);
  if (!view.fds_known || states == view.states.end()) return std::nullopt;
  if (view.holders.contains(story.pairing.netns_inode)) return std::nullopt;
  std::vector<std::string> extra;
  for (const auto& [state, pid] : states->second) {
    auto orphans = view.orphans.find(pid);
    if (orphans == view.orphans.end()) continue;
    extra.push_back("ztunnel pid " + std::to_string(pid) + " has workloadState[" + story.uid +
                    "] = " + state);
    for (uint64_t inode : orphans->second) {
      extra.push_back("ztunnel pid " + std::to_string(pid) + " holds netns inode " +
                      std::to_string(inode) + ", which no live pod sandbox or process has");
    }
  }
  if (extra.empty()) return std::nullopt;
  extra.push_back("no ztunnel process holds the pod's current netns (inode " +
                  std::to_string(story.pairing.netns_inode) + ")");
  return PodFinding(FindingCode::kZtunnelNetnsStale, story, context,
                    "ztunnel serves a previous netns of the pod, not its current one",
                    std::move(extra));
}

// ENROLLMENT_ANNOTATION_STALE: marked enabled/pending, no redirect at all. `enabled` on a pod that
// should be ambient is stale at once (the pod is past its grace already); `pending`, or an
// annotation on a pod that should not be ambient (istio-cni removes the rules before the
// annotation), must last the grace in `history` first.
std::optional<Finding> CheckAnnotation(PodStory& story, const Context& context) {
  if (!IsAnnotatedEnrolled(story.annotation) || story.redirect != RedirectSeen::kAbsent) {
    return std::nullopt;
  }
  const bool at_once = story.annotation == enrollment::kRedirectionEnabled &&
                       story.desired.state == DesiredState::kAmbient;
  std::vector<std::string> extra;
  if (!at_once) {
    if (context.history == nullptr) {
      story.notes.push_back("annotated \"" + *story.annotation +
                            "\" without redirect rules; how long is unknown in a one-shot report");
      return std::nullopt;
    }
    const int64_t now = context.history->now_unix_ms();
    const int64_t first = context.history->Observe("annotation-stale:" + story.uid);
    if (now - first < context.options.enrollment_grace_ms) {
      story.notes.push_back("annotated \"" + *story.annotation +
                            "\" without redirect rules since " + analysis::FormatUnixMs(first) +
                            ", within the grace period");
      return std::nullopt;
    }
    extra.push_back("annotated without redirect rules since " + analysis::FormatUnixMs(first));
  }
  return PodFinding(
      FindingCode::kEnrollmentAnnotationStale, story, context,
      "pod annotated \"" + *story.annotation + "\" (enrolled) but its netns has no Istio redirect",
      std::move(extra));
}

std::string AgainstIntentHint(DesiredReason reason) {
  switch (reason) {
    case DesiredReason::kHostNetwork:
      return "istio-cni 1.27.0-1.30.3 enrols hostNetwork pods (istio#61168), redirecting the "
             "node's own traffic (see HOST_NETNS_ENROLLED): upgrade istio-cni, label the pod "
             "istio.io/dataplane-mode=none meanwhile, and remove Istio's chains from the host "
             "netns.";
    case DesiredReason::kSidecar:
      return "A sidecar-injected pod was enrolled in ambient too (see DATAPLANE_CONFLICT): drop "
             "the injection or label the pod istio.io/dataplane-mode=none, then restart it.";
    case DesiredReason::kExcludedNamespace:
      return "The namespace is in istio-cni's EXCLUDE_NAMESPACES but its pod was enrolled (the "
             "node agent honours the list from 1.30 on, istio#59471, or the list differs from "
             "--exclude-namespaces): restart the pod so its CNI ADD skips it.";
    default:
      return "";
  }
}

// POD_ENROLLED_AGAINST_INTENT: redirect rules in a pod the predicate explicitly keeps out. A pod
// that merely matches no default selector raises nothing: clusters may configure other
// enablement selectors (istio#56048). A hostNetwork pod shares the host netns with every other
// one, so it is named only when the selectors would have enrolled it without rule 1 (the
// 1.27.0-1.30.3 regression).
std::optional<Finding> CheckAgainstIntent(const PodStory& story, const KubePod& pod,
                                          const Context& context) {
  if (story.desired.state != DesiredState::kNotAmbient ||
      story.redirect != RedirectSeen::kRedirected) {
    return std::nullopt;
  }
  const DesiredReason reason = story.desired.reason;
  if (reason == DesiredReason::kNoSelector) return std::nullopt;
  std::vector<std::string> extra;
  if (pod.host_network) {
    KubePod without_host = pod;
    without_host.host_network = false;
    auto ns = context.namespaces.find(pod.namespace_name);
    const DesiredVerdict selectors = EvaluateDesired(
        without_host, ns == context.namespaces.end() ? nullptr : ns->second, context.options);
    if (selectors.state != DesiredState::kAmbient) return std::nullopt;
    extra.push_back("without the hostNetwork rule it would be ambient: " + selectors.why);
  }
  return PodFinding(FindingCode::kPodEnrolledAgainstIntent, story, context,
                    "Istio redirect rules in a pod that must not be in the mesh (" +
                        std::string(DesiredReasonName(reason)) + ")",
                    std::move(extra), AgainstIntentHint(reason));
}

std::optional<Finding> CheckNotEnrolled(const PodStory& story, const Context& context) {
  if (story.desired.state != DesiredState::kAmbient || story.redirect != RedirectSeen::kAbsent ||
      IsAnnotatedEnrolled(story.annotation)) {
    return std::nullopt;
  }
  return PodFinding(FindingCode::kPodNotEnrolled, story, context,
                    "pod should be in the mesh but its netns has no Istio redirect", {});
}

// At most one finding per pod, the most specific cause first.
std::optional<Finding> Judge(PodStory& story, const KubePod& pod, const Context& context) {
  if (auto finding = CheckZtunnelNetns(story, context)) return finding;
  if (auto finding = CheckAnnotation(story, context)) return finding;
  if (auto finding = CheckAgainstIntent(story, pod, context)) return finding;
  return CheckNotEnrolled(story, context);
}

std::string Verdict(const PodStory& story) {
  if (!story.judge.judgeable()) return "not judged: " + story.judge.why;
  if (story.finding) {
    switch (*story.finding) {
      case FindingCode::kPodNotEnrolled:
        return "should be in the mesh but is not: no Istio redirect in its netns";
      case FindingCode::kEnrollmentAnnotationStale:
        return "marked enrolled but is not: no Istio redirect in its netns";
      case FindingCode::kPodEnrolledAgainstIntent:
        return "should not be in the mesh but is: " + story.desired.why;
      default:
        return "ztunnel serves a previous netns of the pod, not its current one";
    }
  }
  if (story.redirect == RedirectSeen::kUnknown) return "not judged: " + story.redirect_detail;
  const bool in_mesh = story.redirect == RedirectSeen::kRedirected;
  if (story.desired.state == DesiredState::kUnknown) {
    return in_mesh ? "in the mesh (desired state unknown)"
                   : "not in the mesh (desired state unknown)";
  }
  const bool wanted = story.desired.state == DesiredState::kAmbient;
  if (in_mesh) return wanted ? "in the mesh" : "in the mesh although not selected (no finding)";
  return wanted ? "should be in the mesh; enrollment pending" : "not in the mesh, as intended";
}

std::string SkipReason(const KubeApiStatus& status) {
  if (!status.enabled) return "the Kubernetes API source is off";
  if (status.reason != KubeApiReason::kNone) {
    return "the Kubernetes API source is degraded (" +
           std::string(KubeApiReasonName(status.reason)) + ")" +
           (status.message.empty() ? "" : ": " + status.message);
  }
  return "the Kubernetes API source has not listed pods, namespaces and the node yet";
}

PodStory TellStory(const KubePod& pod, Context& context, std::vector<Finding>& findings) {
  PodStory story;
  story.pod = pod.namespace_name + "/" + pod.name;
  story.uid = pod.uid;
  story.annotation = pod.redirection;
  auto ns = context.namespaces.find(pod.namespace_name);
  story.desired =
      EvaluateDesired(pod, ns == context.namespaces.end() ? nullptr : ns->second, context.options);
  story.pairing = PairPodNetns(pod, context.snapshot);
  story.judge = JudgePod(pod, context.node_name, context.snapshot.taken_at_unix_ms,
                         story.pairing.sandbox_created_unix_ms, context.options);
  SeeRedirect(story, context);
  if (pod.redirection == enrollment::kRedirectionDisabled) {
    story.notes.push_back("annotation \"disabled\" is an opt-out only Istio 1.21 and older read");
  }
  if (story.judge.judgeable() && story.pairing.netns_index) {
    if (auto finding = Judge(story, pod, context)) {
      story.finding = finding->code;
      findings.push_back(std::move(*finding));
    }
  }
  story.verdict = Verdict(story);
  return story;
}

}  // namespace

DesiredAnalysis AnalyzeDesired(const NodeSnapshot& snapshot,
                               const std::vector<NetnsClassification>& netns,
                               const KubeSnapshot& kube, const DesiredOptions& options,
                               History* history) {
  DesiredAnalysis result;
  if (!kube.status.healthy()) {
    result.skip_reason = SkipReason(kube.status);
    return result;
  }
  result.judged = true;
  Context context{snapshot,
                  netns,
                  options,
                  history,
                  BuildZtunnelView(snapshot),
                  {},
                  kube.status.node_name.empty() ? snapshot.node_name : kube.status.node_name};
  for (const KubeNamespace& ns : kube.namespaces) context.namespaces[ns.name] = &ns;
  if (history != nullptr) history->BeginScan(snapshot.taken_at_unix_ms);
  for (const KubePod& pod : kube.pods) {
    result.pods.push_back(TellStory(pod, context, result.findings));
  }
  if (history != nullptr) history->EndScan();
  SortFindings(result.findings);
  return result;
}

std::vector<Finding> DesiredStateFindings(const NodeSnapshot& snapshot, const KubeSnapshot& kube,
                                          const DesiredOptions& options) {
  std::vector<NetnsClassification> netns;
  netns.reserve(snapshot.netns.size());
  for (const NetnsSnapshot& one : snapshot.netns) netns.push_back(Classify(one));
  return AnalyzeDesired(snapshot, netns, kube, options).findings;
}

const PodStory* FindStory(const DesiredAnalysis& desired, std::string_view pod) {
  auto it = std::find_if(desired.pods.begin(), desired.pods.end(),
                         [pod](const PodStory& story) { return story.pod == pod; });
  return it == desired.pods.end() ? nullptr : &*it;
}

DesiredCounts CountDesired(const DesiredAnalysis& desired) {
  DesiredCounts counts;
  for (const PodStory& story : desired.pods) {
    if (story.judge.block == JudgeBlock::kOtherNode || story.judge.block == JudgeBlock::kTerminal) {
      continue;
    }
    switch (story.desired.state) {
      case DesiredState::kAmbient:
        ++counts.ambient;
        break;
      case DesiredState::kNotAmbient:
        ++counts.not_ambient;
        break;
      case DesiredState::kUnknown:
        ++counts.unknown;
        break;
    }
  }
  return counts;
}

void AddDesiredEvidence(const DesiredAnalysis& desired, std::vector<Finding>& findings) {
  static constexpr FindingCode kOwn[] = {
      FindingCode::kPodNotEnrolled, FindingCode::kEnrollmentAnnotationStale,
      FindingCode::kPodEnrolledAgainstIntent, FindingCode::kZtunnelNetnsStale};
  std::map<uint64_t, const PodStory*> by_inode;
  for (const PodStory& story : desired.pods) {
    // The host netns is shared by every hostNetwork pod: no one pod's state describes it.
    if (story.pairing.netns_inode == 0 || story.pairing.method == PairMethod::kHostNetwork) {
      continue;
    }
    by_inode.emplace(story.pairing.netns_inode, &story);
  }
  for (Finding& finding : findings) {
    if (std::find(std::begin(kOwn), std::end(kOwn), finding.code) != std::end(kOwn)) continue;
    auto it = by_inode.find(finding.netns_inode);
    if (it == by_inode.end()) continue;
    const PodStory& story = *it->second;
    finding.evidence.push_back("desired state of pod " + story.pod + " (Kubernetes API): " +
                               std::string(DesiredStateName(story.desired.state)) + ": " +
                               story.desired.why);
  }
}

}  // namespace ad
