// PROBE_PATH_BROKEN: kubelet probes that leave the host SNATed to the probe address and never get
// a reply. A healthy probe is answered within a round trip (SYN-ACK, or RST from a closed port:
// both are replies to conntrack), so an unreplied SYN_SENT entry to an enrolled pod that persists
// means the datapath drops the probe or its reply. Persistence (never one scan's snapshot):
//  - across scans: the pod had unreplied probe entries in every scan since `first seen`
//    (History), and that is at least the threshold ago (so at least two scans); or
//  - by the kernel's clock: one entry has waited for its reply at least the threshold (its
//    CTA_TIMESTAMP start when the node keeps timestamps, else the SYN_SENT timeout minus the
//    time it has left: the time since its last SYN, a lower bound), which a one-shot report can
//    judge.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "analysis/checks.h"

namespace ad::analysis {
namespace {

constexpr uint8_t kTcpSynSent = 1;          // TCP_CONNTRACK_SYN_SENT
constexpr uint32_t kStatusSeenReply = 0x2;  // IPS_SEEN_REPLY
constexpr size_t kTupleEvidence = 5;        // tuples quoted per pod

bool IsEnrolledPod(const NetnsSnapshot& netns, const NetnsIstioState& state) {
  return !netns.netns.is_host && !netns.unreadable &&
         !state.classification.ambient_backends.empty();
}

std::string Endpoint(const std::string& address, uint16_t port, Family family) {
  return family == Family::kIpv6 ? "[" + address + "]:" + std::to_string(port)
                                 : address + ":" + std::to_string(port);
}

std::string TupleText(const ProbeConntrackEntry& entry) {
  return "tcp " + Endpoint(entry.orig_src, entry.orig_sport, entry.family) + " -> " +
         Endpoint(entry.orig_dst, entry.orig_dport, entry.family) + ", reply " +
         Endpoint(entry.reply_src, entry.reply_sport, entry.family) + " -> " +
         Endpoint(entry.reply_dst, entry.reply_dport, entry.family) + " " +
         TcpConntrackStateName(entry.tcp_state) + " [UNREPLIED] timeout " +
         std::to_string(entry.timeout_s) + " s";
}

// How long the kernel says this entry has waited for a reply (ms; 0 when it cannot tell).
int64_t KernelAgeMs(const ProbeConntrackEntry& entry, const ProbeConntrackState& state,
                    int64_t now_unix_ms) {
  if (entry.start_unix_ms > 0 && entry.start_unix_ms <= now_unix_ms) {
    return now_unix_ms - entry.start_unix_ms;
  }
  if (state.syn_sent_timeout_s > entry.timeout_s) {
    return static_cast<int64_t>(state.syn_sent_timeout_s - entry.timeout_s) * 1000;
  }
  return 0;
}

std::string Seconds(int64_t ms) { return std::to_string(ms / 1000) + " s"; }

}  // namespace

void CheckProbePath(const NodeSnapshot& snapshot, const std::vector<NetnsIstioState>& states,
                    const AnalysisOptions& options, History& history,
                    std::vector<Finding>& findings) {
  const ProbeConntrackState& conntrack = snapshot.probe_conntrack;
  // A failed read is a source error in the report, never a finding.
  if (!conntrack.collected || !conntrack.errors.empty() || conntrack.entries.empty()) return;

  // PROBE_SNAT_MISSING already explains unanswered probes where the SNAT rule or set is broken.
  bool host_snat_broken = false;
  std::set<uint64_t> pods_snat_broken;
  const NetnsSnapshot* host = snapshot.Host();
  for (const Finding& finding : findings) {
    if (finding.code != FindingCode::kProbeSnatMissing) continue;
    if (host != nullptr && finding.netns_inode == host->netns.inode) {
      host_snat_broken = true;
    } else {
      pods_snat_broken.insert(finding.netns_inode);
    }
  }
  if (host_snat_broken) return;

  std::map<std::string, size_t> pod_by_ip;
  for (size_t i = 0; i < snapshot.netns.size(); ++i) {
    const NetnsSnapshot& netns = snapshot.netns[i];
    if (!IsEnrolledPod(netns, states[i]) || pods_snat_broken.contains(netns.netns.inode)) continue;
    for (const InterfaceAddress& address : netns.routing.addresses) {
      if (address.global_scope && address.ifname != "lo") pod_by_ip.emplace(address.address, i);
    }
  }

  std::map<size_t, std::vector<const ProbeConntrackEntry*>> by_pod;
  for (const ProbeConntrackEntry& entry : conntrack.entries) {
    if (entry.tcp_state != kTcpSynSent || (entry.status & kStatusSeenReply) != 0) continue;
    if (auto pod = pod_by_ip.find(entry.orig_dst); pod != pod_by_ip.end()) {
      by_pod[pod->second].push_back(&entry);
    }
  }

  const int64_t now = history.now_unix_ms();
  for (const auto& [index, entries] : by_pod) {
    const NetnsSnapshot& pod = snapshot.netns[index];
    const int64_t first_seen =
        history.Observe("probe-unreplied:" + std::to_string(pod.netns.inode));
    const int64_t seen_for_ms = std::max<int64_t>(0, now - first_seen);
    int64_t kernel_age_ms = 0;
    const ProbeConntrackEntry* oldest = entries.front();
    for (const ProbeConntrackEntry* entry : entries) {
      const int64_t age = KernelAgeMs(*entry, conntrack, now);
      if (age > kernel_age_ms) {
        kernel_age_ms = age;
        oldest = entry;
      }
    }
    const int64_t persisted_ms = std::max(seen_for_ms, kernel_age_ms);
    if (persisted_ms < options.probe_path_threshold_ms) continue;

    std::map<std::string, int> ips;
    for (const ProbeConntrackEntry* entry : entries) ++ips[entry->orig_dst];
    std::vector<std::string> evidence;
    for (const auto& [ip, count] : ips) {
      evidence.push_back("pod IP " + ip + ": " + std::to_string(count) +
                         " probe connection(s) from the probe SNAT address " +
                         entries.front()->reply_dst +
                         " unreplied (SYN_SENT, UNREPLIED) in the host netns conntrack");
    }
    std::string age = "unreplied for at least " + Seconds(persisted_ms) + ":";
    if (seen_for_ms > 0) age += " seen in every scan for " + Seconds(seen_for_ms);
    if (kernel_age_ms > 0) {
      age += std::string(seen_for_ms > 0 ? ";" : "") + " oldest entry waiting " +
             Seconds(kernel_age_ms) +
             (oldest->start_unix_ms > 0
                  ? " (conntrack timestamp)"
                  : " (" + std::to_string(oldest->timeout_s) + " s of the " +
                        std::to_string(conntrack.syn_sent_timeout_s) + " s SYN_SENT timeout left)");
    }
    evidence.push_back(std::move(age));
    for (size_t i = 0; i < entries.size() && i < kTupleEvidence; ++i) {
      evidence.push_back(TupleText(*entries[i]));
    }
    if (entries.size() > kTupleEvidence) {
      evidence.push_back("… " + std::to_string(entries.size() - kTupleEvidence) + " more");
    }
    if (conntrack.truncated) {
      evidence.push_back("conntrack dump cut at its bound (" + std::to_string(conntrack.matched) +
                         " matched, " + std::to_string(conntrack.entries.size()) +
                         " kept): counts are lower bounds");
    }
    evidence.push_back("host probe SNAT rule and probe set membership are complete");
    Finding finding = MakeFinding(FindingCode::kProbePathBroken, &pod, "probe replies",
                                  std::to_string(entries.size()) +
                                      " kubelet probe connection(s) unreplied past the " +
                                      Seconds(options.probe_path_threshold_ms) + " threshold",
                                  std::move(evidence));
    finding.since_unix_ms = now - persisted_ms;
    findings.push_back(std::move(finding));
  }
}

}  // namespace ad::analysis
