// Renders a scanned node (snapshot + analysis) as the human report or the JSON document
// "ambient-doctor.report/v2" (the protobuf JSON of ambientdoctor.v1.Report). Pure functions:
// unit-tested without root.
#pragma once

#include <string>

#include "analysis/analysis.h"
#include "analysis/history.h"
#include "api/report_proto.h"
#include "model/snapshot.h"
#include "report/report_policy.h"

namespace ad::cli {

inline constexpr const char* kReportSchema = api::kReportSchema;
inline constexpr const char* kChangesSchema = "ambient-doctor.changes/v1";

struct RenderOptions {
  bool color = false;
  bool show_all_netns = true;  // false: only netns with Istio state or findings
};

std::string RenderReportTable(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                              const RenderOptions& options);
std::string RenderReportJson(const NodeSnapshot& snapshot, const NodeAnalysis& analysis);

// `watch`: one line per opened/resolved finding, stamped with the scan time (UTC), e.g.
// "2026-08-22T10:00:30.000Z critical opened ZDS_STALL /run/netns/x (inode 5) pod demo/a: ...".
std::string RenderChangeLines(const std::vector<FindingChange>& changes, int64_t taken_at_unix_ms,
                              bool color);
// `watch -o json`: one single-line JSON document per change set (schema kChangesSchema).
std::string RenderChangesJson(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                              const std::vector<FindingChange>& changes);

}  // namespace ad::cli
