// A small HTTP/1.x server for /metrics and /healthz: one thread, non-blocking sockets, poll.
// Hostile or slow clients cannot stall it: every request is bounded in size, every connection has
// a deadline (reading and writing), the connection count is capped, and writes never block, so a
// client that never reads only holds its own connection until its deadline. Every response closes
// the connection (scrapers do not need keep-alive).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad {

// Outside Istio's 15000-15099 (ztunnel, Envoy), kubelet's 10248/10250/10255, kube-proxy's
// 10249/10256 and node_exporter's 9100, which share the node's network namespace with a
// hostNetwork DaemonSet.
inline constexpr uint16_t kDefaultMetricsPort = 9977;

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct HttpServerOptions {
  std::string bind_address = "0.0.0.0";  // IPv4 or IPv6 literal ("::", "127.0.0.1")
  uint16_t port = kDefaultMetricsPort;   // 0: any free port (tests)
  size_t max_request_bytes = 8192;       // request line + headers; larger gets 431
  int connection_timeout_ms = 5000;      // whole connection, from accept to last byte written
  int max_connections = 32;              // one more closes the oldest connection
};

class HttpServer {
 public:
  // Called on the server thread for every well-formed GET/HEAD; `path` excludes the query.
  using Handler = std::function<HttpResponse(std::string_view path)>;

  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the server thread. Returns the bound port.
  Result<uint16_t> Start();
  // Wakes the thread, closes every connection and joins. Idempotent.
  void Stop();

 private:
  void Run();

  HttpServerOptions options_;
  Handler handler_;
  UniqueFd listener_;
  UniqueFd wake_;  // eventfd: Stop() writes it
  std::thread thread_;
};

// The standard reason phrase of the statuses the server uses ("OK", "Not Found", ...).
std::string_view HttpReasonPhrase(int status);

}  // namespace ad
