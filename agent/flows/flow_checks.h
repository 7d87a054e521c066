// Findings from traced flows (pure, analysis style: flows in, findings out; tested without root):
// HBONE_CONNECT_FAILURES, MESH_BYPASS and TRACING_UNAVAILABLE.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "flows/flow.h"
#include "model/finding.h"

namespace ad {

struct FlowCheckConfig {
  uint16_t hbone_port = 15008;
  uint16_t outbound_capture_port = 15001;  // ztunnel's in-pod outbound listener
  uint32_t ztunnel_mark = 0x539;
  // HBONE_CONNECT_FAILURES: per source netns and locality, at least this many failed connects
  // and at least this share of the attempts in the window.
  uint64_t min_failures = 3;
  double min_failure_ratio = 0.2;
  size_t worst_destinations = 3;  // destinations named in the evidence
  size_t max_bypass_evidence = 5;
};

// What the checks need to know about the node besides the flows.
struct FlowCheckContext {
  std::set<FlowAddress> node_addresses;         // pod IPs on this node: "same-node" destinations
  std::set<uint32_t> ambient_netns;             // netns enrolled in ambient (MESH_BYPASS applies)
  std::map<uint32_t, std::string> netns_paths;  // for the findings' netns_path
  std::map<uint32_t, std::string> pods;         // netns inode -> "namespace/name"
};

// Client flows to the HBONE port (closed ones in the window; open ones count as attempts),
// grouped by source netns and by destination locality ("same-node" / "remote" = the subject).
std::vector<Finding> CheckHboneConnectFailures(const std::vector<Flow>& flows,
                                               const FlowCheckContext& context,
                                               const FlowCheckConfig& config = {});

// Client flows of ambient netns that were established to a non-loopback destination without
// ztunnel's mark and without a ztunnel accept on the outbound capture port whose peer is the
// flow's source (one finding per netns; the flows are the evidence). Needs flows traced for every
// destination port of those netns plus the server side of the capture port.
std::vector<Finding> CheckMeshBypass(const std::vector<Flow>& flows,
                                     const FlowCheckContext& context,
                                     const FlowCheckConfig& config = {});

// The node-level info finding when the tracer could not be loaded (`reason` from the loader).
Finding TracingUnavailableFinding(const std::string& reason);

}  // namespace ad
