#include "scan/ztunnel_node_source.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <set>
#include <utility>

#include "model/result.h"
#include "sources/unique_fd.h"
#include "sources/ztunnel/admin_parse.h"
#include "sources/ztunnel/http_get.h"

namespace ad {
namespace {

constexpr SourceKind kConfigDumpSource = SourceKind::kZtunnelConfigDump;
constexpr SourceKind kReadinessSource = SourceKind::kZtunnelReadiness;
constexpr SourceKind kMetricsSource = SourceKind::kZtunnelMetrics;

// GET on 127.0.0.1, then on [::1] when IPv4 loopback refuses (the admin port binds localhost,
// which may be IPv6 only). The IPv4 error is the one reported when both fail.
Result<ztunnel::HttpResponse> LoopbackGet(const std::string& netns_path, uint16_t port,
                                          const std::string& path, size_t max_bytes,
                                          const ZtunnelAdminOptions& options, SourceKind source) {
  ztunnel::HttpGetOptions http_options;
  http_options.connect_timeout = options.connect_timeout;
  http_options.total_timeout = options.total_timeout;
  http_options.max_response_bytes = max_bytes;
  ztunnel::HttpGetRequest request{netns_path, "127.0.0.1", port, path};
  auto response = ztunnel::HttpGet(request, http_options);
  if (!response.ok() && response.error().error_number == ECONNREFUSED &&
      options.try_ipv6_loopback) {
    request.host = "::1";
    auto retry = ztunnel::HttpGet(request, http_options);
    if (retry.ok()) return retry;
  }
  if (!response.ok()) {
    SourceError error = response.error();
    error.kind = source;
    return error;
  }
  return response;
}

SourceError StatusError(SourceKind source, const ztunnel::HttpResponse& response) {
  return SourceError{source,
                     "HTTP " + std::to_string(response.status) + " " + response.reason +
                         " (body \"" + response.body.substr(0, 80) + "\")",
                     EPROTO};
}

void ReadConfigDump(const std::string& netns_path, const ZtunnelAdminOptions& options,
                    ZtunnelAdminState& state) {
  auto response = LoopbackGet(netns_path, options.admin_port, "/config_dump",
                              options.max_config_dump_bytes, options, kConfigDumpSource);
  if (!response.ok()) {
    state.errors.push_back(response.error());
    return;
  }
  state.admin_reachable = true;
  if (response->status != 200) {
    state.errors.push_back(StatusError(kConfigDumpSource, *response));
    return;
  }
  auto dump = ztunnel::ParseConfigDump(response->body);
  if (!dump.ok()) {
    state.errors.push_back(dump.error());
    return;
  }
  if (!dump->has_workload_state) {
    // Analysis must not read "no section" as "no pods": older or non-in-pod ztunnels lack it.
    state.errors.push_back(SourceError{
        kConfigDumpSource, "no workloadState section (ztunnel too old or not in in-pod mode)", 0});
  }
  if (dump->skipped_entries > 0) {
    std::string message =
        "skipped " + std::to_string(dump->skipped_entries) + " malformed entries or fields";
    for (size_t i = 0; i < dump->warnings.size(); ++i) {
      message += (i == 0 ? ": " : "; ") + dump->warnings[i];
    }
    state.errors.push_back(SourceError{kConfigDumpSource, std::move(message), EPROTO});
  }
  state.workload_state = std::move(dump->workload_state);
  state.workloads = std::move(dump->workloads);
}

void ReadReadiness(const std::string& netns_path, const ZtunnelAdminOptions& options,
                   ZtunnelAdminState& state) {
  auto response = LoopbackGet(netns_path, options.readiness_port, "/healthz/ready",
                              options.max_readiness_bytes, options, kReadinessSource);
  if (!response.ok()) {
    state.errors.push_back(response.error());
    return;
  }
  auto readiness = ztunnel::ParseReadiness(response->status, response->body);
  if (!readiness.ok()) {
    state.errors.push_back(readiness.error());
    return;
  }
  state.ready = readiness->ready;
  state.pending_tasks = std::move(readiness->pending_tasks);
}

void ReadMetrics(const std::string& netns_path, const ZtunnelAdminOptions& options,
                 ZtunnelAdminState& state) {
  auto response = LoopbackGet(netns_path, options.stats_port, "/metrics", options.max_metrics_bytes,
                              options, kMetricsSource);
  if (!response.ok()) {
    state.errors.push_back(response.error());
    return;
  }
  if (response->status != 200) {
    state.errors.push_back(StatusError(kMetricsSource, *response));
    return;
  }
  const ztunnel::ZtunnelMetrics metrics = ztunnel::ParseMetrics(response->body);
  state.active_proxy_count = metrics.active_proxy_count;
  state.pending_proxy_count = metrics.pending_proxy_count;
  if (metrics.malformed_lines > 0) {
    state.errors.push_back(SourceError{
        kMetricsSource, "ignored " + std::to_string(metrics.malformed_lines) + " malformed lines",
        EPROTO});
  }
}

uint64_t InodeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// `queried` tells whether the ports were asked (the netns was open and the expected one).
ZtunnelAdminState Query(const std::string& netns_path, int pid, uint64_t expected_inode,
                        const ZtunnelAdminOptions& options, bool& queried) {
  queried = false;
  ZtunnelAdminState state;
  state.pid = pid;
  // Pin the netns once, so all three requests reach the same one even if the PID goes away.
  UniqueFd netns(::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!netns.valid() || ::fstat(netns.get(), &st) != 0) {
    SourceError error = ErrnoError(SourceKind::kZtunnel, "open(" + netns_path + ")");
    if (pid != 0) error.message = "pid " + std::to_string(pid) + ": " + error.message;
    state.netns_inode = expected_inode;
    state.errors.push_back(std::move(error));
    return state;
  }
  state.netns_inode = st.st_ino;
  if (expected_inode != 0 && st.st_ino != expected_inode) {
    // Keep the inode the ztunnel had: the netns now behind the PID is not a ztunnel's.
    state.netns_inode = expected_inode;
    state.errors.push_back(SourceError{SourceKind::kZtunnel,
                                       "pid " + std::to_string(pid) + " now lives in netns " +
                                           std::to_string(st.st_ino) + ", expected " +
                                           std::to_string(expected_inode) +
                                           " (process restarted or PID reused); not queried",
                                       ESRCH});
    return state;
  }
  const std::string pinned = "/proc/self/fd/" + std::to_string(netns.get());
  queried = true;
  ReadConfigDump(pinned, options, state);
  ReadReadiness(pinned, options, state);
  ReadMetrics(pinned, options, state);
  return state;
}

}  // namespace

ZtunnelAdminState QueryZtunnelAdmin(const std::string& netns_path, int pid,
                                    const ZtunnelAdminOptions& options) {
  bool queried = false;
  return Query(netns_path, pid, 0, options, queried);
}

ZtunnelAdminNodeSource::ZtunnelAdminNodeSource(ZtunnelAdminOptions options)
    : options_(std::move(options)) {}

void ZtunnelAdminNodeSource::Collect(NodeSnapshot& snapshot) {
  std::set<uint64_t> queried_netns;
  bool queried = false;
  for (const ProcessNetnsFds& process : snapshot.processes) {
    if (process.role != ProcessRole::kZtunnel) continue;
    // Two ztunnel processes in one netns (e.g. a wrapper) share the same ports: ask once.
    if (process.own_netns_inode != 0 && queried_netns.count(process.own_netns_inode) > 0) {
      continue;
    }
    const std::string path = options_.proc_root + "/" + std::to_string(process.pid) + "/ns/net";
    ZtunnelAdminState state = Query(path, process.pid, process.own_netns_inode, options_, queried);
    if (queried) queried_netns.insert(state.netns_inode);
    snapshot.ztunnels.push_back(std::move(state));
  }
  for (const std::string& path : options_.extra_netns_paths) {
    const uint64_t inode = InodeOf(path);
    if (inode != 0 && queried_netns.count(inode) > 0) continue;
    ZtunnelAdminState state = Query(path, 0, 0, options_, queried);
    if (queried) queried_netns.insert(state.netns_inode);
    snapshot.ztunnels.push_back(std::move(state));
  }
}

}  // namespace ad
