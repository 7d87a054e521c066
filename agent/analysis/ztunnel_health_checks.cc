// ztunnel's own health: a process near its fd or memory limit or leaking CLOSE_WAIT sockets
// (ZTUNNEL_RESOURCE_PRESSURE), and the certificates of this node's pod identities
// (ZTUNNEL_CERT_UNHEALTHY). Pure: the node sources collected the numbers and the trend.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/checks.h"

namespace ad::analysis {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string Percent(uint64_t used, uint64_t limit) {
  if (limit == 0) return "?";
  return std::to_string(
             static_cast<int>(100.0 * static_cast<double>(used) / static_cast<double>(limit))) +
         " %";
}

std::string FormatDuration(int64_t ms) {
  if (ms < 0) ms = -ms;
  const int64_t seconds = ms / 1000;
  if (seconds < 60) return std::to_string(seconds) + " s";
  if (seconds < 3600)
    return std::to_string(seconds / 60) + " min " + std::to_string(seconds % 60) + " s";
  return std::to_string(seconds / 3600) + " h " + std::to_string(seconds % 3600 / 60) + " min";
}

const NetnsSnapshot* FindScanned(const NodeSnapshot& snapshot, uint64_t inode) {
  for (const NetnsSnapshot& netns : snapshot.netns) {
    if (netns.netns.inode == inode) return &netns;
  }
  return nullptr;
}

bool CloseWaitGrowing(const std::vector<uint32_t>& counts, const AnalysisOptions& options) {
  const size_t scans = std::max<size_t>(options.close_wait_growth_scans, 2);
  if (counts.size() < scans) return false;
  for (size_t i = counts.size() - scans + 1; i < counts.size(); ++i) {
    if (counts[i] <= counts[i - 1]) return false;
  }
  return counts.back() >= options.close_wait_min;
}

std::string CountsText(const std::vector<uint32_t>& counts) {
  std::string text;
  for (uint32_t count : counts) text += (text.empty() ? "" : " -> ") + std::to_string(count);
  return text;
}

void CheckResources(const NodeSnapshot& snapshot, const AnalysisOptions& options,
                    std::vector<Finding>& findings) {
  std::map<int, const ProcessNetnsFds*> process_by_pid;
  for (const ProcessNetnsFds& process : snapshot.processes) process_by_pid[process.pid] = &process;
  for (const ZtunnelResourceUsage& usage : snapshot.ztunnel_resources) {
    const bool fds = usage.fd_soft_limit > 0 &&
                     static_cast<double>(usage.open_fds) >=
                         options.fd_pressure_ratio * static_cast<double>(usage.fd_soft_limit);
    const bool memory =
        usage.memory_limit_bytes > 0 &&
        static_cast<double>(usage.rss_bytes) >=
            options.memory_pressure_ratio * static_cast<double>(usage.memory_limit_bytes);
    const bool close_wait = CloseWaitGrowing(usage.close_wait_counts, options);
    if (!fds && !memory && !close_wait) continue;

    std::vector<std::string> kinds;
    if (fds) kinds.push_back("open fds near the limit");
    if (memory) kinds.push_back("memory near the cgroup limit");
    if (close_wait) kinds.push_back("CLOSE_WAIT sockets growing");
    std::string kinds_text;
    for (const std::string& kind : kinds) kinds_text += (kinds_text.empty() ? "" : ", ") + kind;

    const ProcessNetnsFds* process = nullptr;
    if (auto it = process_by_pid.find(usage.pid); it != process_by_pid.end()) process = it->second;
    const uint64_t own_inode = process != nullptr ? process->own_netns_inode : 0;
    const NetnsSnapshot* scanned = own_inode != 0 ? FindScanned(snapshot, own_inode) : nullptr;

    std::vector<std::string> evidence;
    evidence.push_back(
        "ztunnel pid " + std::to_string(usage.pid) +
        (process != nullptr && !process->comm.empty() ? " (" + process->comm + ")" : "") +
        (own_inode != 0 ? ", netns inode " + std::to_string(own_inode) : ""));
    std::string fd_line = "open fds " + std::to_string(usage.open_fds) + " / soft limit ";
    if (usage.fd_limit_unlimited) {
      fd_line += "unlimited";
    } else if (usage.fd_soft_limit == 0) {
      fd_line += "unknown";
    } else {
      fd_line += std::to_string(usage.fd_soft_limit) + " (" +
                 Percent(usage.open_fds, usage.fd_soft_limit) + ", \"Max open files\" of /proc/" +
                 std::to_string(usage.pid) + "/limits)";
    }
    evidence.push_back(fd_line);
    std::string memory_line = "RSS " + std::to_string(usage.rss_bytes / kMiB) + " MiB / ";
    if (usage.memory_limit_bytes > 0) {
      memory_line += "cgroup limit " + std::to_string(usage.memory_limit_bytes / kMiB) + " MiB (" +
                     Percent(usage.rss_bytes, usage.memory_limit_bytes) + ")";
    } else {
      memory_line += usage.memory_unlimited ? "no cgroup limit" : "cgroup limit unknown";
    }
    if (!usage.cgroup.empty()) memory_line += ", cgroup " + usage.cgroup;
    evidence.push_back(memory_line);
    if (!usage.close_wait_counts.empty()) {
      evidence.push_back("CLOSE_WAIT sockets held, last " +
                         std::to_string(usage.close_wait_counts.size()) +
                         " counts: " + CountsText(usage.close_wait_counts) + " (" +
                         std::to_string(usage.close_wait_netns) + " netns counted" +
                         (usage.close_wait_truncated ? ", truncated" : "") + ")");
    }
    Finding finding = MakeFinding(
        FindingCode::kZtunnelResourcePressure, scanned, "ztunnel pid " + std::to_string(usage.pid),
        "ztunnel pid " + std::to_string(usage.pid) + " is near its limits: " + kinds_text,
        std::move(evidence));
    if (scanned == nullptr) finding.netns_inode = own_inode;
    findings.push_back(std::move(finding));
  }
}

// "spiffe://<td>/ns/<ns>/sa/<sa>" -> (ns, sa); false when it is not that shape.
bool ParseSpiffe(std::string_view identity, std::string* ns, std::string* sa) {
  constexpr std::string_view kScheme = "spiffe://";
  if (!identity.starts_with(kScheme)) return false;
  identity.remove_prefix(kScheme.size());
  const size_t ns_at = identity.find("/ns/");
  if (ns_at == std::string_view::npos) return false;
  const std::string_view rest = identity.substr(ns_at + 4);
  const size_t sa_at = rest.find("/sa/");
  if (sa_at == std::string_view::npos || sa_at == 0) return false;
  *ns = std::string(rest.substr(0, sa_at));
  *sa = std::string(rest.substr(sa_at + 4));
  return !sa->empty() && sa->find('/') == std::string::npos;
}

void CheckCertificates(const NodeSnapshot& snapshot, const AnalysisOptions& options,
                       const std::vector<NetnsClassification>& netns,
                       std::vector<Finding>& findings) {
  const int64_t now = snapshot.taken_at_unix_ms;
  std::map<std::string, size_t> netns_by_uid;
  for (size_t i = 0; i < netns.size(); ++i) {
    if (!netns[i].pod_uid.empty()) netns_by_uid.emplace(netns[i].pod_uid, i);
  }
  std::set<std::string> reported;  // identities (two ztunnels during an upgrade: once)
  for (const ZtunnelAdminState& ztunnel : snapshot.ztunnels) {
    for (const ZtunnelCertificate& certificate : ztunnel.certificates) {
      const bool unavailable = certificate.state.starts_with("Unavailable");
      const bool available = certificate.state == "Available";
      const bool expiring = available && certificate.expires_unix_ms != 0 &&
                            certificate.expires_unix_ms - now < options.cert_expiry_warning_ms;
      if (!unavailable && !expiring) continue;
      std::string ns;
      std::string sa;
      if (!ParseSpiffe(certificate.identity, &ns, &sa)) continue;
      // The pods of this node with that identity: ztunnel's workloadState (ZDS WorkloadInfo).
      std::vector<std::string> pods;
      std::set<size_t> pod_netns;
      for (const ZtunnelWorkloadState& state : ztunnel.workload_state) {
        if (state.namespace_name != ns || state.service_account != sa) continue;
        pods.push_back(state.name.empty() ? "uid " + state.pod_uid
                                          : state.namespace_name + "/" + state.name);
        if (auto it = netns_by_uid.find(state.pod_uid); it != netns_by_uid.end()) {
          pod_netns.insert(it->second);
        }
      }
      if (pods.empty()) continue;  // not a workload of this node (e.g. ztunnel's own)
      if (!reported.insert(certificate.identity).second) continue;
      std::sort(pods.begin(), pods.end());

      std::vector<std::string> evidence;
      evidence.push_back("ztunnel pid " + std::to_string(ztunnel.pid) +
                         " /config_dump certificates[" + certificate.identity + "]: state \"" +
                         certificate.state + "\"");
      if (certificate.expires_unix_ms != 0) {
        const int64_t left = certificate.expires_unix_ms - now;
        evidence.push_back("chain of " + std::to_string(certificate.chain_length) +
                           " certificate(s), first expiry " +
                           FormatUnixMs(certificate.expires_unix_ms) +
                           (left >= 0 ? " (in " + FormatDuration(left) + ")"
                                      : " (expired " + FormatDuration(left) + " ago)") +
                           "; warning threshold " + FormatDuration(options.cert_expiry_warning_ms));
      } else {
        evidence.push_back("no certificate chain");
      }
      std::string pod_text;
      for (const std::string& pod : pods) pod_text += (pod_text.empty() ? "" : ", ") + pod;
      evidence.push_back("pods on this node with identity ns/" + ns + "/sa/" + sa + ": " +
                         pod_text);
      evidence.push_back("certificates are read with /config_dump, which the daemon caches up to " +
                         std::to_string(kConfigDumpRefreshMs / 1000) + " s");
      const std::string summary =
          unavailable ? "ztunnel has no certificate for " + certificate.identity
          : certificate.expires_unix_ms <= now
              ? "ztunnel's certificate for " + certificate.identity + " has expired"
              : "ztunnel's certificate for " + certificate.identity + " expires within " +
                    FormatDuration(options.cert_expiry_warning_ms);
      const NetnsSnapshot* scoped =
          pod_netns.size() == 1 ? &snapshot.netns[*pod_netns.begin()] : snapshot.Host();
      Finding finding = MakeFinding(FindingCode::kZtunnelCertUnhealthy, scoped,
                                    certificate.identity, summary, std::move(evidence));
      if (pods.size() == 1) finding.pod = pods.front();
      findings.push_back(std::move(finding));
    }
  }
}

}  // namespace

void CheckZtunnelHealth(const NodeSnapshot& snapshot, const AnalysisOptions& options,
                        const std::vector<NetnsClassification>& netns,
                        std::vector<Finding>& findings) {
  CheckResources(snapshot, options, findings);
  CheckCertificates(snapshot, options, netns, findings);
}

}  // namespace ad::analysis
