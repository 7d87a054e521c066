// Feeds the flow tracer's watched-netns map (mesh-bypass mode) from the engine's published
// results: the netns the flow checks treat as ambient (FlowContextOf: ambient rules, a ZDS
// hand-off, ztunnel listeners or a held netns fd), so MESH_BYPASS sees those pods' application
// connects without tracing the rest of the node. An output like the metrics feed: it follows the
// ResultHub, never scans, and writes the map only when the set changed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "engine/result_hub.h"

namespace ad {

// The inodes to watch for one result (sorted); nullopt when the result cannot say (unusable or
// light), so the map keeps what it has.
std::optional<std::vector<uint32_t>> BypassNetnsOf(const PublishedResult& result);

// Until `results` stops: after every published result, `apply` gets the set when it differs
// from the last one applied (FlowMonitor::SetBypassNetns).
void FollowResultsIntoBypassNetns(const ResultHub& results,
                                  const std::function<void(const std::vector<uint32_t>&)>& apply);

}  // namespace ad
