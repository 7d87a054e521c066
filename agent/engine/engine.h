// The engine: one object that owns scan composition (which sources, with which options), the
// history of ZDS signals and the set of open findings. Each Step() scans the node once and returns
// the snapshot, its analysis and what changed since the previous step. `report` is a one-step
// caller, `watch` a loop of steps, and the daemon another caller; none of them owns scan logic.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/desired_state.h"
#include "analysis/history.h"
#include "model/istio_facts.h"
#include "model/snapshot.h"
#include "scan/inspector.h"
#include "scan/scanner.h"

namespace ad {

// What to scan, however it was configured (flags, a flags file). Plain data.
struct EngineConfig {
  DiscoveryOptions discovery;
  int workers = 2;
  std::string node_name;  // default: $NODE_NAME, else hostname

  // Node-wide sources. ZDS: the ZDS socket (observed with sock_diag, never connected to), the
  // /proc fd inventory and ztunnel's admin; CRI names the pods.
  bool zds = true;
  std::string zds_socket{istio::kZdsSocketPath};
  std::string host_root;            // prefix of host paths when the node's / is mounted elsewhere
  std::string proc_root = "/proc";  // process fds, even when discovery skips /proc
  uint16_t ztunnel_admin_port = istio::kZtunnelAdminPort;
  std::vector<std::string> ztunnel_netns;  // extra netns where a ztunnel admin may listen
  // ztunnel's fds, memory and CLOSE_WAIT sockets against its limits (with the ZDS sources;
  // ZTUNNEL_RESOURCE_PRESSURE). Off only for benches measuring its cost.
  bool ztunnel_resources = true;
  // Reuse the last CLOSE_WAIT count of a ztunnel for this long (0: dump every scan). Each dump
  // walks the kernel's whole TCP established hash: `serve` dumps about every 15 s.
  int64_t close_wait_min_interval_ms = 0;
  bool cri = true;
  std::vector<std::string> cri_endpoints;  // empty: probe the well-known runtime sockets
  // Kubelet probe path: the host netns's conntrack, kernel-filtered to unreplied connections to
  // the probe SNAT addresses (analysis.probe_snat_v4/v6).
  bool probe_conntrack = true;
  size_t probe_conntrack_max_entries = 1024;
  // Reuse the last conntrack read for this long (0: read every scan). Each dump walks the kernel's
  // whole conntrack hash, shared by all netns (~10 ms CPU on a loaded 2-core VM): `serve` reads
  // it at most every 15 s instead of every poll.
  int64_t probe_conntrack_min_interval_ms = 0;
  // CNI chain group. The CNI config directory, a host path under host_root; empty:
  // not read (--cni-conf-dir off). Given (--cni-conf-dir DIR): read as is. Otherwise the
  // directory the runtime reports comes first (CRI Status verbose), and this one is read only
  // when it exists and holds a config file; without either the chain is not judged.
  std::string cni_conf_dir = "/etc/cni/net.d";
  bool cni_conf_dir_given = false;
  // The nftables userspace check (version, JSON support, a probe in a throwaway netns).
  bool nft_userspace = true;

  AnalysisOptions analysis;
  // Desired state (the Kubernetes API source's pods against their netns): excluded namespaces and
  // the enrollment grace. Judged only in steps that have a Kubernetes view (Engine::set_kube_view).
  DesiredOptions desired;
};

// The sources the config asks for, in dependency order: ZDS (finds istio-cni and ztunnel) ->
// ztunnel resources (their limits) -> ztunnel admin (asks those processes) -> CRI (names the pods)
// -> conntrack (probe path) -> CNI config (its gaps against the sandboxes' created_at) -> nft.
ScanOptions ComposeScan(const EngineConfig& config);

struct SourceChange {
  enum class Kind : uint8_t { kDegraded, kRecovered };
  Kind kind = Kind::kDegraded;
  SourceKind source = SourceKind::kNetns;
  std::string message;  // the first error of the source (degraded only)
};

struct EngineStep {
  NodeSnapshot snapshot;
  NodeAnalysis analysis;  // empty when !usable
  // At least one netns was readable; otherwise the scan could not run and nothing was judged.
  bool usable = false;
  // Findings opened or resolved since the previous usable step (the first step opens all).
  std::vector<FindingChange> changes;
  // Node-wide sources that started or stopped failing since the previous step.
  std::vector<SourceChange> source_changes;
  bool scan_recovered = false;  // usable again after unusable steps
  // First/last seen of every finding of this step, in analysis.findings order (empty when
  // !usable), and the engine's ring of recently resolved findings (shared, copied on change).
  std::vector<FindingRecord> finding_records;
  std::shared_ptr<const std::vector<FindingRecord>> recently_resolved;
  // Desired versus actual enrollment of the Kubernetes API's pods (the stories `explain pod`
  // prints, their findings already merged into analysis.findings); null without a Kubernetes view
  // or when !usable.
  std::shared_ptr<const DesiredAnalysis> desired;
  // What the engine remembered after this step (ages of conditions and open findings): a daemon
  // capture carries it, so that its replay ages them the same. Null on unchanged steps.
  std::shared_ptr<const HistoryMemory> memory;
  // Set by a step planned with skip_if_unchanged that found nothing new (see StepPlan): the step
  // carries no data and is not meant to be published; the engine's state is as before.
  bool unchanged = false;
  // Set on results the hub keeps only for lagging streams: the snapshot keeps its scalars, its
  // source errors and the netns that have errors only, analysis.netns and recently_resolved are
  // dropped; changes, findings and records are kept.
  bool light = false;
};

// What one step reads. The daemon's steady state re-reads only what its change sources marked
// dirty and polls the node-wide sources on their own interval.
struct StepPlan {
  bool full = true;                // read every netns and poll every node source
  std::set<uint64_t> dirty_netns;  // when !full: the netns (inodes) to read again
  bool node_sources = true;        // when !full: poll the node-wide sources too
  // When !full: read the listening sockets of every netns not in dirty_netns again (ztunnel's
  // in-pod listeners change without netfilter or routing events), or of those in `relisten`.
  // Steps with node sources also read those of the netns a ztunnel holds without listening in
  // them yet (a hand-off under way).
  bool relisten_all = false;
  std::set<uint64_t> relisten;
  // When !full: if every netns read again found what its previous read found, no netns came or
  // went, the netns records, listener owners, node-wide source data and errors equal the
  // previous step's, and no aged signal is open (ZDS history empty: nothing can age into a stall
  // and no evidence carries an age), the step is returned with `unchanged` set and without
  // analysis. Its findings would be identical.
  bool skip_if_unchanged = false;
};

class Engine {
 public:
  using Clock = std::function<int64_t()>;  // unix milliseconds
  static int64_t SystemClockMs();

  Engine(EngineConfig config, std::unique_ptr<NetnsInspector> inspector,
         Clock clock = SystemClockMs, size_t resolved_capacity = 1000);
  // With the kernel inspector (node scans read ipsets in the host netns only).
  explicit Engine(EngineConfig config);
  // The replay peer of the live engine (as falco's savefile engine is of its live ones): every
  // step judges `snapshot`, a capture's, at the time it was taken, starting from the memory of
  // the engine that took it, so it finds what that engine found. Reads nothing from the node.
  static Engine Replay(EngineConfig config, NodeSnapshot snapshot, const HistoryMemory& memory);
  Engine(Engine&&);
  Engine& operator=(Engine&&);
  ~Engine();

  EngineStep Step() { return Step(StepPlan{}); }
  // A partial step reuses the previous step's snapshot for everything not planned (a full step
  // when there is none yet). New netns found by discovery are always read.
  EngineStep Step(const StepPlan& plan);

  const std::vector<Finding>& open_findings() const { return open_findings_; }
  // What this engine remembers across steps (the ages a capture carries for its replay).
  HistoryMemory Memory() const;
  const EngineConfig& config() const { return config_; }

  // Findings of checks outside the scan (the daemon's flow checks), judged with each usable
  // step's snapshot and analysis and merged into its findings before changes and history, so
  // they open, resolve and age like any other finding.
  using ExtraFindings =
      std::function<std::vector<Finding>(const NodeSnapshot&, const NodeAnalysis&)>;
  void set_extra_findings(ExtraFindings extra) { extra_findings_ = std::move(extra); }

  // The Kubernetes API's view (engine/kube_link.h KubeLink::View), read at every step into
  // snapshot.kube and judged against the netns (analysis/desired_state.h). It must return the
  // same pointer while its data is unchanged: a quiet poll compares pointers.
  using KubeView = std::function<std::shared_ptr<const KubeSnapshot>()>;
  void set_kube_view(KubeView view) { kube_view_ = std::move(view); }

 private:
  void JudgeDesired(EngineStep& step);

  EngineConfig config_;
  ScanOptions scan_;
  std::unique_ptr<NetnsInspector> inspector_;
  Clock clock_;
  ExtraFindings extra_findings_;
  KubeView kube_view_;
  History history_;
  History desired_history_;  // the desired-state conditions' own ages (AnalyzeDesired)
  // The last analysed step judged a pod still in its grace period: time alone will change its
  // findings, so a quiet poll is not skipped.
  bool desired_waiting_ = false;
  FindingHistory finding_history_;
  std::shared_ptr<const std::vector<FindingRecord>> recently_resolved_;
  std::vector<Finding> open_findings_;
  std::optional<NodeSnapshot> last_snapshot_;  // what a partial step reuses
  std::optional<NodeSnapshot> replay_;         // a replay engine's input (Replay)
  // What partial steps' discovery reuses (sources/netns/discovery.h, kept out of this header).
  std::unique_ptr<DiscoveryCache> discovery_cache_;
  bool last_usable_ = false;
  std::map<SourceKind, std::string> degraded_;
  bool scan_failing_ = false;
};

// Netns a ztunnel holds (ZDS handed them over) without an owned ztunnel listener on the HBONE
// port. ztunnel opens its in-pod listeners moments after the hand-off and nothing announces them
// (no netfilter or routing event): steps with node sources read these netns's listeners again,
// so a hand-off completes in the published result within a poll or two, not at a resync. Empty
// on a healthy node. Pure.
std::set<uint64_t> AwaitingListeners(const NodeSnapshot& snapshot);

// True when at least one netns could be read.
bool ScanUsable(const NodeSnapshot& snapshot);

}  // namespace ad
