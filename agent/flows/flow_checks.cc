#include "flows/flow_checks.h"

#include <algorithm>
#include <tuple>

namespace ad {
namespace {

std::string Endpoint(const FlowAddress& address, uint16_t port) {
  return (address.ipv6 ? "[" + address.ToString() + "]" : address.ToString()) + ":" +
         std::to_string(port);
}

void Name(Finding& finding, uint32_t inode, const FlowCheckContext& context) {
  finding.netns_inode = inode;
  if (auto it = context.netns_paths.find(inode); it != context.netns_paths.end()) {
    finding.netns_path = it->second;
  }
  if (auto it = context.pods.find(inode); it != context.pods.end()) finding.pod = it->second;
}

bool WasEstablished(const Flow& flow) {
  return flow.established_unix_ns != 0 || flow.outcome == FlowOutcome::kOpen ||
         flow.outcome == FlowOutcome::kClosed ||
         (flow.seen_late && flow.outcome != FlowOutcome::kRefused &&
          flow.outcome != FlowOutcome::kTimeout && flow.outcome != FlowOutcome::kAborted);
}

struct Tally {
  uint64_t attempts = 0;
  uint64_t failed = 0;
  std::map<FlowOutcome, uint64_t> by_outcome;
};

std::string OutcomeCounts(const std::map<FlowOutcome, uint64_t>& by_outcome) {
  std::string text;
  for (const auto& [outcome, count] : by_outcome) {
    if (!IsFailedOutcome(outcome)) continue;
    if (!text.empty()) text += ", ";
    text += std::string(FlowOutcomeName(outcome)) + " " + std::to_string(count);
  }
  return text;
}

}  // namespace

std::vector<Finding> CheckHboneConnectFailures(const std::vector<Flow>& flows,
                                               const FlowCheckContext& context,
                                               const FlowCheckConfig& config) {
  // (netns, same_node) -> tally; and per destination within it.
  std::map<std::pair<uint32_t, bool>, Tally> groups;
  std::map<std::pair<uint32_t, bool>, std::map<std::pair<FlowAddress, uint16_t>, Tally>> targets;
  for (const Flow& flow : flows) {
    if (flow.role != FlowRole::kClient || flow.tuple.dst_port != config.hbone_port) continue;
    const bool same_node = context.node_addresses.contains(flow.tuple.dst);
    const auto key = std::make_pair(flow.netns_inode, same_node);
    for (Tally* tally :
         {&groups[key], &targets[key][std::make_pair(flow.tuple.dst, flow.tuple.dst_port)]}) {
      ++tally->attempts;
      ++tally->by_outcome[flow.outcome];
      if (IsFailedOutcome(flow.outcome)) ++tally->failed;
    }
  }
  std::vector<Finding> findings;
  for (const auto& [key, tally] : groups) {
    const auto [inode, same_node] = key;
    if (tally.failed < config.min_failures ||
        static_cast<double>(tally.failed) <
            config.min_failure_ratio * static_cast<double>(tally.attempts)) {
      continue;
    }
    Finding finding;
    finding.code = FindingCode::kHboneConnectFailures;
    finding.severity = FindingCodeDetails(finding.code).severity;
    Name(finding, inode, context);
    finding.subject = same_node ? "same-node" : "remote";
    finding.summary = std::to_string(tally.failed) + " of " + std::to_string(tally.attempts) +
                      " HBONE connections to " + (same_node ? "same-node" : "remote") +
                      " destinations failed (" + OutcomeCounts(tally.by_outcome) + ")";
    // The worst destinations first (most failures, then address).
    std::vector<std::pair<std::pair<FlowAddress, uint16_t>, Tally>> worst(targets[key].begin(),
                                                                          targets[key].end());
    std::sort(worst.begin(), worst.end(), [](const auto& a, const auto& b) {
      return std::tie(b.second.failed, a.first) < std::tie(a.second.failed, b.first);
    });
    for (size_t i = 0; i < worst.size() && i < config.worst_destinations; ++i) {
      if (worst[i].second.failed == 0) break;
      finding.evidence.push_back(Endpoint(worst[i].first.first, worst[i].first.second) + ": " +
                                 OutcomeCounts(worst[i].second.by_outcome) + " of " +
                                 std::to_string(worst[i].second.attempts));
    }
    const uint64_t timeouts = tally.by_outcome.contains(FlowOutcome::kTimeout)
                                  ? tally.by_outcome.at(FlowOutcome::kTimeout)
                                  : 0;
    if (same_node) {
      finding.hint =
          "Failures to pods on this node: look at the node datapath between pod netns "
          "(istio#59754: "
          "node-local HBONE black hole) and at the destination pods' in-pod ztunnel listeners.";
    } else if (timeouts * 2 >= tally.failed) {
      finding.hint =
          "SYNs to remote :15008 go unanswered: a NetworkPolicy, security group or firewall is "
          "dropping HBONE (allow TCP 15008 between nodes and pods).";
    } else {
      finding.hint = std::string(FindingCodeDetails(finding.code).hint);
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckMeshBypass(const std::vector<Flow>& flows,
                                     const FlowCheckContext& context,
                                     const FlowCheckConfig& config) {
  // ztunnel's accepts on the capture port, by netns: the peers it accepted from.
  std::set<std::tuple<uint32_t, FlowAddress, uint16_t>> captured;
  for (const Flow& flow : flows) {
    if (flow.role != FlowRole::kServer || (flow.tuple.src_port != config.outbound_capture_port &&
                                           flow.tuple.src_port != config.dns_capture_port)) {
      continue;
    }
    captured.emplace(flow.netns_inode, flow.tuple.dst, flow.tuple.dst_port);
  }
  std::map<uint32_t, std::vector<const Flow*>> bypasses;
  for (const Flow& flow : flows) {
    if (flow.role != FlowRole::kClient || !context.ambient_netns.contains(flow.netns_inode)) {
      continue;
    }
    if ((flow.mark & config.ztunnel_mark_mask) == config.ztunnel_mark ||
        flow.tuple.dst.IsLoopback() || !WasEstablished(flow)) {
      continue;
    }
    // To its own address: routed over lo, which Istio's outbound rules let pass uncaptured.
    if (flow.tuple.dst == flow.tuple.src) continue;
    // Too young to judge: ztunnel's accept may be in the tracer's next batch.
    if (context.now_unix_ns != 0 && flow.established_unix_ns != 0 &&
        context.now_unix_ns - flow.established_unix_ns < config.bypass_settle_ms * 1'000'000) {
      continue;
    }
    // REDIRECT keeps the source: ztunnel's accepted socket has the app socket as its peer.
    if (captured.contains({flow.netns_inode, flow.tuple.src, flow.tuple.src_port})) continue;
    bypasses[flow.netns_inode].push_back(&flow);
  }
  std::vector<Finding> findings;
  for (const auto& [inode, escaped] : bypasses) {
    Finding finding;
    finding.code = FindingCode::kMeshBypass;
    finding.severity = FindingCodeDetails(finding.code).severity;
    Name(finding, inode, context);
    finding.summary = std::to_string(escaped.size()) +
                      " application connection(s) left the ambient netns without ztunnel";
    for (size_t i = 0; i < escaped.size() && i < config.max_bypass_evidence; ++i) {
      const Flow& flow = *escaped[i];
      finding.evidence.push_back(
          "tcp " + Endpoint(flow.tuple.src, flow.tuple.src_port) + " -> " +
          Endpoint(flow.tuple.dst, flow.tuple.dst_port) + " " +
          std::string(FlowOutcomeName(flow.outcome)) +
          (flow.established_unix_ns != 0
               ? " at " + std::to_string(flow.established_unix_ns / 1'000'000) + " ms"
               : ""));
    }
    if (escaped.size() > config.max_bypass_evidence) {
      finding.evidence.push_back(
          "… and " + std::to_string(escaped.size() - config.max_bypass_evidence) + " more");
    }
    finding.hint = std::string(FindingCodeDetails(finding.code).hint);
    findings.push_back(std::move(finding));
  }
  return findings;
}

Finding TracingUnavailableFinding(const std::string& reason) {
  Finding finding;
  finding.code = FindingCode::kTracingUnavailable;
  finding.severity = FindingCodeDetails(finding.code).severity;
  finding.subject = "tracer";
  finding.summary = "the eBPF flow tracer is not running: flow checks are off";
  finding.evidence.push_back(reason);
  finding.hint = std::string(FindingCodeDetails(finding.code).hint);
  return finding;
}

}  // namespace ad
