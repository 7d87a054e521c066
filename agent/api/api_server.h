// The gRPC API (ambientdoctor.v1.AmbientDoctor) over a unix socket and, optionally, TCP with TLS
// (only with TLS; optionally requiring client certificates), reading a ResultHub: outputs
// never scan, so GetReport and GetStatus answer from the latest published result, and
// WatchFindings follows the hub; StreamFlows follows the flow hub (when the daemon traces). Only
// GetNetnsRules reads the kernel, through an injected reader.
//
// Also served: grpc.health.v1 (SERVING) and server reflection. Limits: request size, response
// size, concurrent streams (one count over both listeners); a stream whose client falls behind
// the hub's ring is ended with RESOURCE_EXHAUSTED (or cancelled when it is stuck in a write);
// publishing never waits for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "engine/kube_link.h"
#include "engine/result_hub.h"
#include "flows/flow_hub.h"
#include "model/result.h"
#include "model/snapshot.h"

namespace ad::api {

inline constexpr const char* kDefaultSocketPath = "/run/ambient-doctor/api.sock";

// PEM files of the TCP listener. Read and checked once, at Start.
struct ApiTlsFiles {
  std::string cert_file;       // the server's certificate chain, leaf first
  std::string key_file;        // its private key (unencrypted)
  std::string client_ca_file;  // when set: clients must present a certificate signed by it
};

struct ApiServerOptions {
  // Its directory is created 0700; socket 0600. Empty: no unix listener (then tcp_address).
  std::string socket_path = kDefaultSocketPath;
  // "IPV4:PORT" or "[IPV6]:PORT" (literals; port 0 picks a free one): a TCP listener, which
  // requires `tls`. Empty: none.
  std::string tcp_address;
  ApiTlsFiles tls;
  int max_request_bytes = 16 * 1024;          // requests are tiny; larger ones are rejected
  int max_response_bytes = 64 * 1024 * 1024;  // a report of thousands of netns fits
  int max_streams = 32;                       // WatchFindings + StreamFlows, all clients
  // A connection that has not finished its (TLS and HTTP/2) handshake by then is closed, so idle
  // or garbage peers of the TCP port do not hold connections for gRPC's default 120 s.
  std::chrono::milliseconds handshake_timeout{10000};
  // How often a stream looks at its deadline and cancellation while the hub is quiet.
  std::chrono::milliseconds stream_poll{100};
  // A stream whose write has not completed for this long (the client stopped reading) is
  // cancelled, even before the hub's ring has moved past it.
  std::chrono::milliseconds stalled_write_timeout{10000};
  std::string version = "dev";
  std::string node_name;
  // The daemon's scan flags as `report --from` takes them (GetCapture's manifest).
  std::vector<std::string> capture_flags;
};

// Which netns GetNetnsRules asks for: an nsfs inode or a path (exactly one set).
struct NetnsQuery {
  uint64_t inode = 0;
  std::string path;
};
// Reads one netns now (on the caller's thread; the reader does its own worker/NetnsGuard work).
using NetnsReader = std::function<Result<NetnsSnapshot>(const NetnsQuery&)>;

// GetPod, for a pod this node does not list: where the Kubernetes API says it runs
// (KubeLink::Locate). Unset: GetPod says the API could not be asked.
using PodLocator =
    std::function<PodLocation(const std::string& namespace_name, const std::string& name)>;

struct ApiServerCounters {
  int active_streams = 0;
  uint64_t streams_dropped = 0;  // ended with RESOURCE_EXHAUSTED or cancelled as stuck
  uint64_t streams_refused = 0;  // over max_streams
};

class ApiServer {
 public:
  // Checks the TCP address and TLS files, prepares the socket path (see README "gRPC API"), binds
  // and starts serving. Errors: TCP without TLS, a malformed address, a TLS file that is
  // unreadable or not PEM of the expected kind, a key that does not match the certificate; the
  // socket directory cannot be created or written, the path is a non-socket file, another server
  // answers on it; an address in use or that gRPC could not bind.
  static Result<std::unique_ptr<ApiServer>> Start(ApiServerOptions options,
                                                  std::shared_ptr<const ResultHub> hub,
                                                  NetnsReader netns_reader,
                                                  std::shared_ptr<const FlowHub> flows = nullptr,
                                                  PodLocator pod_locator = {});
  ~ApiServer();  // Shutdown() with a short grace
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Ends streams (they get CANCELLED or their final status), stops accepting and removes the
  // socket file. Idempotent.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(500));

  const std::string& socket_path() const;
  // The bound TCP port (the chosen one when tcp_address asked for port 0); 0 without TCP.
  int tcp_port() const;
  ApiServerCounters counters() const;

  struct Impl;

 private:
  explicit ApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Where gRPC's own log lines go (process-wide; call before starting servers). gRPC logs each
// refused TLS handshake, so a TCP listener lets any peer add lines; the daemon sends them to its
// log at debug level, in its log format. Without a sink they go to stderr as gRPC prints them.
using GrpcLogSink = void (*)(std::string_view message);
void SetGrpcLogSink(GrpcLogSink sink);

// Checks and prepares `socket_path` for binding (exposed for tests): creates a missing directory
// 0700, removes a stale socket nobody answers on; errors for everything else.
Status PrepareSocketPath(const std::string& socket_path);

// The PEM material of a TLS listener, checked (exposed for tests): certificates parse, the key
// parses and matches the leaf certificate, the client CA holds at least one certificate.
struct TlsMaterial {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;  // empty: no client certificates requested
};
Result<TlsMaterial> LoadTlsMaterial(const ApiTlsFiles& files);

}  // namespace ad::api
