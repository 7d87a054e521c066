// A minimal, bounded HTTP/1.1 GET client for ztunnel's loopback admin, readiness and stats ports
// (and CRI-O's inspect endpoint on its unix socket).
// The TCP socket is created inside the target network namespace (a socket stays in the netns it
// was created in), so only socket() runs under NetnsGuard; everything else uses the socket. Every
// wait has a deadline and every buffer a size limit: a hung or hostile peer costs at most
// `total_timeout` and `max_response_bytes`, never a hang or unbounded memory.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/result.h"

namespace ad::ztunnel {

struct HttpGetRequest {
  std::string netns_path;          // netns to create the socket in; empty = the calling thread's
  std::string host = "127.0.0.1";  // literal IPv4 or IPv6 address ("::1")
  uint16_t port = 0;
  std::string path = "/";
  // A unix socket to connect to instead of host:port (CRI-O's inspect endpoints); the request
  // says "Host: localhost". A path socket is reached from any netns.
  std::string unix_socket;
};

struct HttpGetOptions {
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds total_timeout{2000};  // connect + send + whole response
  size_t max_response_bytes = 16u << 20;          // raw bytes received (headers + body)
  size_t max_header_bytes = 64u << 10;
};

struct HttpResponse {
  int status = 0;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;                                          // de-chunked

  // Last header with this (lower-case) name, or "".
  std::string_view Header(std::string_view lower_name) const;
};

// GET http://<host>:<port><path> with "Connection: close". Errors (source "http") name the URL:
// "GET http://127.0.0.1:15000/config_dump: connect: Connection refused",
// "...: no response within 2000 ms", "...: response exceeds 16777216 bytes",
// "...: truncated body: got 10 of 100 bytes", "...: malformed status line \"garbage\"".
Result<HttpResponse> HttpGet(const HttpGetRequest& request, const HttpGetOptions& options = {});

// Incremental response parser (pure; used by HttpGet, tested on its own). Feed() the bytes as
// they arrive, PeerClosed() at EOF. Once the result is kDone or kError it stays there.
class HttpResponseParser {
 public:
  enum class Progress { kNeedMore, kDone, kError };

  HttpResponseParser(size_t max_response_bytes, size_t max_header_bytes);

  Progress Feed(std::string_view bytes);
  Progress PeerClosed();

  Progress progress() const { return progress_; }
  size_t bytes_received() const { return received_; }
  // Valid after kError: "truncated body: got 3 of 10 bytes".
  const std::string& error() const { return error_; }
  // errno-like classification of the error (EMSGSIZE, EPROTO).
  int error_number() const { return error_number_; }
  // Valid after kDone; moves the response out.
  HttpResponse TakeResponse() { return std::move(response_); }

 private:
  enum class Phase { kHeaders, kLengthBody, kChunkSize, kChunkData, kChunkTrailer, kUntilClose };

  Progress Advance();
  Progress ParseHeaders();
  Progress ParseChunks();
  Progress Fail(int error_number, std::string message);
  Progress Done();
  void TakeBody(size_t length);

  size_t max_response_bytes_;
  size_t max_header_bytes_;
  std::string raw_;  // received bytes not yet consumed (all of them until the body starts)
  size_t received_ = 0;
  size_t cursor_ = 0;  // parse position in raw_
  Phase phase_ = Phase::kHeaders;
  size_t content_length_ = 0;
  size_t chunk_remaining_ = 0;
  bool peer_closed_ = false;
  Progress progress_ = Progress::kNeedMore;
  std::string error_;
  int error_number_ = 0;
  HttpResponse response_;
};

}  // namespace ad::ztunnel
