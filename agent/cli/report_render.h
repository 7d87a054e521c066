// Renders a scanned node (snapshot + analysis) as the human report or the JSON document
// "ambient-doctor.report/v1". Pure functions: unit-tested without root.
#pragma once

#include <string>

#include "analysis/analysis.h"
#include "model/snapshot.h"

namespace ad::cli {

inline constexpr const char* kReportSchema = "ambient-doctor.report/v1";

struct RenderOptions {
  bool color = false;
  bool show_all_netns = true;  // false: only netns with Istio state or findings
};

std::string RenderReportTable(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                              const RenderOptions& options);
std::string RenderReportJson(const NodeSnapshot& snapshot, const NodeAnalysis& analysis);

// Exit code contract: 0 = no finding at warning or above, 1 = at least one.
int ReportExitCode(const NodeAnalysis& analysis);

// "ok", or the worst severity among the netns's findings.
std::string NetnsStatus(const NodeAnalysis& analysis, uint64_t inode);

}  // namespace ad::cli
