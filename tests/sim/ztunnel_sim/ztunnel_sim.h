// ztunnel-sim: ztunnel's side of ZDS, wire-faithful (facts: zds-and-ztunnel.md §2.3, §5, §7).
// Connects to the ZDS socket, says ZdsHello{V1}, and for every AddWorkload enters the pod netns
// on a dedicated thread to open ztunnel's in-pod listeners (TCP 15001/15006/15008 on the
// wildcard address, DNS 15053 TCP+UDP on localhost: 127.0.0.1, and ::1 when IPv6 is enabled in
// the pod netns; all SO_MARK 0x539 + SO_REUSEPORT), keeping
// them and the netns fd open. Exposes ztunnel's admin, readiness and stats views.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"

namespace ad::sim {

enum class ZtunnelFault : uint8_t {
  kNone,
  kNoListeners,  // acks Adds but opens no listeners
  kNack,         // Ack{error: "failure to start proxy : ..."}, pod stays Pending, retried every 5 s
  kCrash,        // exits after acking the snapshot
  kNoDnsListener,  // opens 15001/15006/15008 but not the DNS proxy's 15053
};
// "none", "no-listeners", "nack", "crash", "no-dns-listener"
std::string_view ZtunnelFaultName(ZtunnelFault fault);
Result<ZtunnelFault> ParseZtunnelFault(std::string_view name);

// The node this ztunnel reports its workloads on: $NODE_NAME (the DaemonSet's downward API), else
// the hostname — the same rule the agent uses, so lab workloads join to the scanned node.
std::string DefaultNodeName();

struct ZtunnelSimOptions {
  std::string zds_socket_path;
  std::string node_name = DefaultNodeName();  // like ztunnel: $NODE_NAME, else the hostname
  ZtunnelFault fault = ZtunnelFault::kNone;
  std::set<std::string> fault_uids;  // no-listeners / nack only for these pod UIDs; empty: all
  bool ipv6 = false;  // 15001/15006/15008 on [::] (dual stack); DNS binds ::1 wherever the pod
                      // netns has IPv6 enabled, like ztunnel
  std::chrono::milliseconds retry_interval{5000};  // ztunnel's RETRY_DURATION for pending pods
  std::chrono::milliseconds max_backoff{15000};    // reconnect backoff cap (10 ms doubling)
  bool log_to_stderr = true;
  // /config_dump certificates: one per distinct pod identity (spiffe://cluster.local/ns/<ns>/sa/
  // <sa>), Available with a 24 h leaf; Unavailable (no chain) for the identity of these pod UIDs
  // (lab fault cert-unavailable).
  std::set<std::string> cert_unavailable_uids;
  std::chrono::milliseconds cert_lifetime{24 * 3600 * 1000};
  std::function<void()> on_crash;  // fault crash; default: exit(1) like a crashing ztunnel
};

// ztunnel's in-pod listener ports (facts §7.1).
inline constexpr uint16_t kOutboundPort = 15001;
inline constexpr uint16_t kInboundPlaintextPort = 15006;
inline constexpr uint16_t kInboundHbonePort = 15008;
inline constexpr uint16_t kDnsPort = 15053;

struct ZtunnelProxyView {
  std::string uid;  // Kubernetes pod UID (the ZDS uid)
  std::string name;
  std::string namespace_name;
  std::string service_account;
  std::string state;             // "Up" | "Pending"
  std::vector<std::string> ips;  // read from the pod netns (stands in for XDS)
  uint64_t netns_inode = 0;
  size_t listeners = 0;
};

struct ZtunnelSimStatus {
  bool connected = false;
  bool snapshot_received = false;
  bool ready = false;        // snapshot received and nothing pending
  uint64_t connections = 0;  // successful connects so far
  uint64_t proxies_started = 0;
  uint64_t proxies_stopped = 0;
  size_t pending = 0;
  std::vector<ZtunnelProxyView> proxies;  // sorted by uid
};

class ZtunnelSim {
 public:
  static Result<std::unique_ptr<ZtunnelSim>> Start(ZtunnelSimOptions options);
  ~ZtunnelSim();
  ZtunnelSim(const ZtunnelSim&) = delete;
  ZtunnelSim& operator=(const ZtunnelSim&) = delete;

  ZtunnelSimStatus status() const;
  // The admin views, exactly as served over HTTP.
  std::string ConfigDumpJson() const;  // /config_dump (camelCase, like ztunnel)
  std::string MetricsText() const;     // /metrics (OpenMetrics, workload_manager_*)
  int ReadinessCode() const;           // /healthz/ready: 200 or 500
  std::string ReadinessBody() const;   // "ready" or "not ready, pending: workload proxy manager"
  const ZtunnelSimOptions& options() const;
  // Closes the DNS proxy's 15053 sockets of every running proxy (ztunnel losing its in-pod DNS
  // listener at runtime; ztunnel-sim does it on SIGUSR1). Returns how many were closed.
  size_t DropDnsListeners();
  void Stop();

 private:
  struct State;
  explicit ZtunnelSim(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// What ConfigDumpJson serves for `status`, with certificates issued a minute before `started_at`
// (benches build large dumps with it, no ZDS needed).
std::string ConfigDumpJsonFor(const ZtunnelSimStatus& status, const ZtunnelSimOptions& options,
                              std::chrono::system_clock::time_point started_at);

// ztunnel's admin (127.0.0.1:15000), stats (0.0.0.0:15020) and readiness (0.0.0.0:15021)
// servers, bound in the calling thread's netns.
struct AdminPorts {
  uint16_t admin = 15000;
  uint16_t stats = 15020;
  uint16_t readiness = 15021;
};

class AdminServer {
 public:
  static Result<std::unique_ptr<AdminServer>> Start(const ZtunnelSim& sim, AdminPorts ports = {});
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;
  void Stop();

 private:
  struct State;
  explicit AdminServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace ad::sim
