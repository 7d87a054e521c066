// The metrics HTTP endpoint: /metrics (the exporter's exposition) and /healthz (200 "ok" while
// scans are fresh, 503 with the reason otherwise) on one HttpServer. What `serve` starts:
//
//   MetricsExporter exporter(MetricsOptions{.version = kVersion});
//   std::thread feed([&] { exporter.FollowHub(hub); });  // returns after hub.Stop()
//   MetricsEndpoint endpoint(exporter, HttpServerOptions{.bind_address = flag_address});
//   Result<uint16_t> port = endpoint.Start();
#pragma once

#include <string_view>

#include "metrics/http_server.h"
#include "metrics/metrics_exporter.h"

namespace ad {

// Routing, without sockets: /metrics, /healthz, 404 for anything else.
HttpResponse ServeMetricsRequest(const MetricsExporter& exporter, std::string_view path);

class MetricsEndpoint {
 public:
  // `exporter` must outlive the endpoint.
  MetricsEndpoint(const MetricsExporter& exporter, HttpServerOptions options = {})
      : server_(std::move(options), [&exporter](std::string_view path) {
          return ServeMetricsRequest(exporter, path);
        }) {}

  Result<uint16_t> Start() { return server_.Start(); }
  void Stop() { server_.Stop(); }

 private:
  HttpServer server_;
};

}  // namespace ad
