#include "flows/flow_joins.h"

#include <arpa/inet.h>

#include <cstring>

namespace ad {

std::optional<FlowAddress> ParseFlowAddress(const std::string& text) {
  FlowAddress address;
  if (::inet_pton(AF_INET, text.c_str(), address.bytes.data()) == 1) return address;
  address.ipv6 = true;
  if (::inet_pton(AF_INET6, text.c_str(), address.bytes.data()) == 1) return address;
  return std::nullopt;
}

FlowCheckContext FlowContextOf(const NodeSnapshot& snapshot,
                               const std::vector<NetnsClassification>& classified) {
  FlowCheckContext context;
  for (const NetnsSnapshot& netns : snapshot.netns) {
    const auto inode = static_cast<uint32_t>(netns.netns.inode);
    if (!netns.netns.PrimaryPath().empty()) context.netns_paths[inode] = netns.netns.PrimaryPath();
    if (netns.netns.is_host) continue;
    for (const InterfaceAddress& address : netns.routing.addresses) {
      if (!address.global_scope) continue;
      if (auto parsed = ParseFlowAddress(address.address)) context.node_addresses.insert(*parsed);
    }
  }
  for (const NetnsClassification& netns : classified) {
    const auto inode = static_cast<uint32_t>(netns.netns_inode);
    if (!netns.pod.empty()) context.pods[inode] = netns.pod;
    if (netns.is_host) continue;
    // Ambient rules, a ZDS hand-off or ztunnel serving it (in-pod listeners, a held netns fd):
    // a netns whose rules broke is still one ztunnel should see all traffic of.
    if (netns.mode == DataplaneMode::kAmbient || netns.zds_state == ZdsState::kHandedOff ||
        !netns.ztunnel_listeners.empty() || !netns.ztunnel_pids.empty()) {
      context.ambient_netns.insert(inode);
    }
  }
  return context;
}

std::vector<Flow> FlowsInWindow(const FlowTableView& view, int64_t now_unix_ns,
                                std::chrono::milliseconds window) {
  const int64_t since = now_unix_ns - window.count() * 1'000'000;
  std::vector<Flow> flows = view.open;
  for (const Flow& flow : view.closed) {
    if (flow.ended_unix_ns >= since) flows.push_back(flow);
  }
  return flows;
}

std::vector<Finding> FlowFindings(const FlowTracerStatus& status, const FlowTableView& view,
                                  const FlowCheckContext& context, int64_t now_unix_ns,
                                  const FlowFindingOptions& options) {
  if (!status.enabled) return {};
  if (!status.available) return {TracingUnavailableFinding(status.reason)};
  const std::vector<Flow> flows = FlowsInWindow(view, now_unix_ns, options.window);
  std::vector<Finding> findings = CheckHboneConnectFailures(flows, context, options.checks);
  FlowCheckContext timed = context;
  timed.now_unix_ns = now_unix_ns;
  for (Finding& finding : CheckMeshBypass(flows, timed, options.checks)) {
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace ad
