#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <tuple>
#include <utility>

#include "scan/cri_node_source.h"
#include "scan/zds_node_source.h"
#include "scan/ztunnel_node_source.h"
#include "scan/ztunnel_resource_node_source.h"

namespace ad {
namespace {

// The first error of each node-wide source in this snapshot.
std::map<SourceKind, std::string> DegradedSources(const NodeSnapshot& snapshot) {
  std::map<SourceKind, std::string> degraded;
  auto add = [&degraded](const std::vector<SourceError>& errors) {
    for (const SourceError& error : errors) degraded.emplace(error.kind, error.message);
  };
  add(snapshot.errors);
  add(snapshot.zds.errors);
  add(snapshot.cri.errors);
  for (const ZtunnelAdminState& ztunnel : snapshot.ztunnels) add(ztunnel.errors);
  return degraded;
}

// What a partial step compares to decide that nothing changed: per netns its record and its
// listeners' owners (the node sources attribute them), in discovery order.
struct NetnsInputs {
  NetnsRecord record;
  std::vector<std::vector<int>> listener_owners;
  bool operator==(const NetnsInputs&) const = default;
};

std::vector<NetnsInputs> InputsOf(const NodeSnapshot& snapshot) {
  std::vector<NetnsInputs> inputs;
  inputs.reserve(snapshot.netns.size());
  for (const NetnsSnapshot& netns : snapshot.netns) {
    NetnsInputs& in = inputs.emplace_back();
    in.record = netns.netns;
    for (const ListeningSocket& listener : netns.listeners) {
      in.listener_owners.push_back(listener.owner_pids);
    }
  }
  return inputs;
}

// Node-wide data a partial step may have polled again (everything but times).
bool SameNodeSources(const NodeSnapshot& a, const NodeSnapshot& b) {
  return a.errors == b.errors && a.zds_collected == b.zds_collected && a.zds == b.zds &&
         a.processes == b.processes && a.ztunnels == b.ztunnels && a.cri == b.cri &&
         a.ztunnel_resources == b.ztunnel_resources;
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
  return scan;
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
      recently_resolved_(std::make_shared<const std::vector<FindingRecord>>()) {}

Engine::Engine(EngineConfig config)
    : Engine(std::move(config), MakeKernelInspector(ReadLimits{}, {.ipsets_in_host_only = true})) {}

EngineStep Engine::Step(const StepPlan& plan) {
  EngineStep step;
  const int64_t started_at = clock_();
  if (plan.full || !last_snapshot_) {
    step.snapshot = ScanNode(scan_, *inspector_);
  } else {
    // The previous step's inputs, taken before the scan moves its netns out.
    const bool may_skip =
        plan.skip_if_unchanged && plan.dirty_netns.empty() && last_usable_ && history_.size() == 0;
    std::vector<NetnsInputs> inputs_before;
    if (may_skip) inputs_before = InputsOf(*last_snapshot_);
    ScanReuse reuse{.previous = &*last_snapshot_,
                    .reinspect = plan.dirty_netns,
                    .node_sources = plan.node_sources};
    step.snapshot = ScanNode(scan_, *inspector_, &reuse);
    // With node sources polled, the previous node data is still in last_snapshot_ (only its
    // netns were moved out); without, it was moved over unchanged.
    if (may_skip && (!plan.node_sources || SameNodeSources(step.snapshot, *last_snapshot_)) &&
        InputsOf(step.snapshot) == inputs_before && ScanUsable(step.snapshot)) {
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
    return step;  // nothing judged: open findings and history stay as they were
  }
  step.scan_recovered = std::exchange(scan_failing_, false);
  step.analysis = Analyze(step.snapshot, config_.analysis, &history_);
  if (extra_findings_) {
    std::vector<Finding> extra = extra_findings_(step.snapshot, step.analysis);
    if (!extra.empty()) {
      std::vector<Finding>& findings = step.analysis.findings;
      findings.insert(findings.end(), std::make_move_iterator(extra.begin()),
                      std::make_move_iterator(extra.end()));
      // The order Analyze returns: severity desc, then netns path, code, subject.
      std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
        if (a.severity != b.severity) return a.severity > b.severity;
        return std::tie(a.netns_path, a.code, a.subject) <
               std::tie(b.netns_path, b.code, b.subject);
      });
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
  return step;
}

}  // namespace ad
