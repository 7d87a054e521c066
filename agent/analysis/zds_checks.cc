// ZDS hand-off checks. Joins, per netns, the kernel's view (netns fds held by istio-cni and
// ztunnel, ztunnel's in-pod listeners, the ZDS socket), ztunnel's admin view (workloadState,
// XDS workloads, readiness) and CRI pod identity, then judges the hand-off: black holes, mesh
// bypass, pending and stalled hand-offs, a missing ZDS peer, stale ztunnel state and overlaps.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/checks.h"
#include "model/istio_facts.h"

namespace ad::analysis {
namespace {

constexpr auto& kZtunnelPorts = istio::kZtunnelInpodTcpPorts;
constexpr uint8_t kTcp = 6;
constexpr std::string_view kWorkloadProxyManager = "workload proxy manager";

std::string FormatDuration(int64_t ms) {
  if (ms < 0) ms = 0;
  const int64_t seconds = ms / 1000;
  if (seconds < 60) return std::to_string(seconds) + " s";
  if (seconds < 3600) {
    return std::to_string(seconds / 60) + " min " + std::to_string(seconds % 60) + " s";
  }
  return std::to_string(seconds / 3600) + " h " + std::to_string(seconds % 3600 / 60) + " min";
}

// "since 2026-08-22T10:00:00Z (45 s)"
std::string Since(int64_t first_seen_ms, int64_t now_ms) {
  return "since " + FormatUnixMs(first_seen_ms) + " (" + FormatDuration(now_ms - first_seen_ms) +
         ")";
}

template <typename Range>
std::string JoinNumbers(const Range& values, std::string_view separator = ", ") {
  std::string text;
  for (const auto& value : values) {
    if (!text.empty()) text += separator;
    text += std::to_string(value);
  }
  return text;
}

std::string PidList(const std::vector<int>& pids) {
  return (pids.size() == 1 ? "pid " : "pids ") + JoinNumbers(pids);
}

std::string PodLabel(std::string_view namespace_name, std::string_view name) {
  if (name.empty()) return "";
  return std::string(namespace_name) + "/" + std::string(name);
}

// Listener reads come from sock_diag; without them a missing listener proves nothing.
bool ListenersKnown(const NetnsSnapshot& netns) {
  return !netns.unreadable && netns.reads.listeners == ReadStatus::kOk;
}

// Without every netfilter backend, "no redirect rules" proves nothing.
bool NetfilterKnown(const NetnsSnapshot& netns) {
  return !netns.unreadable && netns.reads.NetfilterComplete();
}

struct WorkloadStateRef {
  const ZtunnelWorkloadState* state = nullptr;
  int ztunnel_pid = 0;
};

struct WorkloadRef {
  const ZtunnelWorkload* workload = nullptr;
  int ztunnel_pid = 0;
};

// Indexes over the node-wide sources, built once per analysis.
struct NodeView {
  std::set<int> ztunnel_pids;
  std::set<int> cni_pids;
  std::map<int, const ProcessNetnsFds*> process_by_pid;
  std::map<uint64_t, std::vector<int>> cni_holders;      // netns inode -> istio-cni pids
  std::map<uint64_t, std::vector<int>> ztunnel_holders;  // netns inode -> ztunnel pids
  std::set<uint64_t> ztunnel_own_netns;
  std::map<uint64_t, const PodIdentity*> pod_by_inode;
  std::map<std::string, const PodIdentity*> pod_by_uid;
  std::map<std::string, std::vector<WorkloadStateRef>> states_by_uid;
  std::map<std::string, std::string> uid_by_pod_label;  // from workloadState info ("ns/name")
  std::map<std::string, WorkloadRef> hbone_by_ip;       // workloads on this node only
  std::set<uint64_t> scanned_inodes_with_pids;
};

NodeView BuildView(const NodeSnapshot& snapshot) {
  NodeView view;
  for (const ProcessNetnsFds& process : snapshot.processes) {
    view.process_by_pid[process.pid] = &process;
    if (process.role == ProcessRole::kZtunnel) {
      view.ztunnel_pids.insert(process.pid);
      if (process.own_netns_inode != 0) view.ztunnel_own_netns.insert(process.own_netns_inode);
      for (uint64_t inode : process.netns_fd_inodes) {
        view.ztunnel_holders[inode].push_back(process.pid);
      }
    } else if (process.role == ProcessRole::kIstioCni) {
      view.cni_pids.insert(process.pid);
      for (uint64_t inode : process.netns_fd_inodes) view.cni_holders[inode].push_back(process.pid);
    }
  }
  for (const ZtunnelAdminState& ztunnel : snapshot.ztunnels) {
    if (ztunnel.pid > 0) view.ztunnel_pids.insert(ztunnel.pid);
    if (ztunnel.netns_inode != 0) view.ztunnel_own_netns.insert(ztunnel.netns_inode);
    for (const ZtunnelWorkloadState& state : ztunnel.workload_state) {
      view.states_by_uid[state.pod_uid].push_back({&state, ztunnel.pid});
      if (!state.name.empty()) {
        view.uid_by_pod_label[PodLabel(state.namespace_name, state.name)] = state.pod_uid;
      }
    }
    for (const ZtunnelWorkload& workload : ztunnel.workloads) {
      if (!IsLocalHboneWorkload(workload, snapshot.node_name)) continue;
      for (const std::string& ip : workload.ips)
        view.hbone_by_ip.emplace(ip, WorkloadRef{&workload, ztunnel.pid});
    }
  }
  for (const PodIdentity& pod : snapshot.cri.pods) {
    if (!pod.uid.empty()) view.pod_by_uid[pod.uid] = &pod;
    if (pod.netns_inode != 0 && !pod.host_network) view.pod_by_inode[pod.netns_inode] = &pod;
  }
  for (const NetnsSnapshot& netns : snapshot.netns) {
    if (!netns.netns.pids.empty()) view.scanned_inodes_with_pids.insert(netns.netns.inode);
  }
  return view;
}

enum class ListenerOwner : uint8_t { kZtunnel, kOther, kUnknown };

ListenerOwner OwnerOf(const ListeningSocket& listener, const NodeView& view) {
  const bool owned_by_ztunnel =
      std::any_of(listener.owner_pids.begin(), listener.owner_pids.end(),
                  [&view](int pid) { return view.ztunnel_pids.contains(pid); });
  if (owned_by_ztunnel) return ListenerOwner::kZtunnel;
  // Owners unknown (no /proc visibility): ztunnel's in-pod sockets carry its packet mark.
  const bool owners_unknown = listener.owner_pids.empty() || view.ztunnel_pids.empty();
  if (!owners_unknown) return ListenerOwner::kOther;
  if (!listener.mark_known) return ListenerOwner::kUnknown;
  return listener.mark == istio::kInpodMark ? ListenerOwner::kZtunnel : ListenerOwner::kOther;
}

bool IsZtunnelPort(const ListeningSocket& listener) {
  return listener.protocol == kTcp && std::find(std::begin(kZtunnelPorts), std::end(kZtunnelPorts),
                                                listener.port) != std::end(kZtunnelPorts);
}

// Everything known about one netns's place in the hand-off.
struct NetnsFacts {
  const NetnsSnapshot* netns = nullptr;
  const NetnsClassification* classification = nullptr;
  const PodIdentity* pod = nullptr;
  std::string pod_label;
  std::vector<int> cni_holders;
  std::vector<int> ztunnel_holders;
  std::set<uint16_t> listener_ports;
  std::set<uint16_t> unattributed_ports;  // something listens; owner and mark unknown
  std::set<int> listener_owners;          // ztunnel pids owning in-pod listeners
  std::vector<WorkloadStateRef> states;
  std::string pod_uid;  // from CRI, else from the HBONE workload's name in workloadState
  std::vector<std::string> hbone_evidence;
  bool listeners_known = true;
  bool netfilter_known = true;
  bool is_ztunnel_netns = false;

  bool StateIs(std::string_view wanted) const {
    return std::any_of(states.begin(), states.end(), [wanted](const WorkloadStateRef& ref) {
      return ref.state->state == wanted;
    });
  }
  std::vector<int> ServingPids() const {
    std::set<int> pids(ztunnel_holders.begin(), ztunnel_holders.end());
    pids.insert(listener_owners.begin(), listener_owners.end());
    return {pids.begin(), pids.end()};
  }
};

NetnsFacts GatherFacts(const NodeSnapshot& snapshot, const NodeView& view,
                       const NetnsSnapshot& netns, const NetnsClassification& classification) {
  NetnsFacts facts;
  facts.netns = &netns;
  facts.classification = &classification;
  const uint64_t inode = netns.netns.inode;
  facts.is_ztunnel_netns = view.ztunnel_own_netns.contains(inode);
  facts.listeners_known = ListenersKnown(netns);
  facts.netfilter_known = NetfilterKnown(netns);
  if (auto it = view.cni_holders.find(inode); it != view.cni_holders.end()) {
    facts.cni_holders = it->second;
  }
  if (auto it = view.ztunnel_holders.find(inode); it != view.ztunnel_holders.end()) {
    facts.ztunnel_holders = it->second;
  }
  for (const ListeningSocket& listener : netns.listeners) {
    if (!IsZtunnelPort(listener)) continue;
    const ListenerOwner owner = OwnerOf(listener, view);
    if (owner == ListenerOwner::kUnknown) facts.unattributed_ports.insert(listener.port);
    if (owner != ListenerOwner::kZtunnel) continue;
    facts.listener_ports.insert(listener.port);
    for (int pid : listener.owner_pids) {
      if (view.ztunnel_pids.contains(pid)) facts.listener_owners.insert(pid);
    }
  }
  if (auto it = view.pod_by_inode.find(inode); it != view.pod_by_inode.end()) {
    facts.pod = it->second;
    facts.pod_label = PodLabel(facts.pod->namespace_name, facts.pod->name);
  }
  std::set<const ZtunnelWorkload*> matched;
  for (const InterfaceAddress& address : netns.routing.addresses) {
    if (!address.global_scope || address.ifname == "lo") continue;
    auto it = view.hbone_by_ip.find(address.address);
    if (it == view.hbone_by_ip.end() || !matched.insert(it->second.workload).second) continue;
    const ZtunnelWorkload& workload = *it->second.workload;
    facts.hbone_evidence.push_back(
        "ztunnel pid " + std::to_string(it->second.ztunnel_pid) + " has HBONE workload " +
        PodLabel(workload.namespace_name, workload.name) + " for pod IP " + address.address +
        " on node " + (workload.node.empty() ? snapshot.node_name : workload.node));
    if (facts.pod_label.empty()) facts.pod_label = PodLabel(workload.namespace_name, workload.name);
  }
  if (facts.pod != nullptr) {
    facts.pod_uid = facts.pod->uid;
  } else if (auto uid = view.uid_by_pod_label.find(facts.pod_label);
             !facts.pod_label.empty() && uid != view.uid_by_pod_label.end()) {
    // No CRI: the XDS workload at the pod IP names the pod, workloadState names its uid.
    facts.pod_uid = uid->second;
  }
  if (auto states = view.states_by_uid.find(facts.pod_uid);
      !facts.pod_uid.empty() && states != view.states_by_uid.end()) {
    facts.states = states->second;
  }
  return facts;
}

std::string ListenerPortsText(const std::set<uint16_t>& ports) {
  return ports.empty() ? "none" : JoinNumbers(ports, "/");
}

std::string WorkloadStateText(const NetnsFacts& facts) {
  if (facts.pod_uid.empty()) return "workloadState: pod uid unknown (no CRI match for this netns)";
  if (facts.states.empty()) return "workloadState: no entry for pod uid " + facts.pod_uid;
  std::string text;
  for (const WorkloadStateRef& ref : facts.states) {
    if (!text.empty()) text += "; ";
    text += "workloadState[" + facts.pod_uid + "] = " + ref.state->state + " in ztunnel pid " +
            std::to_string(ref.ztunnel_pid);
  }
  return text;
}

std::string HoldersText(const NetnsFacts& facts) {
  std::string text = facts.cni_holders.empty()
                         ? "no istio-cni process holds the netns"
                         : "istio-cni " + PidList(facts.cni_holders) + " holds the netns fd";
  text += facts.ztunnel_holders.empty()
              ? "; no ztunnel process holds it"
              : "; ztunnel " + PidList(facts.ztunnel_holders) + " holds it";
  return text;
}

Finding MakeNetnsFinding(FindingCode code, const NetnsFacts& facts, std::string subject,
                         std::string summary, std::vector<std::string> evidence,
                         std::string hint = {}) {
  Finding finding = MakeFinding(code, facts.netns, std::move(subject), std::move(summary),
                                std::move(evidence), std::move(hint));
  finding.pod = facts.pod_label;
  return finding;
}

// Node-wide signals that the hand-off is stuck, aged by History.
struct NodeSignal {
  std::string kind;  // short, stable: goes into the summary
  std::string evidence;
  int64_t first_seen = 0;
};

class ZdsChecker {
 public:
  ZdsChecker(const NodeSnapshot& snapshot, const std::vector<NetnsIstioState>& states,
             const AnalysisOptions& options, History& history,
             std::vector<NetnsClassification>& netns, std::vector<Finding>& findings)
      : snapshot_(snapshot),
        states_(states),
        options_(options),
        history_(history),
        netns_(netns),
        findings_(findings),
        view_(BuildView(snapshot)),
        now_(snapshot.taken_at_unix_ms) {}

  void Run() {
    CollectNodeSignals();
    for (size_t i = 0; i < snapshot_.netns.size() && i < states_.size(); ++i) {
      const NetnsSnapshot& netns = snapshot_.netns[i];
      if (netns.netns.is_host || netns.unreadable) continue;
      CheckNetns(GatherFacts(snapshot_, view_, netns, states_[i].classification), netns_[i]);
    }
    CheckUnmatchedPendingStates();
    CheckDisconnected();
    CheckStaleWorkloads();
    ReportNodeSignals();
  }

 private:
  bool Stalled(int64_t first_seen) const {
    return now_ - first_seen >= options_.zds_stall_threshold_ms;
  }

  std::string ThresholdText() const {
    return "stall threshold " + FormatDuration(options_.zds_stall_threshold_ms);
  }

  void CollectNodeSignals() {
    for (const ZtunnelAdminState& ztunnel : snapshot_.ztunnels) {
      const bool waits_for_zds =
          ztunnel.ready.has_value() && !*ztunnel.ready &&
          std::find(ztunnel.pending_tasks.begin(), ztunnel.pending_tasks.end(),
                    kWorkloadProxyManager) != ztunnel.pending_tasks.end();
      if (!waits_for_zds) continue;
      std::string pending;
      for (const std::string& task : ztunnel.pending_tasks) {
        pending += (pending.empty() ? "" : ", ") + task;
      }
      std::string text =
          "ztunnel pid " + std::to_string(ztunnel.pid) + " not ready, pending: " + pending;
      if (auto it = view_.process_by_pid.find(ztunnel.pid);
          it != view_.process_by_pid.end() && it->second->start_time_unix_ms > 0) {
        text += " (process started " + FormatUnixMs(it->second->start_time_unix_ms) + ")";
      }
      AddNodeSignal("ztunnel not ready on workload proxy manager",
                    "not-ready:" + std::to_string(ztunnel.pid), std::move(text));
    }
    const ZdsSocketState& zds = snapshot_.zds;
    for (const UnixSocket& accepted : zds.accepted) {
      if (accepted.receive_queue == 0) continue;
      std::string text = "accepted ZDS connection (socket inode " + std::to_string(accepted.inode) +
                         ", peer inode " + std::to_string(accepted.peer_inode) +
                         ") has unread data (receive queue " +
                         std::to_string(accepted.receive_queue) +
                         "): istio-cni is not reading (the hello of a reconnected ztunnel waits "
                         "there in the deadlock of istio#60786)";
      AddNodeSignal("ZDS connection data unread", "zds-unread:" + std::to_string(accepted.inode),
                    std::move(text));
    }
    if (zds.listener_found) {
      const size_t waiting =
          std::max<size_t>(zds.listener.receive_queue, zds.listener.pending_client_inodes.size());
      if (waiting > 0) {
        AddNodeSignal(
            "ZDS connections not accepted", "zds-backlog:" + std::to_string(zds.listener.inode),
            std::to_string(waiting) + " connection(s) wait in the ZDS listener's accept backlog");
      }
    }
  }

  void AddNodeSignal(std::string kind, const std::string& key, std::string evidence) {
    node_signals_.push_back({std::move(kind), std::move(evidence), history_.Observe(key)});
  }

  void CheckNetns(const NetnsFacts& facts, NetnsClassification& classification) {
    classification.ztunnel_listeners.assign(facts.listener_ports.begin(),
                                            facts.listener_ports.end());
    classification.ztunnel_pids = facts.ServingPids();
    if (classification.pod.empty()) classification.pod = facts.pod_label;
    classification.pod_uid = facts.pod_uid;
    if (!facts.pod_uid.empty()) matched_uids_.insert(facts.pod_uid);

    const bool redirected = !classification.ambient_backends.empty();
    const bool served =
        !facts.ztunnel_holders.empty() || !facts.listener_ports.empty() || facts.StateIs("Up");
    const size_t first_finding = findings_.size();
    CheckHandOff(facts, classification, served);
    if (redirected) {
      CheckListeners(facts, classification);
      CheckInpod(facts, classification, first_finding);
    } else {
      CheckRedirect(facts, classification);
    }
    CheckOverlap(facts);
  }

  // DNS_CAPTURE_BROKEN and INPOD_PROXY_BLOCKED. INPOD_PROXY_BLOCKED is the cause of this netns's
  // ZDS_PENDING / ZDS_STALL / ZTUNNEL_LISTENERS_MISSING: those stay (their ageing, alerts and
  // redirect state are unchanged) and name it in their evidence and hint.
  void CheckInpod(const NetnsFacts& facts, const NetnsClassification& classification,
                  size_t first_finding) {
    InpodContext context;
    context.netns = facts.netns;
    context.classification = &classification;
    context.pod_label = facts.pod_label;
    context.handoff_pending = classification.zds_state == ZdsState::kPending ||
                              classification.zds_state == ZdsState::kStalled;
    for (uint16_t port : kZtunnelPorts) {
      if (facts.listener_ports.contains(port) || facts.unattributed_ports.contains(port)) {
        context.served_ports.insert(port);
      }
    }
    context.is_ztunnel_socket = [this](const ListeningSocket& socket) {
      return OwnerOf(socket, view_) != ListenerOwner::kOther;
    };
    context.symptoms.push_back(
        "ztunnel listeners in the netns: " + ListenerPortsText(facts.listener_ports) +
        "; ZDS hand-off " + std::string(ZdsStateName(classification.zds_state)));
    context.symptoms.push_back(WorkloadStateText(facts));
    std::vector<Finding> found = CheckInpodPrerequisites(context);
    for (const Finding& cause : found) {
      if (cause.code != FindingCode::kInpodProxyBlocked) continue;
      for (size_t i = first_finding; i < findings_.size(); ++i) {
        Finding& symptom = findings_[i];
        if (symptom.code != FindingCode::kZdsPending && symptom.code != FindingCode::kZdsStall &&
            symptom.code != FindingCode::kZtunnelListenersMissing) {
          continue;
        }
        symptom.evidence.push_back("cause: INPOD_PROXY_BLOCKED (" + cause.subject +
                                   "): ztunnel cannot bind its in-pod listeners in this netns");
        symptom.hint = "Fix the cause reported as INPOD_PROXY_BLOCKED for this netns (" +
                       cause.subject + "); ztunnel retries every 5 s and then starts the proxy.";
      }
    }
    findings_.insert(findings_.end(), std::make_move_iterator(found.begin()),
                     std::make_move_iterator(found.end()));
  }

  void CheckHandOff(const NetnsFacts& facts, NetnsClassification& classification, bool served) {
    std::vector<std::string> signals;
    // Listeners or an Up state prove the hand-off happened even when ztunnel's fds are unreadable.
    if (!facts.cni_holders.empty() && facts.ztunnel_holders.empty() &&
        facts.listener_ports.empty() && !facts.StateIs("Up")) {
      signals.push_back("istio-cni " + PidList(facts.cni_holders) +
                        " holds the netns fd but no ztunnel process does");
    }
    for (const WorkloadStateRef& ref : facts.states) {
      if (ref.state->state == "Pending") {
        signals.push_back("ztunnel pid " + std::to_string(ref.ztunnel_pid) +
                          " reports workloadState Pending for pod uid " + facts.pod_uid +
                          " (proxy start failed, retried every 5 s)");
      }
    }
    if (signals.empty()) {
      if (served) classification.zds_state = ZdsState::kHandedOff;
      return;
    }
    const int64_t first_seen =
        history_.Observe("pending:" + std::to_string(facts.netns->netns.inode));
    const bool stalled = Stalled(first_seen);
    classification.zds_state = stalled ? ZdsState::kStalled : ZdsState::kPending;
    (stalled ? stalled_netns_ : pending_netns_)++;

    std::vector<std::string> evidence = std::move(signals);
    evidence.push_back("ztunnel listeners in the netns: " +
                       ListenerPortsText(facts.listener_ports));
    evidence.push_back(WorkloadStateText(facts));
    evidence.push_back("hand-off pending " + Since(first_seen, now_) + "; " + ThresholdText());
    for (const NodeSignal& signal : node_signals_) {
      evidence.push_back("node: " + signal.evidence + " " + Since(signal.first_seen, now_));
    }
    Finding finding =
        stalled ? MakeNetnsFinding(FindingCode::kZdsStall, facts, "hand-off",
                                   "ZDS hand-off of the pod netns to ztunnel is stalled",
                                   std::move(evidence))
                : MakeNetnsFinding(FindingCode::kZdsPending, facts, "hand-off",
                                   "ZDS hand-off of the pod netns to ztunnel is in progress",
                                   std::move(evidence));
    finding.since_unix_ms = first_seen;
    // Without history a young hand-off and one stuck for hours look the same; a pod whose
    // redirected traffic has no ztunnel listener is black-holed now, so it must not pass as info.
    if (!stalled && !options_.history_known && BlackHoledNow(facts, classification)) {
      finding.severity = Severity::kWarning;
      finding.summary = "ZDS hand-off pending and the pod's redirected traffic is black-holed: " +
                        NetnsLabelOf(facts);
      finding.evidence.push_back(
          "age unknown: no daemon history (a one-shot report cannot tell a hand-off in progress "
          "from a stuck one; `ambient-doctor watch` or the daemon ages it into ZDS_STALL)");
      finding.hint = "If this persists across two reports, treat it as ZDS_STALL: " +
                     std::string(FindingCodeDetails(FindingCode::kZdsStall).hint);
    }
    findings_.push_back(std::move(finding));
  }

  // Redirect rules present, listeners readable, and a ztunnel port without any listener.
  static bool BlackHoledNow(const NetnsFacts& facts, const NetnsClassification& classification) {
    if (classification.ambient_backends.empty() || !facts.listeners_known) return false;
    return std::any_of(std::begin(kZtunnelPorts), std::end(kZtunnelPorts), [&](uint16_t port) {
      return !facts.listener_ports.contains(port) && !facts.unattributed_ports.contains(port);
    });
  }

  static std::string NetnsLabelOf(const NetnsFacts& facts) {
    return "netns " + facts.netns->netns.PrimaryPath() + " (inode " +
           std::to_string(facts.netns->netns.inode) + ")";
  }

  void CheckListeners(const NetnsFacts& facts, const NetnsClassification& classification) {
    // A young pending hand-off is reported as ZDS_PENDING: rules come before the ztunnel add.
    if (classification.zds_state == ZdsState::kPending) return;
    if (!facts.listeners_known || classification.mode != DataplaneMode::kAmbient) return;
    std::vector<uint16_t> missing;
    for (uint16_t port : kZtunnelPorts) {
      // An unattributable listener still accepts the traffic: no black-hole claim for it.
      if (!facts.listener_ports.contains(port) && !facts.unattributed_ports.contains(port)) {
        missing.push_back(port);
      }
    }
    if (missing.empty()) return;
    std::string backends;
    for (Backend backend : classification.ambient_backends) {
      backends += (backends.empty() ? "" : ", ") + std::string(BackendName(backend));
    }
    std::vector<std::string> evidence = {
        "Istio in-pod redirect rules present (" + backends + ", variant " +
            (classification.variant ? classification.variant->Describe() : std::string("?")) + ")",
        "ztunnel listeners present: " + ListenerPortsText(facts.listener_ports) +
            "; missing: " + JoinNumbers(missing, "/"),
        HoldersText(facts), WorkloadStateText(facts)};
    if (view_.ztunnel_pids.empty()) evidence.push_back("no ztunnel process found on the node");
    if (facts.listener_ports.empty()) {
      for (const ListeningSocket& listener : facts.netns->listeners) {
        if (IsZtunnelPort(listener) && !facts.unattributed_ports.contains(listener.port)) {
          evidence.push_back("port " + std::to_string(listener.port) +
                             " is held by a non-ztunnel socket (owners " +
                             (listener.owner_pids.empty() ? std::string("unknown")
                                                          : JoinNumbers(listener.owner_pids)) +
                             ")");
        }
      }
    }
    const std::string summary =
        facts.listener_ports.empty()
            ? "redirect rules without any ztunnel listener: traffic is black-holed"
            : "redirect rules but ztunnel listener(s) " + JoinNumbers(missing, "/") +
                  " missing: part of the traffic is black-holed";
    findings_.push_back(MakeNetnsFinding(FindingCode::kZtunnelListenersMissing, facts,
                                         "missing " + JoinNumbers(missing, "/"), summary,
                                         std::move(evidence)));
  }

  void CheckRedirect(const NetnsFacts& facts, const NetnsClassification& classification) {
    if (!facts.netfilter_known || facts.is_ztunnel_netns) return;
    std::vector<std::string> evidence;
    if (!facts.listener_ports.empty()) {
      std::vector<int> owners(facts.listener_owners.begin(), facts.listener_owners.end());
      evidence.push_back(
          "ztunnel listeners on " + ListenerPortsText(facts.listener_ports) +
          (owners.empty() ? std::string(" (mark 0x539)") : " (" + PidList(owners) + ")"));
    }
    if (!facts.ztunnel_holders.empty()) {
      evidence.push_back("ztunnel " + PidList(facts.ztunnel_holders) + " holds the netns fd");
    }
    if (facts.StateIs("Up")) evidence.push_back(WorkloadStateText(facts));
    // Sidecars can also be advertised as HBONE; only ztunnel-side evidence counts for them.
    if (classification.mode != DataplaneMode::kSidecar) {
      evidence.insert(evidence.end(), facts.hbone_evidence.begin(), facts.hbone_evidence.end());
    }
    if (evidence.empty()) return;
    evidence.push_back("no Istio in-pod redirect rules in any netfilter backend (mode " +
                       std::string(DataplaneModeName(classification.mode)) + ")");
    findings_.push_back(MakeNetnsFinding(
        FindingCode::kRedirectMissing, facts, "",
        "ztunnel serves the pod but its netns has no redirect rules", std::move(evidence)));
  }

  void CheckOverlap(const NetnsFacts& facts) {
    const std::vector<int> pids = facts.ServingPids();
    if (pids.size() < 2) return;
    std::vector<std::string> evidence;
    for (int pid : pids) {
      std::string line = "ztunnel pid " + std::to_string(pid) + ":";
      if (std::find(facts.ztunnel_holders.begin(), facts.ztunnel_holders.end(), pid) !=
          facts.ztunnel_holders.end()) {
        line += " holds the netns fd;";
      }
      if (facts.listener_owners.contains(pid)) line += " owns in-pod listeners;";
      if (auto it = view_.process_by_pid.find(pid);
          it != view_.process_by_pid.end() && it->second->start_time_unix_ms > 0) {
        line += " started " + FormatUnixMs(it->second->start_time_unix_ms);
      }
      if (line.back() == ';') line.pop_back();
      evidence.push_back(std::move(line));
    }
    findings_.push_back(MakeNetnsFinding(
        FindingCode::kMultipleZtunnels, facts, "",
        std::to_string(pids.size()) + " ztunnel processes serve the netns", std::move(evidence)));
  }

  // Pending workloadState entries of known pods whose netns was not matched (no CRI netns inode,
  // or the netns was not scanned). Unknown pods are stale instead (CheckStaleWorkloads).
  void CheckUnmatchedPendingStates() {
    for (const auto& [uid, refs] : view_.states_by_uid) {
      if (matched_uids_.contains(uid)) continue;
      if (snapshot_.cri.available && !view_.pod_by_uid.contains(uid)) continue;
      for (const WorkloadStateRef& ref : refs) {
        if (ref.state->state != "Pending") continue;
        const int64_t first_seen = history_.Observe("pending-uid:" + uid);
        const bool stalled = Stalled(first_seen);
        (stalled ? stalled_netns_ : pending_netns_)++;
        Finding finding = MakeFinding(
            stalled ? FindingCode::kZdsStall : FindingCode::kZdsPending, nullptr, "pod uid " + uid,
            stalled ? "ztunnel workload stuck in Pending" : "ztunnel workload is Pending",
            {"ztunnel pid " + std::to_string(ref.ztunnel_pid) +
                 " reports workloadState Pending for pod uid " + uid,
             "netns not matched to a scanned netns (" +
                 std::string(snapshot_.cri.available ? "CRI has no netns for it"
                                                     : "CRI not available") +
                 ")",
             "Pending " + Since(first_seen, now_) + "; " + ThresholdText()},
            stalled ? "ztunnel keeps failing to start the pod's proxy (retried every 5 s); read "
                      "its \"failure to start proxy\" log (a dead netns or a port conflict)."
                    : "Normal for a moment after pod start; it becomes ZDS_STALL past the "
                      "threshold.");
        finding.pod = PodLabel(ref.state->namespace_name, ref.state->name);
        finding.since_unix_ms = first_seen;
        findings_.push_back(std::move(finding));
        break;  // one finding per pod even when two ztunnels report it
      }
    }
  }

  bool ZtunnelRunning() const { return !view_.ztunnel_pids.empty(); }

  void CheckDisconnected() {
    const ZdsSocketState& zds = snapshot_.zds;
    const NetnsSnapshot* host = snapshot_.Host();
    std::vector<std::string> evidence;
    std::string summary;
    std::string subject;  // which way the hand-off path is broken
    if (zds.listener_found) {
      const std::string listener =
          "istio-cni listens on " + zds.path +
          (zds.listener.owner_pids.empty() ? std::string()
                                           : " (" + PidList(zds.listener.owner_pids) + ")");
      if (zds.accepted.empty()) {
        summary = "istio-cni listens on the ZDS socket but no ztunnel is connected";
        subject = "no ztunnel connected";
        evidence.push_back(listener + " with 0 accepted connections");
      } else {
        // Only when every peer's owner is known can we say none of them is ztunnel.
        bool any_unknown = false;
        bool any_ztunnel = false;
        std::vector<int> foreign;
        for (const UnixSocket& client : zds.clients) {
          if (client.owner_pids.empty()) any_unknown = true;
          for (int pid : client.owner_pids) {
            if (view_.ztunnel_pids.contains(pid)) {
              any_ztunnel = true;
            } else {
              foreign.push_back(pid);
            }
          }
        }
        any_unknown = any_unknown || zds.clients.size() < zds.accepted.size();
        // The inventory sees istio-cni, so it would see a ztunnel: none runs, none is connected.
        const bool no_ztunnel_at_all = !ZtunnelRunning() && !view_.cni_pids.empty();
        if (any_ztunnel || view_.process_by_pid.empty()) return;
        if (any_unknown && !no_ztunnel_at_all) return;
        evidence.push_back(listener + " with " + std::to_string(zds.accepted.size()) +
                           " accepted connection(s)");
        if (foreign.empty()) {
          summary = "istio-cni listens on the ZDS socket but no ztunnel is connected";
          subject = "no ztunnel connected";
          evidence.push_back(
              "no ztunnel process runs: the connection(s) are left over from a ztunnel that "
              "exited, not yet closed by istio-cni");
        } else {
          summary = "only non-ztunnel clients are connected to the ZDS socket";
          subject = "foreign client";
          std::sort(foreign.begin(), foreign.end());
          foreign.erase(std::unique(foreign.begin(), foreign.end()), foreign.end());
          evidence.push_back("connected client processes: " + PidList(foreign) +
                             " (none is ztunnel); such a client receives every new pod's "
                             "AddWorkload and netns fd");
        }
      }
      evidence.push_back(ZtunnelProcessesText());
    } else {
      if (!zds.errors.empty() || !ZtunnelRunning()) return;
      summary = "no ZDS listener exists while ztunnel runs";
      subject = "no listener";
      evidence.push_back("no listening SEQPACKET socket bound to " + zds.path);
      evidence.push_back(ZtunnelProcessesText());
    }
    Finding finding = MakeFinding(FindingCode::kZdsDisconnected, host, std::move(subject), summary,
                                  std::move(evidence));
    const int64_t first_seen = history_.Observe("disconnected");
    finding.evidence.push_back("seen " + Since(first_seen, now_));
    finding.since_unix_ms = first_seen;
    findings_.push_back(std::move(finding));
  }

  std::string ZtunnelProcessesText() const {
    if (!ZtunnelRunning()) return "no ztunnel process found on the node";
    std::string text = "ztunnel " + PidList({view_.ztunnel_pids.begin(), view_.ztunnel_pids.end()});
    for (const ZtunnelAdminState& ztunnel : snapshot_.ztunnels) {
      if (!ztunnel.ready.has_value()) continue;
      text += "; pid " + std::to_string(ztunnel.pid) + (*ztunnel.ready ? " ready" : " not ready");
    }
    return text;
  }

  void CheckStaleWorkloads() {
    const NetnsSnapshot* host = snapshot_.Host();
    const bool cri = snapshot_.cri.available;
    // Discovery saw processes, so a live pod's netns (its pause process) would have been found.
    const bool proc_scanned = !view_.scanned_inodes_with_pids.empty();
    const std::string cri_text = "no running pod sandbox in CRI (" +
                                 std::to_string(snapshot_.cri.pods.size()) + " pods) has it";
    for (const auto& [inode, pids] : view_.ztunnel_holders) {
      if (view_.ztunnel_own_netns.contains(inode)) continue;
      if (host != nullptr && host->netns.inode == inode) continue;
      const NetnsSnapshot* scanned = FindScanned(inode);
      const auto cni = view_.cni_holders.find(inode);
      const bool cni_holds = cni != view_.cni_holders.end();
      std::vector<std::string> evidence = {"ztunnel " + PidList(pids) + " holds netns inode " +
                                           std::to_string(inode)};
      if (cri) {
        if (view_.pod_by_inode.contains(inode) || view_.scanned_inodes_with_pids.contains(inode)) {
          continue;
        }
        evidence.push_back("no process lives in the netns and " + cri_text);
      } else {
        // Without CRI: unreachable by discovery, and either /proc was scanned or istio-cni (which
        // drops a deleted pod) no longer holds it.
        const bool cni_dropped = !cni_holds && !view_.cni_pids.empty();
        if (scanned != nullptr || !(proc_scanned || cni_dropped)) continue;
        evidence.push_back("the netns has no bind mount or process left (not found by discovery)");
        if (cni_dropped)
          evidence.push_back("istio-cni no longer holds it (it processed the delete)");
      }
      if (cni_holds) {
        evidence.push_back("istio-cni " + PidList(cni->second) +
                           " still holds it too (stale CNI pod cache, istio#53371)");
      }
      Finding finding = MakeFinding(FindingCode::kZtunnelStaleWorkload, scanned, "netns fd",
                                    "ztunnel holds the netns of a pod that no longer exists",
                                    std::move(evidence));
      if (scanned == nullptr) finding.netns_inode = inode;
      findings_.push_back(std::move(finding));
    }
    if (!cri) return;  // a workloadState uid can only be judged against the runtime's pods
    for (const auto& [uid, refs] : view_.states_by_uid) {
      if (view_.pod_by_uid.contains(uid)) continue;
      const ZtunnelWorkloadState& state = *refs.front().state;
      std::vector<int> pids;
      for (const WorkloadStateRef& ref : refs) pids.push_back(ref.ztunnel_pid);
      Finding finding =
          MakeFinding(FindingCode::kZtunnelStaleWorkload, nullptr, "workloadState " + uid,
                      "ztunnel keeps state for a pod that no longer exists",
                      {"ztunnel " + PidList(pids) + " workloadState[" + uid + "] = " + state.state,
                       "pod uid " + uid + ": " + cri_text});
      finding.pod = PodLabel(state.namespace_name, state.name);
      findings_.push_back(std::move(finding));
    }
  }

  const NetnsSnapshot* FindScanned(uint64_t inode) const {
    for (const NetnsSnapshot& netns : snapshot_.netns) {
      if (netns.netns.inode == inode) return &netns;
    }
    return nullptr;
  }

  void ReportNodeSignals() {
    if (node_signals_.empty()) return;
    std::set<std::string> stalled_kinds;
    std::set<std::string> all_kinds;
    int64_t oldest = now_;
    std::vector<std::string> evidence;
    for (const NodeSignal& signal : node_signals_) {
      all_kinds.insert(signal.kind);
      if (Stalled(signal.first_seen)) stalled_kinds.insert(signal.kind);
      oldest = std::min(oldest, signal.first_seen);
      evidence.push_back(signal.evidence + " " + Since(signal.first_seen, now_));
    }
    evidence.push_back(std::to_string(stalled_netns_) + " netns stalled, " +
                       std::to_string(pending_netns_) + " pending; " + ThresholdText());
    const bool stalled = !stalled_kinds.empty();
    std::string kinds;
    for (const std::string& kind : stalled ? stalled_kinds : all_kinds) {
      kinds += (kinds.empty() ? "" : "; ") + kind;
    }
    Finding finding = MakeFinding(
        stalled ? FindingCode::kZdsStall : FindingCode::kZdsPending, snapshot_.Host(),
        "node hand-off signals",
        (stalled ? "ZDS hand-off stalled on the node: " : "ZDS hand-off waiting: ") + kinds,
        std::move(evidence),
        stalled ? "Looks like the istio-cni ZDS deadlock (istio#60786, fixed in "
                  "1.29.6/1.30.3): ztunnel waits for a snapshot that never comes. "
                  "Restart the istio-cni pod on this node and upgrade; restarting "
                  "ztunnel does not clear it. See also istio#61374."
                : "Normal right after a ztunnel start; it becomes ZDS_STALL past the "
                  "threshold.");
    finding.since_unix_ms = oldest;
    findings_.push_back(std::move(finding));
  }

  const NodeSnapshot& snapshot_;
  const std::vector<NetnsIstioState>& states_;
  const AnalysisOptions& options_;
  History& history_;
  std::vector<NetnsClassification>& netns_;
  std::vector<Finding>& findings_;
  const NodeView view_;
  const int64_t now_;
  std::vector<NodeSignal> node_signals_;
  std::set<std::string> matched_uids_;  // workloadState uids joined to a scanned netns
  int stalled_netns_ = 0;
  int pending_netns_ = 0;
};

}  // namespace

void CheckZds(const NodeSnapshot& snapshot, const std::vector<NetnsIstioState>& states,
              const AnalysisOptions& options, History& history,
              std::vector<NetnsClassification>& netns, std::vector<Finding>& findings) {
  ZdsChecker(snapshot, states, options, history, netns, findings).Run();
}

void AnnotatePods(const NodeSnapshot& snapshot, std::vector<NetnsClassification>& netns,
                  std::vector<Finding>& findings) {
  std::map<uint64_t, const PodIdentity*> pod_by_inode;
  for (const PodIdentity& pod : snapshot.cri.pods) {
    if (pod.netns_inode != 0 && !pod.host_network) pod_by_inode[pod.netns_inode] = &pod;
  }
  if (pod_by_inode.empty()) return;
  for (NetnsClassification& classification : netns) {
    auto it = pod_by_inode.find(classification.netns_inode);
    if (it == pod_by_inode.end()) continue;
    classification.pod = PodLabel(it->second->namespace_name, it->second->name);
    classification.pod_uid = it->second->uid;
  }
  for (Finding& finding : findings) {
    if (!finding.pod.empty()) continue;
    auto it = pod_by_inode.find(finding.netns_inode);
    if (it != pod_by_inode.end())
      finding.pod = PodLabel(it->second->namespace_name, it->second->name);
  }
}

}  // namespace ad::analysis
