// Pure parsers for what ztunnel serves on its admin (:15000 /config_dump), readiness
// (:15021 /healthz/ready) and stats (:15020 /metrics) ports. No sockets: tested and fuzzed on
// their own. Peer data is untrusted: wrong types are skipped and counted, never fatal.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"
#include "model/zds.h"

namespace ad::ztunnel {

struct ConfigDump {
  bool has_workload_state = false;  // the "workloadState" section was present
  bool has_workloads = false;       // the "workloads" section was present (array or map)
  std::vector<ZtunnelWorkloadState> workload_state;  // sorted by pod UID
  // In document order; with a filter's node, only the IsLocalHboneWorkload ones. Fields ztunnel
  // omits at their defaults stay empty (protocol TCP, networkMode Standard).
  std::vector<ZtunnelWorkload> workloads;
  size_t workloads_seen = 0;                     // entries of "workloads" read, kept or not
  bool has_certificates = false;                 // the "certificates" section was present
  std::vector<ZtunnelCertificate> certificates;  // sorted by identity (duplicates: the last wins)
  size_t skipped_entries = 0;                    // entries (or fields) of the wrong type, ignored
  std::vector<std::string> warnings;  // the first few reasons, e.g. "workloads[3]: not an object"
};

// What of "workloads" to keep. The section lists every workload of the mesh (5,000 in a large
// cluster); the checks read only this node's HBONE ones, so a daemon given its node keeps those
// alone and its memory follows the node's pods, not the cluster's.
struct ConfigDumpFilter {
  std::optional<std::string> node;  // nullopt: keep every workload
};

// Accepts both "workloads" shapes: an array (current) and the map keyed by uid (before ztunnel
// #923, Apr 2024). Error (source "ztunnel/config_dump") only when the text is not a JSON object.
Result<ConfigDump> ParseConfigDump(std::string_view json, const ConfigDumpFilter& filter = {});

// RFC 3339 date-time ("2026-12-01T18:00:00Z", "...T18:00:00.123456+02:00") -> unix ms; nullopt
// when malformed. Pure.
std::optional<int64_t> ParseRfc3339UnixMs(std::string_view text);

struct Readiness {
  bool ready = false;
  std::vector<std::string> pending_tasks;  // "not ready, pending: a, b" -> {"a", "b"}
};

// 200 = ready; 500 = not ready with the pending task names from the body. Any other status is an
// error (source "ztunnel/readiness"): it is not ztunnel's readiness server answering.
Result<Readiness> ParseReadiness(int status, std::string_view body);

struct ZtunnelMetrics {
  std::optional<double> active_proxy_count;   // workload_manager_active_proxy_count
  std::optional<double> pending_proxy_count;  // workload_manager_pending_proxy_count
  size_t malformed_lines = 0;                 // lines that are neither comments nor samples
};

// Prometheus text exposition format. Series of the same metric with different labels are summed;
// NaN and infinite values are ignored.
ZtunnelMetrics ParseMetrics(std::string_view text);

// "10.0.0.1", "network/10.0.0.1", "fd00::0:1" -> canonical address text; nullopt if not an IP.
std::optional<std::string> CanonicalWorkloadIp(std::string_view text);

}  // namespace ad::ztunnel
