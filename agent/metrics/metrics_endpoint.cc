#include "metrics/metrics_endpoint.h"

namespace ad {

HttpResponse ServeMetricsRequest(const MetricsExporter& exporter, std::string_view path) {
  if (path == "/metrics") return {200, kExpositionContentType, exporter.Exposition()};
  if (path == "/healthz") {
    const HealthVerdict health = exporter.Health();
    return {health.healthy ? 200 : 503, "text/plain; charset=utf-8", health.reason + "\n"};
  }
  return {404, "text/plain; charset=utf-8", "not found: try /metrics or /healthz\n"};
}

}  // namespace ad
