#include "api/kube_proto.h"

#include <algorithm>

#include "api/report_proto.h"

namespace ad::api {
namespace {

constexpr std::string_view kIstioCniAppLabel = "istio-cni-node";  // k8s-app of istio-cni's pods

void FillCollection(std::string_view name, const KubeResourceStatus& status,
                    pb::KubeCollection* out) {
  out->set_name(std::string(name));
  out->set_synced(status.synced);
  out->set_watching(status.watching);
  out->set_resource_version(status.resource_version);
  out->set_reason(std::string(KubeApiReasonName(status.reason)));
  out->set_message(status.message);
  out->set_lists(static_cast<uint32_t>(status.lists));
  out->set_relists(static_cast<uint32_t>(status.relists));
  out->set_reconnects(static_cast<uint32_t>(status.reconnects));
  out->set_events(static_cast<uint32_t>(status.events));
  out->set_bookmarks(static_cast<uint32_t>(status.bookmarks));
}

// The node section: the istio-cni taint and istio-cni's own pod on this node (info, not findings).
void FillNodeFacts(const KubeSnapshot& kube, pb::Kubernetes& out) {
  if (kube.node) {
    out.set_cni_not_ready_taint(
        std::any_of(kube.node->taints.begin(), kube.node->taints.end(),
                    [](const KubeTaint& taint) { return taint.key == kTaintCniNotReady; }));
  }
  for (const KubePod& pod : kube.pods) {
    if (pod.k8s_app_label != kIstioCniAppLabel || pod.deletion_unix_s) continue;
    out.set_istio_cni_pod(pod.namespace_name + "/" + pod.name);
    out.set_istio_cni_ready(pod.ready);
    break;
  }
}

const char* VerdictCode(const PodStory& story) {
  if (story.finding) {
    switch (*story.finding) {
      case FindingCode::kPodEnrolledAgainstIntent:
        return "enrolled_against_intent";
      default:
        return "not_in_mesh";
    }
  }
  if (!story.judge.judgeable() || story.redirect == RedirectSeen::kUnknown) return "not_judged";
  if (story.redirect == RedirectSeen::kRedirected) return "in_mesh";
  return story.desired.state == DesiredState::kAmbient ? "not_in_mesh" : "out_of_mesh";
}

void FillStory(const PodStory& story, pb::PodReport& out) {
  out.set_uid(story.uid);
  out.set_verdict(story.verdict);
  out.set_verdict_code(VerdictCode(story));
  out.set_desired_state(std::string(DesiredStateName(story.desired.state)));
  out.set_desired_reason(std::string(DesiredReasonName(story.desired.reason)));
  out.set_desired_why(story.desired.why);
  out.set_judgeable(story.judge.judgeable());
  out.set_judge_block(std::string(JudgeBlockName(story.judge.block)));
  out.set_judge_why(story.judge.why);
  out.set_pairing(std::string(PairMethodName(story.pairing.method)));
  out.set_pairing_detail(story.pairing.detail);
  out.set_sandbox_id(story.pairing.sandbox_id);
  out.set_redirect(std::string(RedirectSeenName(story.redirect)));
  out.set_redirect_detail(story.redirect_detail);
  if (story.annotation) out.set_redirection_annotation(*story.annotation);
  for (const std::string& note : story.notes) out.add_notes(note);
}

// Findings about the pod (by name) or its netns (by inode), with history when known.
void AddPodFindings(const NodeAnalysis& analysis, const std::vector<FindingRecord>* records,
                    const std::string& pod, uint64_t inode, pb::PodReport& out) {
  const bool with_records = records != nullptr && records->size() == analysis.findings.size();
  for (size_t i = 0; i < analysis.findings.size(); ++i) {
    const Finding& f = analysis.findings[i];
    if (f.pod != pod && (inode == 0 || f.netns_inode != inode)) continue;
    *out.add_findings() = with_records ? BuildFinding((*records)[i]) : BuildFinding(f);
  }
}

}  // namespace

pb::Kubernetes BuildKubernetes(const NodeSnapshot& snapshot, const DesiredAnalysis* desired) {
  pb::Kubernetes out;
  if (!snapshot.kube) {
    out.set_reason(std::string(KubeApiReasonName(KubeApiReason::kDisabled)));
    out.set_not_judged("no Kubernetes API source");
    return out;
  }
  const KubeSnapshot& kube = *snapshot.kube;
  const KubeApiStatus& status = kube.status;
  out.set_enabled(status.enabled);
  out.set_healthy(status.healthy());
  out.set_reason(
      std::string(KubeApiReasonName(status.enabled ? status.reason : KubeApiReason::kDisabled)));
  out.set_message(status.message);
  out.set_server(status.server);
  out.set_node(status.node_name);
  if (desired == nullptr) {
    out.set_not_judged(status.healthy() ? "the scan could not run" : status.message);
  } else if (!desired->judged) {
    out.set_not_judged(desired->skip_reason);
  }
  if (status.enabled) {
    FillCollection("pods", status.pods, out.add_collections());
    FillCollection("namespaces", status.namespaces, out.add_collections());
    FillCollection("node", status.node, out.add_collections());
  }
  FillNodeFacts(kube, out);
  if (desired != nullptr && desired->judged) {
    const DesiredCounts counts = CountDesired(*desired);
    out.mutable_pods_desired()->set_ambient(static_cast<uint32_t>(counts.ambient));
    out.mutable_pods_desired()->set_not_ambient(static_cast<uint32_t>(counts.not_ambient));
    out.mutable_pods_desired()->set_unknown(static_cast<uint32_t>(counts.unknown));
  }
  return out;
}

bool SplitPodName(const std::string& text, std::string& namespace_name, std::string& name) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != std::string::npos) {
    return false;
  }
  namespace_name = text.substr(0, slash);
  name = text.substr(slash + 1);
  return true;
}

pb::PodReport BuildPodReport(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                             const DesiredAnalysis* desired,
                             const std::vector<FindingRecord>* records,
                             const std::string& namespace_name, const std::string& name) {
  pb::PodReport out;
  out.set_schema(kPodReportSchema);
  const std::string pod = namespace_name + "/" + name;
  out.set_pod(pod);
  out.set_taken_at_unix_ms(static_cast<double>(snapshot.taken_at_unix_ms));
  *out.mutable_kubernetes() = BuildKubernetes(snapshot, desired);
  const PodStory* story = desired != nullptr ? FindStory(*desired, pod) : nullptr;
  if (story == nullptr) {
    // Listed on this node but not judged (the source is degraded or still listing): say so.
    const bool listed =
        snapshot.kube &&
        std::any_of(snapshot.kube->pods.begin(), snapshot.kube->pods.end(), [&](const auto& p) {
          return p.namespace_name == namespace_name && p.name == name;
        });
    out.set_location(listed ? "this_node" : "unknown");
    if (listed) {
      out.set_node(snapshot.node_name);
      out.set_verdict_code("not_judged");
      out.set_verdict("not judged: " + out.kubernetes().not_judged());
    }
    return out;
  }
  out.set_location("this_node");
  out.set_node(snapshot.kube->status.node_name.empty() ? snapshot.node_name
                                                       : snapshot.kube->status.node_name);
  FillStory(*story, out);
  if (story->pairing.netns_index && *story->pairing.netns_index < snapshot.netns.size() &&
      *story->pairing.netns_index < analysis.netns.size()) {
    const size_t i = *story->pairing.netns_index;
    *out.mutable_netns() = BuildNetnsEntry(snapshot.netns[i], analysis.netns[i], analysis);
  }
  AddPodFindings(analysis, records, pod, story->pairing.netns_inode, out);
  return out;
}

void FillPodLocation(bool found, bool not_found, const std::string& node, const std::string& error,
                     const std::string& this_node, pb::PodReport& report) {
  if (found) {
    report.set_node(node);
    report.set_location(node == this_node ? "this_node" : "other_node");
    report.set_verdict_code(node == this_node ? "not_judged" : "elsewhere");
    report.set_verdict(node.empty() ? "not scheduled to a node yet"
                       : node == this_node
                           ? "on this node, but not yet in the Kubernetes API source's list"
                           : "runs on node " + node + ", not on this node (" + this_node +
                                 "): ask the ambient-doctor pod on that node");
  } else if (not_found) {
    report.set_location("not_found");
    report.set_verdict_code("elsewhere");
    report.set_verdict("no such pod in the Kubernetes API");
  } else {
    report.set_location("unknown");
    report.set_location_error(error);
    report.set_verdict_code("not_judged");
    report.set_verdict(
        "not on this node's list, and the Kubernetes API could not say where it runs" +
        (error.empty() ? std::string() : ": " + error));
  }
}

}  // namespace ad::api
