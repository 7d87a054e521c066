// A client of the daemon's gRPC API (ambientdoctor.v1.AmbientDoctor) on its unix socket, used by
// report, watch and rules. Bounded: connecting and every unary call have a deadline (a hung peer
// or a socket nobody answers costs at most connect_timeout + call_timeout), messages are
// size-limited, and every failure is a value naming the socket and what went wrong, so the CLI can
// fall back to a local scan with a clear note. Never used by the daemon itself.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ambientdoctor/v1/ambient_doctor.pb.h"
#include "model/result.h"

namespace ad::client {

namespace pb = ::ambientdoctor::v1;

inline constexpr const char* kDefaultApiSocket = "/run/ambient-doctor/api.sock";

struct ClientOptions {
  std::string socket_path = kDefaultApiSocket;
  // Until the HTTP/2 connection is up (the peer answered gRPC's handshake).
  std::chrono::milliseconds connect_timeout{1000};
  // Each unary call, and the first message of a stream.
  std::chrono::milliseconds call_timeout{2000};
  int max_response_bytes = 64 * 1024 * 1024;  // the server's own response limit
  int max_request_bytes = 16 * 1024;          // requests are tiny
};

// How a call failed: error_number of the SourceError (kind kApi) is one of these, so callers can
// tell "the daemon is not usable" from "the daemon answered no".
//   connect: ENOENT no socket file, ENOTSOCK not a socket, ECONNREFUSED stale socket (nobody
//            listens), EACCES no permission, ETIMEDOUT no answer, EPROTO not a gRPC peer.
//   calls:   the gRPC status mapped: NOT_FOUND ENOENT, PERMISSION_DENIED EACCES, INVALID_ARGUMENT
//            EINVAL, DEADLINE_EXCEEDED ETIMEDOUT, UNAVAILABLE EAGAIN, anything else EPROTO.
bool IsAnsweredNo(const SourceError& call_error);  // ENOENT, EACCES, EINVAL from a call

class FindingStream;
class FlowStream;

class ApiClient {
 public:
  // Checks the socket file, probes it (a refused connect is a stale socket) and waits for the
  // gRPC connection within connect_timeout.
  static Result<std::unique_ptr<ApiClient>> Connect(const ClientOptions& options);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  Result<pb::Report> GetReport();
  Result<pb::Status> GetStatus();
  // One pod's story (the daemon may ask the Kubernetes API where a pod elsewhere runs: a longer
  // deadline than the other unary calls).
  Result<pb::PodReport> GetPod(const std::string& namespace_name, const std::string& name);
  Result<pb::NetnsRules> GetNetnsRulesByPath(const std::string& path);
  // The latest scan as capture file bytes (a larger deadline: the file can be megabytes).
  Result<std::string> GetCapture(bool redact_ips);
  // Opens WatchFindings; the first event must arrive within call_timeout.
  Result<std::unique_ptr<FindingStream>> WatchFindings();
  // Opens StreamFlows (0: every netns); the first message (the open flows) must arrive within
  // call_timeout. UNAVAILABLE (EAGAIN) when the daemon's tracer is not running, with its reason.
  Result<std::unique_ptr<FlowStream>> StreamFlows(uint32_t netns_inode = 0);

  const std::string& socket_path() const;

  struct Impl;

 private:
  explicit ApiClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A WatchFindings stream read on its own thread, so the caller can wait with a timeout (watch
// groups the events of one published result into one change set).
class FindingStream {
 public:
  enum class Read { kEvent, kIdle, kEnded };
  // kEvent: *event is the next event. kIdle: none within `wait`. kEnded: the stream is over
  // (end_error() says why: the daemon went away, shut down, or dropped the stream).
  Read Next(pb::FindingEvent* event, std::chrono::milliseconds wait);
  const SourceError& end_error() const;
  ~FindingStream();  // cancels the call and joins the reader
  FindingStream(const FindingStream&) = delete;
  FindingStream& operator=(const FindingStream&) = delete;

  struct Impl;
  explicit FindingStream(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// A StreamFlows stream read on its own thread. At most max_buffered messages wait unread; past
// that the stream ends (the caller is too slow) rather than growing without bound.
class FlowStream {
 public:
  enum class Read { kFlow, kIdle, kEnded };
  Read Next(pb::Flow* flow, std::chrono::milliseconds wait);
  const SourceError& end_error() const;
  ~FlowStream();  // cancels the call and joins the reader
  FlowStream(const FlowStream&) = delete;
  FlowStream& operator=(const FlowStream&) = delete;

  static constexpr size_t kMaxBuffered = 65536;
  struct Impl;
  explicit FlowStream(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ad::client
