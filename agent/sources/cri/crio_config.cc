#include "sources/cri/crio_config.h"

#include "sources/cri/runtime_status.h"
#include "sources/ztunnel/http_get.h"

namespace ad::cri {

Result<std::string> ReadCrioNetworkDir(const std::string& socket_path,
                                       std::chrono::milliseconds timeout) {
  ztunnel::HttpGetRequest request;
  request.unix_socket = socket_path;
  request.path = "/config";
  ztunnel::HttpGetOptions options;
  options.connect_timeout = timeout;
  options.total_timeout = timeout;
  options.max_response_bytes = kMaxCrioConfigBytes + (64 << 10);
  Result<ztunnel::HttpResponse> response = ztunnel::HttpGet(request, options);
  if (!response.ok()) return SourceError{SourceKind::kCri, response.error().message};
  if (response->status != 200) {
    return SourceError{SourceKind::kCri, "GET /config on " + socket_path + ": HTTP " +
                                             std::to_string(response->status)};
  }
  return ParseCrioNetworkDir(response->body);
}

}  // namespace ad::cri
