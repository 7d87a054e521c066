// What the daemon's flow checks need from the node scan, and the checks over a flow-table view
// (pure: tested without a tracer). Joins: netns inode -> pod and path (the latest snapshot and
// its analysis), destination IP -> a pod on this node or remote (the pod IPs of the node's netns).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flows/flow_checks.h"
#include "flows/flow_hub.h"
#include "flows/flow_table.h"
#include "model/finding.h"
#include "model/snapshot.h"

namespace ad {

// An address as the snapshot spells it ("10.0.0.1", "fd00::1"); nullopt when it is not one.
std::optional<FlowAddress> ParseFlowAddress(const std::string& text);

// Pod IPs (global-scope addresses of every netns but the host's) are the same-node destinations;
// ambient netns are those the recognizer found ambient rules in, that ztunnel was handed, or
// that ztunnel serves (listeners or a netns fd).
// `classified`: the analysis's per-netns conclusions (NodeAnalysis::netns).
FlowCheckContext FlowContextOf(const NodeSnapshot& snapshot,
                               const std::vector<NetnsClassification>& classified);

// The flows the checks judge: every open one, and the closed ones that ended within `window`
// before `now_unix_ns` (so a burst of failures resolves once it is old).
std::vector<Flow> FlowsInWindow(const FlowTableView& view, int64_t now_unix_ns,
                                std::chrono::milliseconds window);

struct FlowFindingOptions {
  FlowCheckConfig checks;
  std::chrono::milliseconds window{std::chrono::minutes(5)};
};

// TRACING_UNAVAILABLE (with the reason) when tracing was asked for and is not running; else
// HBONE_CONNECT_FAILURES and MESH_BYPASS over the window. Nothing when tracing is disabled.
std::vector<Finding> FlowFindings(const FlowTracerStatus& status, const FlowTableView& view,
                                  const FlowCheckContext& context, int64_t now_unix_ns,
                                  const FlowFindingOptions& options = {});

}  // namespace ad
