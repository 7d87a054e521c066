// Analysis entry point: pure functions from a NodeSnapshot to classifications and findings. No
// kernel, netlink or library headers here; everything is testable without root.
#pragma once

#include <string>
#include <vector>

#include "model/finding.h"
#include "model/snapshot.h"

namespace ad {

struct AnalysisOptions {
  // Accepted probe SNAT addresses (Istio's defaults; its unit tests use another IPv6 one).
  std::vector<std::string> probe_snat_v4 = {"169.254.7.127"};
  std::vector<std::string> probe_snat_v6 = {"fd16:9254:7127:1337:ffff:ffff:ffff:ffff",
                                            "e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164"};
};

struct NodeAnalysis {
  std::vector<NetnsClassification> netns;  // same order as snapshot.netns
  std::vector<Finding> findings;           // sorted: severity desc, then netns path, then code
};

NodeAnalysis Analyze(const NodeSnapshot& snapshot, const AnalysisOptions& options = {});

// Recognizer for one netns (used by Analyze and by the `rules` command).
NetnsClassification Classify(const NetnsSnapshot& netns, const AnalysisOptions& options = {});

}  // namespace ad
