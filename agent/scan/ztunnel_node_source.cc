#include "scan/ztunnel_node_source.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <set>
#include <utility>

#include "base/unique_fd.h"
#include "model/result.h"
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
  auto dump = ztunnel::ParseConfigDump(
      response->body,
      {.node = options.node_name.empty() ? std::nullopt : std::optional(options.node_name)});
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
  state.workloads_seen = dump->workloads_seen;
  state.has_certificates = dump->has_certificates;
  state.certificates = std::move(dump->certificates);
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

// A cache of /config_dump answers: given readiness and metrics just read (`fresh`), lookup fills
// `state` with a cached answer and returns true, or returns false to have it fetched; store is
// told of every fetched one (`state` then holds only the config_dump part).
struct DumpReuse {
  std::function<bool(const ZtunnelAdminState& fresh, uint64_t netns_inode, ZtunnelAdminState&)>
      lookup;
  std::function<void(const ZtunnelAdminState& fresh, uint64_t netns_inode,
                     const ZtunnelAdminState&)>
      store;
};

// `queried` tells whether the ports were asked (the netns was open and the expected one).
ZtunnelAdminState Query(const std::string& netns_path, int pid, uint64_t expected_inode,
                        const ZtunnelAdminOptions& options, bool& queried,
                        const DumpReuse& reuse = {}) {
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
  // Readiness and metrics first (small), so a cached /config_dump can be judged by them; errors
  // keep the config_dump, readiness, metrics order.
  ZtunnelAdminState fresh;
  ReadReadiness(pinned, options, fresh);
  ReadMetrics(pinned, options, fresh);
  if (!reuse.lookup || !reuse.lookup(fresh, state.netns_inode, state)) {
    ReadConfigDump(pinned, options, state);
    if (reuse.store) reuse.store(fresh, state.netns_inode, state);
  }
  state.ready = fresh.ready;
  state.pending_tasks = std::move(fresh.pending_tasks);
  state.active_proxy_count = fresh.active_proxy_count;
  state.pending_proxy_count = fresh.pending_proxy_count;
  state.errors.insert(state.errors.end(), fresh.errors.begin(), fresh.errors.end());
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
  std::vector<uint64_t> node_netns;
  node_netns.reserve(snapshot.netns.size());
  for (const NetnsSnapshot& netns : snapshot.netns) node_netns.push_back(netns.netns.inode);
  std::sort(node_netns.begin(), node_netns.end());
  const auto now = std::chrono::steady_clock::now();
  std::map<uint64_t, CachedDump> kept;
  // The key of a ztunnel netns: what its process holds (when one was found) and what it says.
  auto key_of = [&](const ProcessNetnsFds* process, const ZtunnelAdminState& fresh) {
    DumpKey key{.node_netns = node_netns,
                .ready = fresh.ready,
                .active_proxy_count = fresh.active_proxy_count,
                .pending_proxy_count = fresh.pending_proxy_count};
    if (process != nullptr) {
      key.pid = process->pid;
      key.start_time_unix_ms = process->start_time_unix_ms;
      key.netns_fd_inodes = process->netns_fd_inodes;
    }
    return key;
  };
  auto reuse_for = [&](const ProcessNetnsFds* process) {
    DumpReuse reuse;
    if (options_.config_dump_refresh.count() <= 0) {
      reuse.store = [this](const ZtunnelAdminState&, uint64_t, const ZtunnelAdminState&) {
        ++config_dump_fetches_;
      };
      return reuse;
    }
    reuse.lookup = [&, process](const ZtunnelAdminState& fresh, uint64_t inode,
                                ZtunnelAdminState& state) {
      auto cached = dumps_.find(inode);
      if (cached == dumps_.end() ||
          now - cached->second.fetched_at >= options_.config_dump_refresh ||
          !(cached->second.key == key_of(process, fresh))) {
        return false;
      }
      state.admin_reachable = cached->second.admin_reachable;
      state.workload_state = cached->second.workload_state;
      state.workloads = cached->second.workloads;
      state.workloads_seen = cached->second.workloads_seen;
      state.has_certificates = cached->second.has_certificates;
      state.certificates = cached->second.certificates;
      kept.emplace(inode, std::move(cached->second));
      return true;
    };
    reuse.store = [&, process](const ZtunnelAdminState& fresh, uint64_t inode,
                               const ZtunnelAdminState& state) {
      ++config_dump_fetches_;
      if (!state.errors.empty()) return;  // a failed or partial answer is asked again
      kept[inode] = CachedDump{.key = key_of(process, fresh),
                               .fetched_at = now,
                               .admin_reachable = state.admin_reachable,
                               .workload_state = state.workload_state,
                               .workloads = state.workloads,
                               .workloads_seen = state.workloads_seen,
                               .has_certificates = state.has_certificates,
                               .certificates = state.certificates};
    };
    return reuse;
  };
  for (const ProcessNetnsFds& process : snapshot.processes) {
    if (process.role != ProcessRole::kZtunnel) continue;
    // Two ztunnel processes in one netns (e.g. a wrapper) share the same ports: ask once.
    if (process.own_netns_inode != 0 && queried_netns.count(process.own_netns_inode) > 0) {
      continue;
    }
    const std::string path = options_.proc_root + "/" + std::to_string(process.pid) + "/ns/net";
    ZtunnelAdminState state =
        Query(path, process.pid, process.own_netns_inode, options_, queried, reuse_for(&process));
    if (queried) queried_netns.insert(state.netns_inode);
    snapshot.ztunnels.push_back(std::move(state));
  }
  for (const std::string& path : options_.extra_netns_paths) {
    const uint64_t inode = InodeOf(path);
    if (inode != 0 && queried_netns.count(inode) > 0) continue;
    ZtunnelAdminState state = Query(path, 0, 0, options_, queried, reuse_for(nullptr));
    if (queried) queried_netns.insert(state.netns_inode);
    snapshot.ztunnels.push_back(std::move(state));
  }
  dumps_ = std::move(kept);  // ztunnels gone (or not asked) are forgotten
}

}  // namespace ad
