// ztunnel's own view of the node, read over its loopback HTTP ports from inside its netns:
// /config_dump (admin), /healthz/ready (readiness) and /metrics (stats). Read-only GETs only; the
// agent never POSTs (/logging, /quitquitquit) and never touches the ZDS socket.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/istio_facts.h"
#include "model/zds.h"
#include "scan/node_source.h"

namespace ad {

struct ZtunnelAdminOptions {
  uint16_t admin_port = istio::kZtunnelAdminPort;          // /config_dump, bound to localhost only
  uint16_t readiness_port = istio::kZtunnelReadinessPort;  // /healthz/ready
  uint16_t stats_port = istio::kZtunnelStatsPort;          // /metrics
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds total_timeout{2000};  // per request
  size_t max_config_dump_bytes = 16u << 20;
  size_t max_metrics_bytes = 16u << 20;
  size_t max_readiness_bytes = 64u << 10;
  bool try_ipv6_loopback = true;  // retry on [::1] when 127.0.0.1 refuses
  std::string proc_root = "/proc";
  // Netns to query even when no ztunnel process was found (--ztunnel-netns, the lab).
  std::vector<std::string> extra_netns_paths;
  // Repeated collections (the daemon) fetch /config_dump (the large one: every workload of the
  // mesh) again only when something suggests it changed — another ztunnel process, its netns
  // fds, its readiness or proxy counts, the node's netns — or when the last one is this old or
  // failed. Readiness and metrics are asked every time. Zero: every collection.
  std::chrono::milliseconds config_dump_refresh{kConfigDumpRefreshMs};
  // This node (the snapshot's node_name): only its HBONE workloads of /config_dump are kept
  // (ConfigDumpFilter). Empty: every workload.
  std::string node_name;
};

// Queries one netns (a bind mount or <proc>/<pid>/ns/net). Never throws; every failure is in
// the returned state's `errors` (sources "ztunnel/config_dump", "ztunnel/readiness",
// "ztunnel/metrics", "ztunnel").
ZtunnelAdminState QueryZtunnelAdmin(const std::string& netns_path, int pid,
                                    const ZtunnelAdminOptions& options);

// For every process with role kZtunnel in snapshot.processes (one query per netns) and every
// extra netns path, appends a ZtunnelAdminState to snapshot.ztunnels. Runs on the calling thread.
class ZtunnelAdminNodeSource : public NodeSource {
 public:
  explicit ZtunnelAdminNodeSource(ZtunnelAdminOptions options = {});
  std::string_view name() const override { return "ztunnel-admin"; }
  void Collect(NodeSnapshot& snapshot) override;
  uint64_t config_dump_fetches() const { return config_dump_fetches_; }

 private:
  // What a cached /config_dump answer of one ztunnel netns depends on.
  struct DumpKey {
    int pid = 0;
    int64_t start_time_unix_ms = 0;
    std::vector<uint64_t> netns_fd_inodes;
    std::vector<uint64_t> node_netns;
    std::optional<bool> ready;
    std::optional<double> active_proxy_count;
    std::optional<double> pending_proxy_count;
    bool operator==(const DumpKey&) const = default;
  };
  struct CachedDump {
    DumpKey key;
    std::chrono::steady_clock::time_point fetched_at;
    bool admin_reachable = false;
    SharedList<ZtunnelWorkloadState> workload_state;  // shared with the snapshots, not copied
    SharedList<ZtunnelWorkload> workloads;
    size_t workloads_seen = 0;
    // Cached with the rest of the dump: a certificate's state may be up to config_dump_refresh
    // old (ZTUNNEL_CERT_UNHEALTHY says so); expiry is judged against each scan's time.
    bool has_certificates = false;
    std::vector<ZtunnelCertificate> certificates;
  };

  ZtunnelAdminOptions options_;
  std::map<uint64_t, CachedDump> dumps_;  // by ztunnel netns inode
  uint64_t config_dump_fetches_ = 0;
};

}  // namespace ad
