// Output policy of the report model: what a netns's status is and what exit code a report has.
// Every output (table, JSON, watch, later gRPC and metrics) takes these from here, so they agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.pb.h"
#include "analysis/analysis.h"

namespace ad {

// Exit codes of `report` (and of `watch --count`).
inline constexpr int kExitHealthy = 0;
inline constexpr int kExitFindings = 1;    // at least one finding at warning or above
inline constexpr int kExitScanFailed = 2;  // bad flags, not root, nothing readable

int ReportExitCode(const std::vector<Finding>& findings);
inline int ReportExitCode(const NodeAnalysis& analysis) {
  return ReportExitCode(analysis.findings);
}

// The same rule on the report model, so a daemon's answer and a local scan exit alike.
int ReportExitCode(const ::ambientdoctor::v1::Report& report);
int ReportExitCode(const ::ambientdoctor::v1::SeverityCounts& open_findings);

// "ok", or the worst severity among the findings of the netns with this inode.
std::string NetnsStatus(const NodeAnalysis& analysis, uint64_t inode);

}  // namespace ad
