#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "model/istio_facts.h"
#include "scan/cni_node_source.h"
#include "scan/conntrack_node_source.h"
#include "scan/cri_node_source.h"
#include "scan/nft_node_source.h"
#include "scan/zds_node_source.h"
#include "scan/ztunnel_node_source.h"
#include "scan/ztunnel_resource_node_source.h"
#include "sources/netns/discovery.h"
#include "sources/netns/netns_workers.h"

namespace ad {
namespace {

constexpr uint8_t kTcp = 6;  // ListeningSocket::protocol

// The first error of each node-wide source in this snapshot.
std::map<SourceKind, std::string> DegradedSources(const NodeSnapshot& snapshot) {
  std::map<SourceKind, std::string> degraded;
  auto add = [&degraded](const std::vector<SourceError>& errors) {
    for (const SourceError& error : errors) degraded.emplace(error.kind, error.message);
  };
  add(snapshot.errors);
  add(snapshot.zds.errors);
  add(snapshot.cri.errors);
  add(snapshot.probe_conntrack.errors);
  add(snapshot.cni.errors);
  add(snapshot.nft_userspace.errors);
  for (const ZtunnelAdminState& ztunnel : snapshot.ztunnels) add(ztunnel.errors);
  if (snapshot.kube) {
    if (auto error = KubeApiError(snapshot.kube->status))
      degraded.emplace(error->kind, error->message);
  }
  return degraded;
}

// The netns read again (`dirty`) found what their previous reads found. `previous` is the step
// before, whose netns the scan did not move out because it read them again.
bool SameReads(const NodeSnapshot& now, const NodeSnapshot& previous,
               const std::set<uint64_t>& dirty) {
  if (dirty.empty()) return true;
  std::map<uint64_t, const NetnsSnapshot*> before;
  for (const NetnsSnapshot& netns : previous.netns) {
    if (dirty.contains(netns.netns.inode)) before.emplace(netns.netns.inode, &netns);
  }
  for (const NetnsSnapshot& netns : now.netns) {
    if (!dirty.contains(netns.netns.inode)) continue;
    auto it = before.find(netns.netns.inode);
    if (it == before.end() || !SameNetnsContent(netns, *it->second)) return false;
  }
  return true;
}

// Listeners and listener read results of the netns a step will take over (all but `dirty`) and
// read the listeners of again (all, or those in `only`).
std::vector<NetnsSnapshot> ListenersOf(const NodeSnapshot& snapshot,
                                       const std::set<uint64_t>& dirty,
                                       const std::set<uint64_t>* only) {
  std::vector<NetnsSnapshot> listeners;
  for (const NetnsSnapshot& netns : snapshot.netns) {
    if (dirty.contains(netns.netns.inode)) continue;
    if (only != nullptr && !only->contains(netns.netns.inode)) continue;
    NetnsSnapshot& copy = listeners.emplace_back();
    copy.netns.inode = netns.netns.inode;
    copy.reads.listeners = netns.reads.listeners;
    copy.listeners = netns.listeners;
    for (const SourceError& error : netns.errors) {
      if (error.kind == kListenerErrorKind) copy.errors.push_back(error);
    }
  }
  return listeners;
}

// Every netns in `before` (from ListenersOf) has the same listeners and listener errors now.
bool SameListeners(const NodeSnapshot& now, const std::vector<NetnsSnapshot>& before) {
  if (before.empty()) return true;
  std::map<uint64_t, const NetnsSnapshot*> by_inode;
  for (const NetnsSnapshot& netns : now.netns) by_inode.emplace(netns.netns.inode, &netns);
  for (const NetnsSnapshot& old : before) {
    auto it = by_inode.find(old.netns.inode);
    if (it == by_inode.end()) return false;
    const NetnsSnapshot& netns = *it->second;
    if (netns.reads.listeners != old.reads.listeners || netns.listeners != old.listeners) {
      return false;
    }
    std::vector<SourceError> errors;
    for (const SourceError& error : netns.errors) {
      if (error.kind == kListenerErrorKind) errors.push_back(error);
    }
    if (errors != old.errors) return false;
  }
  return true;
}

// What a partial step compares to decide that nothing changed: per netns, in discovery order, its
// record (every NetnsRecord field) and its listeners' owners (the node sources attribute them),
// as one exact byte string: compared across a quiet poll, it costs one allocation where a copy of
// the records cost several per netns.
std::string InputsOf(const NodeSnapshot& snapshot) {
  std::string inputs;
  auto append = [&inputs](const auto& value) {
    inputs.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  for (const NetnsSnapshot& netns : snapshot.netns) {
    const NetnsRecord& record = netns.netns;
    append(record.dev);
    append(record.inode);
    append(record.is_host);
    append(record.paths.size());
    for (const std::string& path : record.paths) {
      append(path.size());
      inputs.append(path);
    }
    append(record.pids.size());
    for (int pid : record.pids) append(pid);
    append(netns.listeners.size());
    for (const ListeningSocket& listener : netns.listeners) {
      append(listener.owner_pids.size());
      for (int pid : listener.owner_pids) append(pid);
    }
  }
  return inputs;
}

// Socket inodes of ztunnel-port listeners that had owners (from the fd inventory), sorted.
std::vector<uint64_t> OwnedZtunnelListeners(const NodeSnapshot& snapshot) {
  std::vector<uint64_t> inodes;
  for (const NetnsSnapshot& netns : snapshot.netns) {
    for (const ListeningSocket& listener : netns.listeners) {
      if (istio::IsZtunnelInpodPort(listener.port) && !listener.owner_pids.empty()) {
        inodes.push_back(listener.inode);
      }
    }
  }
  std::sort(inodes.begin(), inodes.end());
  return inodes;
}

// A netns not re-read this step keeps its listeners from an older read. When a listener owned
// before has no owner in this poll's fd inventory, its owner closed it (or exited): the socket is
// gone, but the copy would still show it, marked 0x539. Such netns get their listeners read again
// now, so a ztunnel that drops an in-pod listener (e.g. its DNS proxy) is seen within one poll.
void RereadOrphanedListeners(const std::vector<uint64_t>& owned_before,
                             const std::set<uint64_t>& read_now, NodeSnapshot& snapshot,
                             NetnsInspector& inspector) {
  for (NetnsSnapshot& netns : snapshot.netns) {
    if (read_now.contains(netns.netns.inode) || netns.unreadable) continue;
    const bool orphaned =
        std::any_of(netns.listeners.begin(), netns.listeners.end(), [&](const auto& listener) {
          return listener.owner_pids.empty() &&
                 std::binary_search(owned_before.begin(), owned_before.end(), listener.inode);
        });
    if (!orphaned) continue;
    NetnsSnapshot before;
    before.listeners = netns.listeners;
    // Only the listeners are read: the rules stay those the change monitor's baselines describe.
    NetnsWorkers::Shared().Run(
        [&] { inspector.RefreshListeners(netns); });  // setns off this thread
    CarryListenerOwners(before, netns);
  }
}

// Node-wide data a partial step may have polled again (everything but times).
bool SameNodeSources(const NodeSnapshot& a, const NodeSnapshot& b) {
  return a.errors == b.errors && a.zds_collected == b.zds_collected && a.zds == b.zds &&
         a.processes == b.processes && a.ztunnels == b.ztunnels && a.cri == b.cri &&
         a.probe_conntrack == b.probe_conntrack && a.cni == b.cni &&
         a.nft_userspace == b.nft_userspace && a.ztunnel_resources == b.ztunnel_resources;
}

// Whether a story waits on time alone: a pod in its grace period, or a condition aging in the
// desired-state history.
bool WaitsOnTime(const DesiredAnalysis& desired, const History& history) {
  if (history.size() != 0) return true;
  return std::any_of(desired.pods.begin(), desired.pods.end(),
                     [](const PodStory& story) { return story.judge.block == JudgeBlock::kYoung; });
}

}  // namespace

ScanOptions ComposeScan(const EngineConfig& config) {
  ScanOptions scan;
  scan.discovery = config.discovery;
  scan.workers = std::max(1, config.workers);
  scan.node_name = config.node_name;
  if (config.zds) {
    ZdsSourceOptions zds;
    zds.socket_path = config.zds_socket;
    zds.host_path_prefix = config.host_root;
    zds.proc_root = config.proc_root;
    auto zds_source = std::make_shared<ZdsNodeSource>(std::move(zds));
    scan.node_sources.push_back(zds_source);
    if (config.ztunnel_resources) {
      ZtunnelResourceOptions resources;
      resources.proc_root = config.proc_root;
      resources.cgroup_root = config.host_root + "/sys/fs/cgroup";
      resources.close_wait_min_interval =
          std::chrono::milliseconds(config.close_wait_min_interval_ms);
      // The ZDS source runs first and keeps the ztunnel sockets of its fd inventory.
      const std::weak_ptr<const ZdsNodeSource> inventory = zds_source;
      scan.node_sources.push_back(std::make_shared<ZtunnelResourceNodeSource>(
          std::move(resources), [inventory](int pid) -> const std::vector<uint64_t>* {
            const auto source = inventory.lock();
            return source ? source->ZtunnelSocketInodes(pid) : nullptr;
          }));
    }

    ZtunnelAdminOptions admin;
    admin.admin_port = config.ztunnel_admin_port;
    admin.proc_root = config.proc_root;
    admin.extra_netns_paths = config.ztunnel_netns;
    admin.node_name = ResolveNodeName(config.node_name);
    scan.node_sources.push_back(std::make_shared<ZtunnelAdminNodeSource>(std::move(admin)));
  }
  if (config.cri) {
    CriSourceOptions cri;
    cri.client.endpoints = config.cri_endpoints;
    cri.client.host_root = config.host_root;
    cri.host_root = config.host_root;
    cri.proc_root = config.proc_root;
    scan.node_sources.push_back(std::make_shared<CriNodeSource>(std::move(cri)));
  }
  if (config.probe_conntrack) {
    ProbeConntrackOptions conntrack;
    conntrack.snat_v4 = config.analysis.probe_snat_v4;
    conntrack.snat_v6 = config.analysis.probe_snat_v6;
    conntrack.max_entries = config.probe_conntrack_max_entries;
    scan.node_sources.push_back(std::make_shared<ConntrackNodeSource>(
        std::move(conntrack), std::chrono::milliseconds(config.probe_conntrack_min_interval_ms)));
  }
  // After CRI: the chain's gaps are matched against the sandboxes' created_at.
  if (!config.cni_conf_dir.empty()) {
    CniSourceOptions cni;
    cni.host_root = config.host_root;
    cni.conf_dir = config.cni_conf_dir_given ? config.cni_conf_dir : std::string();
    cni.fallback_dir = config.cni_conf_dir;
    cni.proc_root = config.proc_root;
    scan.node_sources.push_back(std::make_shared<CniNodeSource>(std::move(cni)));
  }
  if (config.nft_userspace) {
    nft::NftUserspaceOptions nft;
    nft.host_root = config.host_root;
    scan.node_sources.push_back(std::make_shared<NftUserspaceNodeSource>(std::move(nft)));
  }
  return scan;
}

std::set<uint64_t> AwaitingListeners(const NodeSnapshot& snapshot) {
  std::set<uint64_t> held;
  for (const ProcessNetnsFds& process : snapshot.processes) {
    if (process.role != ProcessRole::kZtunnel) continue;
    for (uint64_t inode : process.netns_fd_inodes) {
      if (inode != process.own_netns_inode) held.insert(inode);
    }
  }
  std::set<uint64_t> awaiting;
  for (const NetnsSnapshot& netns : snapshot.netns) {
    if (netns.netns.is_host || netns.unreadable || !held.contains(netns.netns.inode)) continue;
    const bool listening =
        std::any_of(netns.listeners.begin(), netns.listeners.end(), [](const auto& listener) {
          return listener.protocol == kTcp && listener.port == istio::kZtunnelInboundPort &&
                 !listener.owner_pids.empty();
        });
    if (!listening) awaiting.insert(netns.netns.inode);
  }
  return awaiting;
}

bool ScanUsable(const NodeSnapshot& snapshot) {
  return std::any_of(snapshot.netns.begin(), snapshot.netns.end(),
                     [](const NetnsSnapshot& ns) { return !ns.unreadable; });
}

int64_t Engine::SystemClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Engine::Engine(EngineConfig config, std::unique_ptr<NetnsInspector> inspector, Clock clock,
               size_t resolved_capacity)
    : config_(std::move(config)),
      scan_(ComposeScan(config_)),
      inspector_(std::move(inspector)),
      clock_(std::move(clock)),
      finding_history_(resolved_capacity),
      recently_resolved_(std::make_shared<const std::vector<FindingRecord>>()),
      discovery_cache_(std::make_unique<DiscoveryCache>()) {}

Engine::Engine(EngineConfig config)
    : Engine(std::move(config), MakeKernelInspector(ReadLimits{}, {.ipsets_in_host_only = true})) {}

Engine Engine::Replay(EngineConfig config, NodeSnapshot snapshot, const HistoryMemory& memory) {
  const int64_t taken_at = snapshot.taken_at_unix_ms;
  Engine engine(std::move(config), nullptr, [taken_at] { return taken_at; });
  engine.scan_ = {};  // no live source is ever asked
  engine.history_.Restore(memory.signal_first_seen);
  engine.desired_history_.Restore(memory.desired_first_seen);
  engine.finding_history_.Seed(memory.finding_first_seen);
  engine.replay_ = std::move(snapshot);
  return engine;
}

HistoryMemory Engine::Memory() const {
  return {.signal_first_seen = history_.Export(),
          .desired_first_seen = desired_history_.Export(),
          .finding_first_seen = finding_history_.OpenFirstSeen()};
}

Engine::Engine(Engine&&) = default;
Engine& Engine::operator=(Engine&&) = default;
Engine::~Engine() = default;

// Desired versus actual: its findings join the analysis's (each once), and the pod's desired
// state joins the evidence of the netns findings that keep their own codes.
void Engine::JudgeDesired(EngineStep& step) {
  auto desired = std::make_shared<DesiredAnalysis>(AnalyzeDesired(
      step.snapshot, step.analysis.netns, *step.snapshot.kube, config_.desired, &desired_history_));
  std::vector<Finding>& findings = step.analysis.findings;
  AddDesiredEvidence(*desired, findings);
  findings.insert(findings.end(), desired->findings.begin(), desired->findings.end());
  SortFindings(findings);
  desired_waiting_ = WaitsOnTime(*desired, desired_history_);
  step.desired = std::move(desired);
}

EngineStep Engine::Step(const StepPlan& plan) {
  EngineStep step;
  const int64_t started_at = clock_();
  if (replay_) {
    step.snapshot = *replay_;  // its Kubernetes view included
  } else if (plan.full || !last_snapshot_) {
    step.snapshot = ScanNode(scan_, *inspector_);
    if (kube_view_) step.snapshot.kube = kube_view_();
  } else {
    // The previous step's inputs, taken before the scan moves its netns out.
    const bool may_skip =
        plan.skip_if_unchanged && last_usable_ && history_.size() == 0 && !desired_waiting_;
    std::string inputs_before;
    std::vector<NetnsSnapshot> relistened_before;  // listeners are refreshed in place
    std::set<uint64_t> relisten = plan.relisten;
    if (plan.node_sources) relisten.merge(AwaitingListeners(*last_snapshot_));
    if (may_skip) {
      inputs_before = InputsOf(*last_snapshot_);
      if (plan.relisten_all || !relisten.empty()) {
        relistened_before =
            ListenersOf(*last_snapshot_, plan.dirty_netns, plan.relisten_all ? nullptr : &relisten);
      }
    }
    std::vector<uint64_t> owned_before;
    if (plan.node_sources) owned_before = OwnedZtunnelListeners(*last_snapshot_);
    ScanReuse reuse{.previous = &*last_snapshot_,
                    .reinspect = plan.dirty_netns,
                    .relisten = std::move(relisten),
                    .relisten_all = plan.relisten_all,
                    .node_sources = plan.node_sources,
                    .discovery = discovery_cache_.get()};
    step.snapshot = ScanNode(scan_, *inspector_, &reuse);
    if (kube_view_) step.snapshot.kube = kube_view_();
    if (!owned_before.empty()) {
      RereadOrphanedListeners(owned_before, plan.dirty_netns, step.snapshot, *inspector_);
    }
    // With node sources polled, the previous node data is still in last_snapshot_ (only its
    // netns were moved out; those read again stay); without, it was moved over unchanged.
    if (may_skip && (!plan.node_sources || SameNodeSources(step.snapshot, *last_snapshot_)) &&
        InputsOf(step.snapshot) == inputs_before && ScanUsable(step.snapshot) &&
        SameReads(step.snapshot, *last_snapshot_, plan.dirty_netns) &&
        SameListeners(step.snapshot, relistened_before) &&
        step.snapshot.kube == last_snapshot_->kube) {
      step.snapshot.taken_at_unix_ms = started_at;
      last_snapshot_ = std::move(step.snapshot);
      EngineStep unchanged;
      unchanged.unchanged = true;
      unchanged.usable = true;
      unchanged.recently_resolved = recently_resolved_;
      return unchanged;
    }
  }
  step.snapshot.taken_at_unix_ms = started_at;

  std::map<SourceKind, std::string> degraded = DegradedSources(step.snapshot);
  for (const auto& [kind, message] : degraded) {
    if (!degraded_.contains(kind)) {
      step.source_changes.push_back({SourceChange::Kind::kDegraded, kind, message});
    }
  }
  for (const auto& [kind, message] : degraded_) {
    if (!degraded.contains(kind))
      step.source_changes.push_back({SourceChange::Kind::kRecovered, kind, ""});
  }
  degraded_ = std::move(degraded);

  step.usable = ScanUsable(step.snapshot);
  last_usable_ = step.usable;
  step.recently_resolved = recently_resolved_;
  last_snapshot_ = step.snapshot;
  if (!step.usable) {
    scan_failing_ = true;
    step.memory = std::make_shared<const HistoryMemory>(Memory());
    return step;  // nothing judged: open findings and history stay as they were
  }
  step.scan_recovered = std::exchange(scan_failing_, false);
  step.analysis = Analyze(step.snapshot, config_.analysis, &history_);
  if (step.snapshot.kube) JudgeDesired(step);
  if (extra_findings_) {
    std::vector<Finding> extra = extra_findings_(step.snapshot, step.analysis);
    if (!extra.empty()) {
      std::vector<Finding>& findings = step.analysis.findings;
      findings.insert(findings.end(), std::make_move_iterator(extra.begin()),
                      std::make_move_iterator(extra.end()));
      SortFindings(findings);  // the order Analyze returns
    }
  }
  step.changes = DiffFindings(open_findings_, step.analysis.findings);
  open_findings_ = step.analysis.findings;
  const size_t resolved_before =
      finding_history_.resolved().size() + finding_history_.resolved_dropped();
  step.finding_records = finding_history_.Apply(step.analysis.findings, started_at);
  if (finding_history_.resolved().size() + finding_history_.resolved_dropped() != resolved_before) {
    recently_resolved_ =
        std::make_shared<const std::vector<FindingRecord>>(finding_history_.resolved());
  }
  step.recently_resolved = recently_resolved_;
  step.memory = std::make_shared<const HistoryMemory>(Memory());
  return step;
}

}  // namespace ad
