// GET requests to the Kubernetes API over HTTPS with libcurl: TLS verified against the configured
// CA, the bearer token read fresh for every request (and never logged: curl's verbose output is
// off and error texts carry no headers), HTTP/1.1 so that one watch is one connection. There is no
// other method: the source never writes.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "model/kube.h"
#include "sources/kube/kube_config.h"

namespace ad::kube {

struct HttpLimits {
  std::chrono::milliseconds connect_timeout{10000};
  // The whole exchange (0: none, for watches ended by timeoutSeconds and by `idle`).
  std::chrono::milliseconds total{0};
  // No byte received for this long: the server hung.
  std::chrono::milliseconds idle{60000};
  size_t max_error_body = 64u << 10;
};

struct HttpOutcome {
  int http_status = 0;  // 0: no HTTP answer
  // Transport failure (kUnreachable, kHung), or kNone when an HTTP answer came (whatever its
  // status) or the body callback stopped the transfer.
  KubeApiReason transport = KubeApiReason::kNone;
  std::string error;             // transport failure in words
  int retry_after_seconds = -1;  // Retry-After (delta seconds) of a 429/503
  std::string error_body;        // body of a non-200 answer (bounded)
  bool stopped = false;          // the body callback or the stop flag ended it
};

class KubeHttp {
 public:
  // `stop` ends any transfer in progress when it becomes true and Interrupt() is called.
  KubeHttp(KubeApiConfig config, const std::atomic<bool>* stop);
  ~KubeHttp();
  KubeHttp(const KubeHttp&) = delete;
  KubeHttp& operator=(const KubeHttp&) = delete;

  // GET server + path_and_query. The body of a 200 answer goes to `on_body` as it arrives
  // (returning false stops the transfer); other bodies are kept in the outcome.
  // `on_ok`, when set, is called once the header block of a 200 answer has arrived, before any
  // body byte (a watch is answering from then on, though its first event may be a minute away).
  HttpOutcome Get(const std::string& path_and_query,
                  const std::function<bool(std::string_view)>& on_body, const HttpLimits& limits,
                  const std::function<void()>& on_ok = {});

  const KubeApiConfig& config() const { return config_; }
  // Wakes a Get() in progress so it sees the stop flag; thread-safe.
  void Interrupt();

 private:
  struct Transfer;
  KubeApiConfig config_;
  const std::atomic<bool>* stop_;
  std::string last_token_;          // kept when a rotated token file is briefly unreadable
  int Perform(Transfer& transfer);  // a CURLcode
  void* curl_ = nullptr;            // CURL*, reused so connections are kept alive between requests
  void* multi_ = nullptr;           // CURLM*, driving it (and holding the connection cache)
};

// Percent-encodes a query parameter value (RFC 3986 unreserved characters stay).
std::string QueryEscape(std::string_view value);

}  // namespace ad::kube
