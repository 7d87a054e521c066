#include "metrics/metrics_exporter.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <set>
#include <utility>

#include "base/agent_version.h"
#include "flows/flow_joins.h"
#include "report/redirect_state.h"

namespace ad {

namespace {

constexpr std::array<StepTrigger, 4> kTriggers = {StepTrigger::kStartup, StepTrigger::kEvent,
                                                  StepTrigger::kPoll, StepTrigger::kResync};
constexpr std::array<Backend, 3> kBackends = {Backend::kIptablesLegacy, Backend::kIptablesNft,
                                              Backend::kNft};
constexpr std::array<Severity, 3> kSeverities = {Severity::kInfo, Severity::kWarning,
                                                 Severity::kCritical};
// Hand-off states as metric label values (ZdsStateName spells them for humans).
constexpr std::array<std::pair<ZdsState, const char*>, 3> kHandoffStates = {
    {{ZdsState::kHandedOff, "handed_off"},
     {ZdsState::kPending, "pending"},
     {ZdsState::kStalled, "stalled"}}};

// Outcomes of closed HBONE connections (metric label `outcome`).
constexpr std::array<FlowOutcome, 6> kClosedOutcomes = {
    FlowOutcome::kClosed,  FlowOutcome::kRefused,     FlowOutcome::kReset,
    FlowOutcome::kTimeout, FlowOutcome::kUnreachable, FlowOutcome::kAborted};
constexpr std::array<const char*, 2> kLocalities = {"same_node", "remote"};
constexpr std::array<FlowRole, 2> kRoles = {FlowRole::kClient, FlowRole::kServer};
// HBONE connections live from milliseconds (one request) to hours (pooled, long-lived streams).
const prometheus::Histogram::BucketBoundaries kConnectionDurationBuckets = {
    0.01, 0.1, 1, 10, 60, 300, 1800, 3600, 14400};
constexpr std::array<const char*, 3> kAttachModes = {"tp_btf", "raw_tp", "tracepoint"};
// HBONE connects take ~0.1 ms on a node, a few ms across a zone, more across regions.
const prometheus::Histogram::BucketBoundaries kConnectLatencyBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 3};

// A re-read of one netns costs ~0.1-1 ms (change-detection facts); a resync of many takes longer.
const prometheus::Histogram::BucketBoundaries kRereadBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

int64_t SystemClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every source error of a snapshot, wherever the source put it.
template <typename Visit>
void ForEachSourceError(const NodeSnapshot& snapshot, Visit visit) {
  for (const SourceError& e : snapshot.errors) visit(e);
  for (const NetnsSnapshot& n : snapshot.netns) {
    for (const SourceError& e : n.errors) visit(e);
  }
  for (const SourceError& e : snapshot.zds.errors) visit(e);
  for (const ZtunnelAdminState& z : snapshot.ztunnels) {
    for (const SourceError& e : z.errors) visit(e);
  }
  for (const SourceError& e : snapshot.cri.errors) visit(e);
  for (const SourceError& e : snapshot.probe_conntrack.errors) visit(e);
  for (const SourceError& e : snapshot.cni.errors) visit(e);
  for (const SourceError& e : snapshot.nft_userspace.errors) visit(e);
  if (snapshot.kube) {
    if (auto e = KubeApiError(snapshot.kube->status)) visit(*e);
  }
}

}  // namespace

struct MetricsExporter::Metrics {
  template <typename T>
  using Family = prometheus::Family<T>;

  Family<prometheus::Gauge>* pods = nullptr;
  std::map<RedirectState, prometheus::Gauge*> pods_by_state;
  std::map<Backend, prometheus::Gauge*> pods_by_backend;
  std::map<std::pair<FindingCode, Severity>, prometheus::Gauge*> open_findings;
  std::map<FindingCode, prometheus::Counter*> findings_opened;
  prometheus::Gauge* zds_connected_ztunnels = nullptr;
  std::map<ZdsState, prometheus::Gauge*> zds_handoffs;
  prometheus::Gauge* zds_oldest_pending_age = nullptr;
  prometheus::Gauge* zds_stall = nullptr;
  prometheus::Gauge* ztunnel_ready = nullptr;
  std::map<StepTrigger, prometheus::Counter*> scans;
  std::map<StepTrigger, prometheus::Counter*> rereads;
  prometheus::Histogram* reread_duration = nullptr;
  prometheus::Gauge* last_successful_scan = nullptr;
  std::map<SourceKind, prometheus::Gauge*> source_errors;
  prometheus::Counter* event_socket_overflows = nullptr;
  prometheus::Counter* results_missed = nullptr;
  std::map<std::pair<FlowOutcome, bool>, prometheus::Counter*> hbone_connections;  // same_node
  std::map<bool, prometheus::Histogram*> hbone_connect_latency;                    // same_node
  prometheus::Gauge* flows_open = nullptr;
  // HBONE flows of either end (client: to the HBONE port, server: accepted on it), by role.
  struct RoleSeries {
    prometheus::Counter* opened = nullptr;
    std::map<FlowOutcome, prometheus::Counter*> closed;
    prometheus::Histogram* duration = nullptr;
    prometheus::Counter* bytes_sent = nullptr;
    prometheus::Counter* bytes_received = nullptr;
    prometheus::Counter* retransmits = nullptr;
    prometheus::Counter* resets_sent = nullptr;
    prometheus::Counter* resets_received = nullptr;
  };
  std::map<FlowRole, RoleSeries> hbone_by_role;
  prometheus::Counter* tracer_lost_events = nullptr;
  prometheus::Gauge* tracer_available = nullptr;
  prometheus::Gauge* bypass_netns_watched = nullptr;      // mesh-bypass mode's netns map
  prometheus::Gauge* bypass_netns_not_watched = nullptr;  // left out: the map is full
  std::map<std::string, prometheus::Gauge*> tracer_attach;
  // 1 for the CNI config directory the latest scan read, labelled with it and its origin.
  Family<prometheus::Gauge>* cni_conf_dir = nullptr;
  prometheus::Gauge* cni_conf_dir_series = nullptr;
  std::pair<std::string, std::string> cni_conf_dir_labels;  // of that series
  Family<prometheus::Gauge>* pod_redirect_state = nullptr;  // per_pod_labels only
  std::vector<prometheus::Gauge*> pod_series;
  // The Kubernetes API source: healthy, the current failure by reason, pods by desired state.
  prometheus::Gauge* kube_api_healthy = nullptr;
  std::map<KubeApiReason, prometheus::Gauge*> kube_api_degraded;
  std::map<DesiredState, prometheus::Gauge*> pods_desired;
};

MetricsExporter::MetricsExporter(MetricsOptions options, Clock clock)
    : options_(std::move(options)),
      clock_(clock ? std::move(clock) : Clock(SystemClockMs)),
      registry_(std::make_shared<prometheus::Registry>()),
      metrics_(std::make_unique<Metrics>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  prometheus::Registry& r = *registry_;
  Metrics& m = *metrics_;

  auto& pods = BuildGauge()
                   .Name("ambient_doctor_pods")
                   .Help(
                       "Pod network namespaces by redirect state (one state per netns, the "
                       "first that applies in the documented precedence).")
                   .Register(r);
  for (RedirectState s : AllRedirectStates()) {
    m.pods_by_state[s] = &pods.Add({{"redirect_state", std::string(RedirectStateName(s))}});
  }
  auto& by_backend = BuildGauge()
                         .Name("ambient_doctor_pods_by_backend")
                         .Help(
                             "Pod network namespaces holding in-pod ambient rules in the "
                             "netfilter backend (a mixed-backend pod counts in each).")
                         .Register(r);
  for (Backend b : kBackends) {
    m.pods_by_backend[b] = &by_backend.Add({{"backend", std::string(BackendName(b))}});
  }
  auto& open = BuildGauge()
                   .Name("ambient_doctor_findings")
                   .Help("Open findings of the latest usable scan by code and severity.")
                   .Register(r);
  auto& opened = BuildCounter()
                     .Name("ambient_doctor_findings_opened_total")
                     .Help("Findings opened since the agent started, by code.")
                     .Register(r);
  for (const FindingCodeInfo& info : AllFindingCodes()) {
    const std::string code(info.name);
    for (Severity s : kSeverities) {
      m.open_findings[{info.code, s}] =
          &open.Add({{"code", code}, {"severity", std::string(SeverityName(s))}});
    }
    m.findings_opened[info.code] = &opened.Add({{"code", code}});
  }
  m.zds_connected_ztunnels =
      &BuildGauge()
           .Name("ambient_doctor_zds_connected_ztunnels")
           .Help("ztunnel processes connected to istio-cni's ZDS socket (seen with sock_diag).")
           .Register(r)
           .Add({});
  auto& handoffs = BuildGauge()
                       .Name("ambient_doctor_zds_handoffs")
                       .Help("Pod network namespaces by ZDS hand-off state.")
                       .Register(r);
  for (const auto& [state, name] : kHandoffStates) {
    m.zds_handoffs[state] = &handoffs.Add({{"state", name}});
  }
  m.zds_oldest_pending_age =
      &BuildGauge()
           .Name("ambient_doctor_zds_oldest_pending_handoff_age_seconds")
           .Help("Age of the oldest pending or stalled ZDS hand-off (0 when none).")
           .Register(r)
           .Add({});
  m.zds_stall = &BuildGauge()
                     .Name("ambient_doctor_zds_stall")
                     .Help("1 while a ZDS_STALL finding is open, else 0.")
                     .Register(r)
                     .Add({});
  m.ztunnel_ready = &BuildGauge()
                         .Name("ambient_doctor_ztunnel_ready")
                         .Help(
                             "1 when at least one ztunnel reports ready on its readiness port "
                             "and none reports not ready, else 0.")
                         .Register(r)
                         .Add({});
  auto& scans = BuildCounter()
                    .Name("ambient_doctor_scans_total")
                    .Help("Engine scans published, by trigger.")
                    .Register(r);
  auto& rereads = BuildCounter()
                      .Name("ambient_doctor_netns_rereads_total")
                      .Help("Re-reads of changed network namespaces, by trigger.")
                      .Register(r);
  for (StepTrigger t : kTriggers) {
    m.scans[t] = &scans.Add({{"trigger", std::string(StepTriggerName(t))}});
    m.rereads[t] = &rereads.Add({{"trigger", std::string(StepTriggerName(t))}});
  }
  m.reread_duration = &BuildHistogram()
                           .Name("ambient_doctor_netns_reread_duration_seconds")
                           .Help("Duration of one re-read of changed network namespaces.")
                           .Register(r)
                           .Add({}, kRereadBuckets);
  m.last_successful_scan =
      &BuildGauge()
           .Name("ambient_doctor_last_successful_scan_timestamp_seconds")
           .Help("Unix time of the last scan that could read at least one netns (0: none yet).")
           .Register(r)
           .Add({});
  auto& errors = BuildGauge()
                     .Name("ambient_doctor_source_errors")
                     .Help("Source errors in the latest scan, by typed source kind.")
                     .Register(r);
  for (int k = 0; k < kSourceKindCount; ++k) {
    const auto kind = static_cast<SourceKind>(k);
    m.source_errors[kind] = &errors.Add({{"source", std::string(SourceKindName(kind))}});
  }
  m.kube_api_healthy =
      &BuildGauge()
           .Name("ambient_doctor_kube_api_healthy")
           .Help(
               "1 while the Kubernetes API source is synced and answering (desired state is "
               "judged); 0 when it is off, failing or still listing.")
           .Register(r)
           .Add({});
  auto& kube_degraded = BuildGauge()
                            .Name("ambient_doctor_kube_api_degraded")
                            .Help(
                                "1 for the reason the Kubernetes API source fails now "
                                "(no-credentials, unauthorized, forbidden, unreachable, ...).")
                            .Register(r);
  for (KubeApiReason reason :
       {KubeApiReason::kNoCredentials, KubeApiReason::kBadConfig, KubeApiReason::kUnauthorized,
        KubeApiReason::kForbidden, KubeApiReason::kThrottled, KubeApiReason::kUnreachable,
        KubeApiReason::kHung, KubeApiReason::kGarbage, KubeApiReason::kServerError}) {
    m.kube_api_degraded[reason] =
        &kube_degraded.Add({{"reason", std::string(KubeApiReasonName(reason))}});
  }
  auto& desired = BuildGauge()
                      .Name("ambient_doctor_pods_desired")
                      .Help(
                          "This node's pods (not terminal) by the enrollment Istio's predicate "
                          "wants: ambient or not_ambient. Both are 0 while the Kubernetes "
                          "API source is not judged.")
                      .Register(r);
  for (DesiredState state : {DesiredState::kAmbient, DesiredState::kNotAmbient}) {
    m.pods_desired[state] = &desired.Add({{"state", std::string(DesiredStateName(state))}});
  }
  m.cni_conf_dir = &BuildGauge()
                        .Name("ambient_doctor_cni_conf_dir_info")
                        .Help(
                            "1 for the CNI config directory CNI_CHAIN_BROKEN judges, with its "
                            "origin (flag, runtime, default; none: not judged, dir empty).")
                        .Register(r);
  m.event_socket_overflows =
      &BuildCounter()
           .Name("ambient_doctor_event_socket_overflows_total")
           .Help("ENOBUFS on a netlink event socket (events lost; each forces a resync).")
           .Register(r)
           .Add({});
  m.results_missed = &BuildCounter()
                          .Name("ambient_doctor_results_missed_total")
                          .Help(
                              "Published results the exporter never saw (dropped from the "
                              "result ring before it read them).")
                          .Register(r)
                          .Add({});
  auto& hbone = BuildCounter()
                    .Name("ambient_doctor_hbone_connections_total")
                    .Help(
                        "HBONE (:15008) client connections traced by the flow tracer, counted "
                        "when they close, by outcome and destination locality (same_node: a pod "
                        "IP of this node).")
                    .Register(r);
  auto& latency = BuildHistogram()
                      .Name("ambient_doctor_hbone_connect_latency_seconds")
                      .Help(
                          "SYN to ESTABLISHED time of traced HBONE client connections, by "
                          "destination locality.")
                      .Register(r);
  for (size_t i = 0; i < kLocalities.size(); ++i) {
    const bool same_node = i == 0;
    for (FlowOutcome outcome : kClosedOutcomes) {
      m.hbone_connections[{outcome, same_node}] = &hbone.Add(
          {{"outcome", std::string(FlowOutcomeName(outcome))}, {"locality", kLocalities[i]}});
    }
    m.hbone_connect_latency[same_node] =
        &latency.Add({{"locality", kLocalities[i]}}, kConnectLatencyBuckets);
  }
  auto& flows_opened = BuildCounter()
                           .Name("ambient_doctor_hbone_flows_opened_total")
                           .Help(
                               "HBONE flows that became established, by role (client: connected "
                               "to the HBONE port, server: accepted on it).")
                           .Register(r);
  auto& flows_closed = BuildCounter()
                           .Name("ambient_doctor_hbone_flows_closed_total")
                           .Help("HBONE flows that ended, by role and outcome.")
                           .Register(r);
  auto& duration = BuildHistogram()
                       .Name("ambient_doctor_hbone_connection_duration_seconds")
                       .Help(
                           "ESTABLISHED to close time of HBONE connections that were established, "
                           "by role, observed when they close.")
                       .Register(r);
  auto& sent = BuildCounter()
                   .Name("ambient_doctor_hbone_sent_bytes_total")
                   .Help(
                       "Data bytes sent on HBONE connections, by role, added when a connection "
                       "closes (an open connection counts at its close).")
                   .Register(r);
  auto& received = BuildCounter()
                       .Name("ambient_doctor_hbone_received_bytes_total")
                       .Help(
                           "Data bytes received on HBONE connections, by role, added when a "
                           "connection closes (an open connection counts at its close).")
                       .Register(r);
  auto& retransmits = BuildCounter()
                          .Name("ambient_doctor_hbone_retransmits_total")
                          .Help(
                              "TCP segments retransmitted on HBONE connections, by role, added "
                              "when a connection closes.")
                          .Register(r);
  auto& resets = BuildCounter()
                     .Name("ambient_doctor_hbone_resets_total")
                     .Help(
                         "TCP resets on HBONE connections, by role and direction (sent by this "
                         "end, or received), added when a connection closes.")
                     .Register(r);
  for (FlowRole role : kRoles) {
    const std::string name(FlowRoleName(role));
    Metrics::RoleSeries& series = m.hbone_by_role[role];
    series.opened = &flows_opened.Add({{"role", name}});
    for (FlowOutcome outcome : kClosedOutcomes) {
      series.closed[outcome] =
          &flows_closed.Add({{"role", name}, {"outcome", std::string(FlowOutcomeName(outcome))}});
    }
    series.duration = &duration.Add({{"role", name}}, kConnectionDurationBuckets);
    series.bytes_sent = &sent.Add({{"role", name}});
    series.bytes_received = &received.Add({{"role", name}});
    series.retransmits = &retransmits.Add({{"role", name}});
    series.resets_sent = &resets.Add({{"role", name}, {"direction", "sent"}});
    series.resets_received = &resets.Add({{"role", name}, {"direction", "received"}});
  }
  m.flows_open = &BuildGauge()
                      .Name("ambient_doctor_flows_open")
                      .Help("Flows the flow tracer sees open now (every traced port).")
                      .Register(r)
                      .Add({});
  m.tracer_lost_events = &BuildCounter()
                              .Name("ambient_doctor_flow_tracer_lost_events_total")
                              .Help("Flow tracer events lost because its ring buffer was full.")
                              .Register(r)
                              .Add({});
  m.tracer_available = &BuildGauge()
                            .Name("ambient_doctor_flow_tracer_available")
                            .Help(
                                "1 while the eBPF flow tracer is loaded and attached, else 0 "
                                "(disabled, or TRACING_UNAVAILABLE says why).")
                            .Register(r)
                            .Add({});
  auto& bypass_netns = BuildGauge()
                           .Name("ambient_doctor_flow_tracer_bypass_netns")
                           .Help(
                               "Ambient pod netns whose every connect the flow tracer follows for "
                               "MESH_BYPASS (watched), and those left out because its bounded "
                               "map is full (not_watched).")
                           .Register(r);
  m.bypass_netns_watched = &bypass_netns.Add({{"state", "watched"}});
  m.bypass_netns_not_watched = &bypass_netns.Add({{"state", "not_watched"}});
  auto& attach = BuildGauge()
                     .Name("ambient_doctor_flow_tracer_attach_info")
                     .Help("1 for the attach type the flow tracer uses, 0 for the others.")
                     .Register(r);
  for (const char* mode : kAttachModes) m.tracer_attach[mode] = &attach.Add({{"attach", mode}});
  BuildGauge()
      .Name("ambient_doctor_build_info")
      .Help("Always 1; the version of the agent is a label.")
      .Register(r)
      .Add({{"version", options_.version.empty() ? std::string(AgentVersion()) : options_.version}})
      .Set(1);
  if (options_.per_pod_labels) {
    m.pod_redirect_state = &BuildGauge()
                                .Name("ambient_doctor_pod_redirect_state")
                                .Help(
                                    "1 per pod netns, labelled with its redirect state (only "
                                    "with per-pod labels enabled).")
                                .Register(r);
  }
}

MetricsExporter::~MetricsExporter() = default;

void MetricsExporter::Consume(const PublishedResult& result) {
  std::lock_guard lock(mutex_);
  metrics_->scans[result.trigger]->Increment();
  for (const FindingChange& change : result.step.changes) {
    if (change.kind == FindingChange::Kind::kOpened) {
      metrics_->findings_opened[change.finding.code]->Increment();
    }
  }
  // A light result (the hub's older entries) has no snapshot: its counts are all it gives; the
  // gauges come from the complete latest result that follows it.
  if (result.step.light) return;
  std::map<SourceKind, int> errors;
  ForEachSourceError(result.step.snapshot, [&errors](const SourceError& e) { ++errors[e.kind]; });
  for (auto& [kind, gauge] : metrics_->source_errors) gauge->Set(errors[kind]);
  SetCniConfDirLocked(result.step.snapshot.cni);
  SetKubeLocked(result.step);
  if (!result.step.usable) return;
  last_usable_scan_ms_ = result.step.snapshot.taken_at_unix_ms;
  metrics_->last_successful_scan->Set(static_cast<double>(last_usable_scan_ms_) / 1000.0);
  SetGaugesLocked(result);
}

void MetricsExporter::SetCniConfDirLocked(const CniConfigState& cni) {
  Metrics& m = *metrics_;
  std::pair<std::string, std::string> labels;
  if (cni.collected) labels = {cni.dir, std::string(CniDirOriginName(cni.dir_origin))};
  if (m.cni_conf_dir_series != nullptr && labels == m.cni_conf_dir_labels) return;
  if (m.cni_conf_dir_series != nullptr) m.cni_conf_dir->Remove(m.cni_conf_dir_series);
  m.cni_conf_dir_series = nullptr;
  m.cni_conf_dir_labels = labels;
  if (!cni.collected) return;  // --cni-conf-dir off: no series
  m.cni_conf_dir_series = &m.cni_conf_dir->Add({{"dir", labels.first}, {"source", labels.second}});
  m.cni_conf_dir_series->Set(1);
}

void MetricsExporter::SetKubeLocked(const EngineStep& step) {
  Metrics& m = *metrics_;
  const KubeApiStatus status = step.snapshot.kube ? step.snapshot.kube->status : KubeApiStatus{};
  m.kube_api_healthy->Set(status.healthy() ? 1 : 0);
  for (auto& [reason, gauge] : m.kube_api_degraded) {
    gauge->Set(status.enabled && status.reason == reason ? 1 : 0);
  }
  DesiredCounts counts;
  if (step.desired && step.desired->judged) counts = CountDesired(*step.desired);
  m.pods_desired[DesiredState::kAmbient]->Set(static_cast<double>(counts.ambient));
  m.pods_desired[DesiredState::kNotAmbient]->Set(static_cast<double>(counts.not_ambient));
}

void MetricsExporter::SetGaugesLocked(const PublishedResult& result) {
  Metrics& m = *metrics_;
  const NodeSnapshot& snapshot = result.step.snapshot;
  const NodeAnalysis& analysis = result.step.analysis;

  std::map<RedirectState, int> by_state;
  std::map<Backend, int> by_backend;
  std::map<ZdsState, int> by_handoff;
  for (prometheus::Gauge* series : m.pod_series) m.pod_redirect_state->Remove(series);
  m.pod_series.clear();
  std::set<uint64_t> out_of_mesh;
  if (result.step.desired) out_of_mesh = OutOfMeshNetns(*result.step.desired);
  for (const NetnsClassification& netns : analysis.netns) {
    const std::optional<RedirectState> state =
        ClassifyRedirectState(netns, analysis.findings, &out_of_mesh);
    if (!state) continue;
    ++by_state[*state];
    for (Backend b : netns.ambient_backends) ++by_backend[b];
    ++by_handoff[netns.zds_state];
    if (m.pod_redirect_state != nullptr) {
      const std::string pod = netns.pod.empty() ? netns.netns_path : netns.pod;
      m.pod_series.push_back(
          &m.pod_redirect_state->Add({{"pod", pod},
                                      {"netns_inode", std::to_string(netns.netns_inode)},
                                      {"redirect_state", std::string(RedirectStateName(*state))}}));
      m.pod_series.back()->Set(1);
    }
  }
  for (auto& [state, gauge] : m.pods_by_state) gauge->Set(by_state[state]);
  for (auto& [backend, gauge] : m.pods_by_backend) gauge->Set(by_backend[backend]);
  for (auto& [state, gauge] : m.zds_handoffs) gauge->Set(by_handoff[state]);

  std::map<std::pair<FindingCode, Severity>, int> open;
  int64_t oldest_pending_ms = 0;
  bool stall = false;
  for (const Finding& f : analysis.findings) {
    ++open[{f.code, f.severity}];
    if (f.code == FindingCode::kZdsStall) stall = true;
    if ((f.code == FindingCode::kZdsPending || f.code == FindingCode::kZdsStall) &&
        f.since_unix_ms > 0) {
      oldest_pending_ms = std::max(oldest_pending_ms, snapshot.taken_at_unix_ms - f.since_unix_ms);
    }
  }
  for (auto& [key, gauge] : m.open_findings) gauge->Set(open[key]);
  m.zds_oldest_pending_age->Set(static_cast<double>(oldest_pending_ms) / 1000.0);
  m.zds_stall->Set(stall ? 1 : 0);

  // A ztunnel is connected when a process of the ztunnel role owns a ZDS client socket.
  std::set<int> ztunnel_pids;
  for (const ProcessNetnsFds& p : snapshot.processes) {
    if (p.role == ProcessRole::kZtunnel) ztunnel_pids.insert(p.pid);
  }
  std::set<int> connected;
  for (const UnixSocket& client : snapshot.zds.clients) {
    for (int pid : client.owner_pids) {
      if (ztunnel_pids.contains(pid)) connected.insert(pid);
    }
  }
  m.zds_connected_ztunnels->Set(static_cast<double>(connected.size()));

  bool any_ready = false;
  bool any_not_ready = false;
  for (const ZtunnelAdminState& z : snapshot.ztunnels) {
    if (z.ready.has_value()) (*z.ready ? any_ready : any_not_ready) = true;
  }
  m.ztunnel_ready->Set(any_ready && !any_not_ready ? 1 : 0);
}

void MetricsExporter::FollowHub(const ResultHub& hub) {
  uint64_t last = 0;
  for (;;) {
    // Results and the hub's stop wake it; an idle daemon never does.
    ResultHub::Since since = hub.WaitSince(last, std::chrono::seconds(60));
    if (!since.results.empty()) {
      const uint64_t first = since.results.front()->sequence;
      // Sequence numbers are dense, so a jump is exactly what the ring dropped unread.
      if (first > last + 1) {
        std::lock_guard lock(mutex_);
        metrics_->results_missed->Increment(static_cast<double>(first - last - 1));
      }
      for (const auto& result : since.results) Consume(*result);
      last = since.results.back()->sequence;
    }
    if (since.stopped) return;
  }
}

void MetricsExporter::ConsumeFlows(const FlowTracerStatus& status,
                                   const std::vector<FlowEvent>& events, size_t open_flows,
                                   const std::set<FlowAddress>& addresses) {
  std::lock_guard lock(mutex_);
  Metrics& m = *metrics_;
  for (const FlowEvent& event : events) {
    const Flow& flow = event.flow;
    // Live refreshes of open flows: their numbers count once, at close.
    if (event.kind == FlowEventKind::kUpdate) continue;
    // The HBONE port is the remote end of a client socket and the local end of a server one.
    const uint16_t hbone_end =
        flow.role == FlowRole::kClient ? flow.tuple.dst_port : flow.tuple.src_port;
    if (hbone_end != options_.hbone_port) continue;
    Metrics::RoleSeries& by_role = m.hbone_by_role[flow.role];
    if (event.kind == FlowEventKind::kOpen) {
      // A connect seen while connecting is reopened once established: count the established one.
      if (flow.outcome == FlowOutcome::kOpen) by_role.opened->Increment();
    } else {
      if (auto it = by_role.closed.find(flow.outcome); it != by_role.closed.end()) {
        it->second->Increment();
      }
      if (flow.established_unix_ns != 0 && flow.ended_unix_ns > flow.established_unix_ns) {
        by_role.duration->Observe(
            static_cast<double>(flow.ended_unix_ns - flow.established_unix_ns) / 1e9);
      }
      by_role.bytes_sent->Increment(static_cast<double>(flow.bytes_sent));
      by_role.bytes_received->Increment(static_cast<double>(flow.bytes_received));
      by_role.retransmits->Increment(flow.retransmits);
      by_role.resets_sent->Increment(flow.resets_sent);
      by_role.resets_received->Increment(flow.resets_received);
    }
    if (flow.role != FlowRole::kClient) continue;
    const bool same_node = addresses.contains(flow.tuple.dst);
    if (event.kind == FlowEventKind::kOpen) {
      if (auto us = flow.ConnectLatencyUs()) {
        m.hbone_connect_latency[same_node]->Observe(static_cast<double>(*us) / 1e6);
      }
      continue;
    }
    if (auto it = m.hbone_connections.find({flow.outcome, same_node});
        it != m.hbone_connections.end()) {
      it->second->Increment();
    }
  }
  m.flows_open->Set(static_cast<double>(open_flows));
  m.tracer_available->Set(status.available ? 1 : 0);
  m.bypass_netns_watched->Set(static_cast<double>(status.bypass_netns));
  m.bypass_netns_not_watched->Set(static_cast<double>(status.bypass_netns_not_watched));
  for (auto& [mode, gauge] : m.tracer_attach) gauge->Set(status.attach_mode == mode ? 1 : 0);
  if (status.lost_events > lost_events_seen_) {
    m.tracer_lost_events->Increment(static_cast<double>(status.lost_events - lost_events_seen_));
    lost_events_seen_ = status.lost_events;
  }
}

void MetricsExporter::FollowFlows(const FlowHub& flows, const ResultHub& results) {
  uint64_t last = flows.Latest().sequence;
  uint64_t joined_sequence = 0;  // the result `addresses` came from
  std::set<FlowAddress> addresses;
  for (;;) {
    // Events and the hub's stop wake it; the timeout only refreshes the tracer's status.
    FlowHub::Since since = flows.WaitSince(last, std::chrono::milliseconds(5000));
    if (const auto latest = results.Latest();
        latest && latest->sequence != joined_sequence && !latest->step.light) {
      addresses = FlowContextOf(latest->step.snapshot, latest->step.analysis.netns).node_addresses;
      joined_sequence = latest->sequence;
    }
    // Past a gap the counts miss what the ring dropped; the tracer's own losses are counted.
    if (since.gap) since.last_sequence = flows.Latest().sequence;
    ConsumeFlows(flows.status(), since.events, flows.Latest().view->open.size(), addresses);
    last = since.last_sequence;
    if (since.stopped) return;
  }
}

void MetricsExporter::RecordReread(StepTrigger trigger, double duration_seconds) {
  std::lock_guard lock(mutex_);
  metrics_->rereads[trigger]->Increment();
  metrics_->reread_duration->Observe(duration_seconds);
}

void MetricsExporter::RecordEventSocketOverflow() {
  std::lock_guard lock(mutex_);
  metrics_->event_socket_overflows->Increment();
}

std::string MetricsExporter::Exposition() const {
  std::lock_guard lock(mutex_);
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

HealthVerdict MetricsExporter::Health() const {
  int64_t last = 0;
  {
    std::lock_guard lock(mutex_);
    last = last_usable_scan_ms_;
  }
  if (last == 0) return {false, "no successful scan yet"};
  const int64_t age_ms = clock_() - last;
  if (age_ms > options_.stale_after_ms) {
    return {false, "last successful scan " + std::to_string(age_ms / 1000) +
                       " s ago (stale after " + std::to_string(options_.stale_after_ms / 1000) +
                       " s)"};
  }
  return {true, "ok"};
}

}  // namespace ad
