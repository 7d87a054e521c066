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
#include "model/istio_facts.h"

namespace ad {

struct FlowCheckConfig {
  uint16_t hbone_port = istio::kZtunnelInboundPort;
  uint16_t outbound_capture_port = istio::kZtunnelOutboundPort;  // ztunnel's in-pod outbound
  // ztunnel's DNS proxy (DNS capture redirects TCP :53 to it).
  uint16_t dns_capture_port = istio::kDnsCapturePort;
  uint32_t ztunnel_mark = istio::kInpodMark;
  uint32_t ztunnel_mark_mask = istio::kInpodMask;  // Istio's rules match the mark under this mask
  // HBONE_CONNECT_FAILURES: per source netns and locality, at least this many failed connects
  // and at least this share of the attempts in the window.
  uint64_t min_failures = 3;
  double min_failure_ratio = 0.2;
  size_t worst_destinations = 3;  // destinations named in the evidence
  size_t max_bypass_evidence = 5;
  // MESH_BYPASS: an application connect established this recently is not judged yet: ztunnel's
  // accept of it is a separate event that may arrive in the next batch.
  int64_t bypass_settle_ms = 1000;
};

// What the checks need to know about the node besides the flows.
struct FlowCheckContext {
  std::set<FlowAddress> node_addresses;         // pod IPs on this node: "same-node" destinations
  std::set<uint32_t> ambient_netns;             // netns enrolled in ambient (MESH_BYPASS applies)
  std::map<uint32_t, std::string> netns_paths;  // for the findings' netns_path
  std::map<uint32_t, std::string> pods;         // netns inode -> "namespace/name"
  int64_t now_unix_ns = 0;  // when the checks run (MESH_BYPASS's settle time); 0: not applied
};

// Client flows to the HBONE port (closed ones in the window; open ones count as attempts),
// grouped by source netns and by destination locality ("same-node" / "remote" = the subject).
std::vector<Finding> CheckHboneConnectFailures(const std::vector<Flow>& flows,
                                               const FlowCheckContext& context,
                                               const FlowCheckConfig& config = {});

// Client flows of ambient netns that were established to a non-loopback destination without
// ztunnel's mark and without a ztunnel accept on a capture port (outbound 15001, DNS 15053) whose
// peer is the flow's source (one finding per netns; the flows are the evidence). Not judged:
// connects to the netns's own address (Istio lets `-o lo` traffic pass) and ones established
// within the settle time. Needs flows traced for every destination port of those netns plus the
// server side of the capture ports (the tracer's mesh-bypass mode).
std::vector<Finding> CheckMeshBypass(const std::vector<Flow>& flows,
                                     const FlowCheckContext& context,
                                     const FlowCheckConfig& config = {});

// The node-level info finding when the tracer could not be loaded (`reason` from the loader).
Finding TracingUnavailableFinding(const std::string& reason);

}  // namespace ad
