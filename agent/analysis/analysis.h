// Analysis entry point: pure functions from a NodeSnapshot to classifications and findings. No
// kernel, netlink or library headers here; everything is testable without root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/history.h"
#include "model/finding.h"
#include "model/istio_facts.h"
#include "model/snapshot.h"

namespace ad {

struct AnalysisOptions {
  // Accepted probe SNAT addresses (Istio's defaults; its unit tests use another IPv6 one).
  std::vector<std::string> probe_snat_v4 = {std::string(istio::kProbeSnatV4)};
  std::vector<std::string> probe_snat_v6 = {std::string(istio::kProbeSnatV6),
                                            std::string(istio::kProbeSnatV6IstioTests)};
  // A ZDS hand-off signal seen continuously for at least this long is a stall, not pending.
  int64_t zds_stall_threshold_ms = 30000;
  // False for a one-shot report: no earlier scan, so nothing can be aged. A pending hand-off whose
  // pod is black-holed now is then raised to warning ("age unknown") instead of passing as info.
  bool history_known = true;
  // PROBE_PATH_BROKEN: unreplied probe connections to a pod must have persisted this long, by
  // the engine's history (seen in consecutive scans) or by the kernel's own entry age.
  int64_t probe_path_threshold_ms = 10000;

  // ZTUNNEL_CERT_UNHEALTHY: a certificate of a pod identity on this node that expires within this
  // long (or is Unavailable) is a finding (--cert-expiry-warning).
  int64_t cert_expiry_warning_ms = 3'600'000;
  // ZTUNNEL_RESOURCE_PRESSURE: open fds / soft "Max open files", RSS / cgroup memory limit, and
  // CLOSE_WAIT growth: strictly increasing over the last `close_wait_growth_scans` counts and at
  // least `close_wait_min` now (a busy ztunnel has a few in passing).
  double fd_pressure_ratio = 0.8;
  double memory_pressure_ratio = 0.9;
  size_t close_wait_growth_scans = 3;
  uint32_t close_wait_min = 8;
};

struct NodeAnalysis {
  std::vector<NetnsClassification> netns;  // same order as snapshot.netns
  std::vector<Finding> findings;           // in SortFindings order (model/finding.h)
};

NodeAnalysis Analyze(const NodeSnapshot& snapshot, const AnalysisOptions& options = {});
// Same, ageing ZDS signals with `history` (updated: first-seen times of the signals in this
// snapshot are kept, the others forgotten). A null history behaves like a one-shot report.
NodeAnalysis Analyze(const NodeSnapshot& snapshot, const AnalysisOptions& options,
                     History* history);

// Recognizer for one netns (used by Analyze and by the `rules` command).
NetnsClassification Classify(const NetnsSnapshot& netns, const AnalysisOptions& options = {});

}  // namespace ad
