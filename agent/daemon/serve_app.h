// The node daemon as one object (`serve`): the engine's loop (Daemon), the gRPC API, the
// /metrics and /healthz endpoint, the eBPF flow monitor with its findings composed into every
// scan, the mesh-bypass netns feed and the metrics feeds. It owns their threads and tears them
// all down on one path, whether it ran or failed to start. The command line fills the options;
// signals reach it through Stop().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/api_server.h"
#include "daemon/daemon.h"
#include "daemon/flow_monitor.h"
#include "engine/kube_link.h"
#include "flows/flow_hub.h"
#include "flows/flow_joins.h"
#include "metrics/http_server.h"
#include "metrics/metrics_endpoint.h"
#include "metrics/metrics_exporter.h"

namespace ad {

struct ServeAppOptions {
  DaemonOptions daemon;  // its extra_findings and step hooks are the app's own
  LogFormat log_format = LogFormat::kText;
  bool flows = true;  // run the eBPF flow tracer (FlowMonitor)
  FlowMonitorOptions flow;
  FlowFindingOptions flow_findings;
  // No unix socket and no TCP address: no API.
  api::ApiServerOptions api;
  std::optional<HttpServerOptions> metrics;  // nullopt: no /metrics endpoint
  MetricsOptions metrics_options;
  // The Kubernetes API source (desired state); off: enabled = false.
  KubeSourceConfig kube;
};

class ServeApp {
 public:
  // Loads the flow tracer (before the first scan, so the first report says whether tracing
  // works) and builds the daemon; nothing listens or runs yet.
  explicit ServeApp(ServeAppOptions options);
  ~ServeApp();  // the teardown, when Run() did not do it
  ServeApp(const ServeApp&) = delete;
  ServeApp& operator=(const ServeApp&) = delete;

  // Starts the metrics endpoint, the feeds and the API. On failure everything started is torn
  // down and the error is returned: a message for stderr, or "" when the daemon's log has it.
  std::optional<std::string> Start();
  // Steps the daemon until Stop(), then tears everything down. Returns the scans it ran.
  uint64_t Run();
  // Async-signal-safe: ends Run() within one wake-up.
  void Stop();

 private:
  void Teardown();
  void StartFeeds();

  ServeAppOptions options_;
  std::shared_ptr<FlowHub> flow_hub_;
  std::unique_ptr<FlowMonitor> flow_monitor_;
  std::unique_ptr<MetricsExporter> exporter_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<KubeLink> kube_;  // started by Start(), before the first step
  std::optional<MetricsEndpoint> endpoint_;
  std::unique_ptr<api::ApiServer> api_server_;
  // Each follows a hub and ends when it stops; a thread's stop request stops the hub it follows.
  std::vector<std::jthread> feeds_;
  bool torn_down_ = false;
};

}  // namespace ad
