// Prometheus metrics of the daemon. The exporter consumes PublishedResults (it never scans) plus
// the daemon's own counters, and renders the text exposition for /metrics and the verdict for
// /healthz. Every metric is node-level with a fixed label set, so the series count does not grow
// with the number of pods; per-pod series exist only with MetricsOptions::per_pod_labels.
//
// Thread safety: every method may be called from any thread. Consume() and Exposition() take one
// lock, so a scrape never sees half of a result.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/result_hub.h"
#include "flows/flow_hub.h"
#include "model/istio_facts.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace ad {

struct MetricsOptions {
  std::string version;  // ambient_doctor_build_info{version}; empty: the project version
  // One ambient_doctor_pod_redirect_state{pod,netns_inode,redirect_state} series per pod netns.
  // Off by default: it makes the series count grow with the pods of the node.
  bool per_pod_labels = false;
  // /healthz fails when the last successful (usable) scan is older than this.
  int64_t stale_after_ms = 120'000;
  uint16_t hbone_port = istio::kZtunnelInboundPort;  // client flows to it are HBONE connections
};

struct HealthVerdict {
  bool healthy = false;
  std::string reason;  // "ok", or why not (no scan yet, last scan N s old)
};

class MetricsExporter {
 public:
  using Clock = std::function<int64_t()>;  // unix milliseconds

  explicit MetricsExporter(MetricsOptions options = {}, Clock clock = nullptr);
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // Takes one published result: counts the scan by its trigger and the findings it opened, and
  // sets every gauge from it. A step that was not usable (nothing readable) counts as a scan and
  // updates the source errors, but leaves the pod and finding gauges at the last usable values.
  void Consume(const PublishedResult& result);
  // Consumes every result the hub publishes until it is stopped. Blocking: run it on its own
  // thread. Results dropped from the hub's ring before they were read are counted in
  // ambient_doctor_results_missed_total.
  void FollowHub(const ResultHub& hub);

  // Flow tracer metrics: HBONE connections by outcome and locality (counted at close), connect
  // latency (at open), HBONE flows of both ends by role (opened, closed by outcome, duration,
  // bytes, retransmits, resets; the numbers at close), open flows, lost events, availability.
  // Update events (live refreshes) are not counted. `addresses`: the node's pod IPs (same-node
  // destinations; FlowContextOf). Exported at 0 while the tracer is off.
  void ConsumeFlows(const FlowTracerStatus& status, const std::vector<FlowEvent>& events,
                    size_t open_flows, const std::set<FlowAddress>& addresses);
  // Follows `flows` until it is stopped, joining destinations against the latest result of
  // `results`. Blocking: run it on its own thread.
  void FollowFlows(const FlowHub& flows, const ResultHub& results);

  // Daemon counters. A re-read is one re-read of one or more netns by the change detector.
  void RecordReread(StepTrigger trigger, double duration_seconds);
  void RecordEventSocketOverflow();  // ENOBUFS on a netlink event socket

  // The text exposition format (version 0.0.4).
  std::string Exposition() const;
  HealthVerdict Health() const;

 private:
  struct Metrics;
  void SetKubeLocked(const EngineStep& step);
  void SetGaugesLocked(const PublishedResult& result);
  void SetCniConfDirLocked(const CniConfigState& cni);

  MetricsOptions options_;
  Clock clock_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Metrics> metrics_;
  mutable std::mutex mutex_;
  int64_t last_usable_scan_ms_ = 0;  // snapshot time of the last usable step; 0 = none yet
  uint64_t lost_events_seen_ = 0;    // the tracer's lost-event count already exported
};

// The HTTP content type of Exposition().
inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace ad
