#include "daemon/serve_app.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <stop_token>
#include <utility>

#include "base/thread_name.h"
#include "daemon/bypass_feed.h"
#include "scan/netns_read.h"

namespace ad {
namespace {

// gRPC's own log lines (e.g. a refused TLS handshake) at debug level, in the daemon's format.
std::atomic<LogFormat> g_grpc_log_format{LogFormat::kText};
void LogGrpcLine(std::string_view message) {
  spdlog::debug("{}", NoteLine("grpc: " + std::string(message), g_grpc_log_format.load()));
}

// GetNetnsRules: a netns by path, or by inode through the latest snapshot, read now on a worker
// thread (setns happens on threads made for it, never on a gRPC thread).
api::NetnsReader NetnsReaderOf(std::shared_ptr<const ResultHub> hub) {
  return [hub](const api::NetnsQuery& query) -> Result<NetnsSnapshot> {
    if (!query.path.empty()) return ReadNetnsAtPathOnWorker(query.path);
    const auto latest = hub->Latest();
    if (latest) {
      for (const NetnsSnapshot& netns : latest->step.snapshot.netns) {
        if (netns.netns.inode == query.inode) return ReadNetnsOnWorker(netns.netns);
      }
    }
    return SourceError{SourceKind::kNetns,
                       "no netns with inode " + std::to_string(query.inode) + " in the latest scan",
                       ENOENT};
  };
}

// Mesh-bypass mode: the tracer watches the netns each published scan finds ambient.
void FeedBypassNetns(const ResultHub& results, FlowMonitor& monitor, LogFormat format) {
  bool overflowing = false;
  FollowResultsIntoBypassNetns(results, [&](const std::vector<uint32_t>& inodes) {
    const auto state = monitor.SetBypassNetns(inodes);
    if (!state) return;
    if (!state->ok()) {
      spdlog::warn("{}", NoteLine("mesh-bypass netns map: " + state->error().message, format));
      return;
    }
    const BypassNetnsState& now = state->value();
    if (now.not_watched > 0 && !overflowing) {
      spdlog::warn("{}", NoteLine("mesh-bypass netns map full: " + std::to_string(now.not_watched) +
                                      " ambient netns not watched (" + std::to_string(now.watched) +
                                      " watched): MESH_BYPASS misses their connections",
                                  format));
    }
    overflowing = now.not_watched > 0;
  });
}

}  // namespace

ServeApp::ServeApp(ServeAppOptions options)
    : options_(std::move(options)), flow_hub_(std::make_shared<FlowHub>()) {
  const LogFormat format = options_.log_format;
  if (options_.flows) {
    flow_monitor_ = std::make_unique<FlowMonitor>(options_.flow, flow_hub_);
    const FlowTracerStatus tracer = flow_hub_->status();
    if (tracer.available) {
      spdlog::info("{}", NoteLine("flow tracer attached (" + tracer.attach_mode + ")", format));
    } else {
      spdlog::warn("{}", NoteLine("flow tracer unavailable: " + tracer.reason, format));
    }
  }
  exporter_ = std::make_unique<MetricsExporter>(options_.metrics_options);
  DaemonOptions daemon = options_.daemon;
  daemon.extra_findings = FlowFindingSource(flow_hub_, options_.flow_findings);
  daemon.on_step = [exporter = exporter_.get()](StepTrigger trigger, double seconds,
                                                size_t netns_read) {
    if (trigger != StepTrigger::kStartup && netns_read > 0)
      exporter->RecordReread(trigger, seconds);
  };
  daemon.on_event_overflow = [exporter = exporter_.get()] {
    exporter->RecordEventSocketOverflow();
  };
  // Set before Run() reads it (Start() runs first, on the same thread).
  daemon.kube_view = [this]() -> std::shared_ptr<const KubeSnapshot> {
    return kube_ ? kube_->View() : nullptr;
  };
  daemon_ = std::make_unique<Daemon>(std::move(daemon));
}

ServeApp::~ServeApp() { Teardown(); }

void ServeApp::Stop() { daemon_->Stop(); }

// A feed follows a hub until it stops; its stop request stops that hub, so the thread ends.
void ServeApp::StartFeeds() {
  ResultHub& results = daemon_->hub();
  MetricsExporter& exporter = *exporter_;
  feeds_.emplace_back([&results, &exporter](std::stop_token stop) {
    NameThisThread("ad-metrics");
    std::stop_callback end(stop, [&results] { results.Stop(); });
    exporter.FollowHub(results);
  });
  if (flow_monitor_ && flow_monitor_->available() && options_.flow.tracer.watch_bypass_netns) {
    feeds_.emplace_back([&results, monitor = flow_monitor_.get(),
                         format = options_.log_format](std::stop_token stop) {
      NameThisThread("ad-bypass-feed");
      std::stop_callback end(stop, [&results] { results.Stop(); });
      FeedBypassNetns(results, *monitor, format);
    });
  }
  feeds_.emplace_back([&results, &exporter, flows = flow_hub_](std::stop_token stop) {
    NameThisThread("ad-flow-metrics");
    std::stop_callback end(stop, [&results, &flows] {
      flows->Stop();
      results.Stop();
    });
    exporter.FollowFlows(*flows, results);
  });
}

std::optional<std::string> ServeApp::Start() {
  const LogFormat format = options_.log_format;
  if (options_.metrics) {
    endpoint_.emplace(*exporter_, *options_.metrics);
    Result<uint16_t> bound = endpoint_->Start();
    if (!bound.ok()) {
      Teardown();
      return "metrics endpoint: " + bound.error().message;
    }
    spdlog::info("{}", NoteLine("metrics on " + options_.metrics->bind_address + ":" +
                                    std::to_string(*bound) + " (/metrics, /healthz)",
                                format));
  }
  StartFeeds();
  kube_ = KubeLink::Start(options_.kube, [daemon = daemon_.get()] { daemon->KubeChanged(); });
  if (const auto view = kube_->View(); !view->status.enabled) {
    spdlog::info("{}", NoteLine(view->status.message, format));
  } else if (view->status.reason != KubeApiReason::kNone) {
    spdlog::warn("{}", NoteLine("Kubernetes API source: " + view->status.message +
                                    "; desired state (POD_NOT_ENROLLED, explain pod) is not judged",
                                format));
  } else {
    spdlog::info("{}", NoteLine("Kubernetes API source: " + view->status.server + ", node " +
                                    view->status.node_name,
                                format));
  }
  // gRPC's lines (API server, CRI client) must not break the daemon's log format.
  g_grpc_log_format = format;
  api::SetGrpcLogSink(LogGrpcLine);
  const api::ApiServerOptions& api = options_.api;
  if (api.socket_path.empty() && api.tcp_address.empty()) return std::nullopt;
  auto started = api::ApiServer::Start(
      api, daemon_->shared_hub(), NetnsReaderOf(daemon_->shared_hub()), flow_hub_,
      [kube = kube_.get()](const std::string& namespace_name, const std::string& name) {
        return kube->Locate(namespace_name, name);
      });
  if (!started.ok()) {
    spdlog::error("{}", NoteLine("gRPC API: " + started.error().message, format));
    Teardown();
    return "";
  }
  api_server_ = std::move(*started);
  if (!api.socket_path.empty()) {
    spdlog::info("{}", NoteLine("gRPC API on unix:" + api.socket_path, format));
  }
  if (!api.tcp_address.empty()) {
    // The bound port: the one chosen when the address asked for port 0.
    std::string note = "gRPC API on " + api.tcp_address.substr(0, api.tcp_address.rfind(':')) +
                       ":" + std::to_string(api_server_->tcp_port()) + " (TLS";
    note += api.tls.client_ca_file.empty() ? ")" : ", client certificates required)";
    spdlog::info("{}", NoteLine(note, format));
  }
  return std::nullopt;
}

uint64_t ServeApp::Run() {
  spdlog::info("{}", NoteLine("serving", options_.log_format));
  daemon_->Run(options_.log_format);  // stops the hub when it returns: feeds and streams end too
  Teardown();
  return daemon_->steps();
}

void ServeApp::Teardown() {
  if (std::exchange(torn_down_, true)) return;
  if (kube_) kube_->Stop();  // its threads call into the daemon
  daemon_->Stop();
  daemon_->hub().Stop();
  flow_hub_->Stop();  // flow streams end too
  if (flow_monitor_) flow_monitor_->Stop();
  feeds_.clear();  // each: stop request, then join
  if (api_server_) api_server_->Shutdown();
  if (endpoint_) endpoint_->Stop();
}

}  // namespace ad
