// Renders the report model (ambientdoctor.v1.Report, the proto) as the human report or the JSON
// document "ambient-doctor.report/v2", and watch's change sets. One renderer for both paths: a
// local scan goes through api::BuildReport first, a daemon's GetReport answer comes as is. Pure
// functions: unit-tested without root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/history.h"
#include "api/report_proto.h"
#include "model/snapshot.h"
#include "report/report_policy.h"

namespace ad::cli {

inline constexpr const char* kReportSchema = api::kReportSchema;
inline constexpr const char* kChangesSchema = "ambient-doctor.changes/v1";

namespace pb = ::ambientdoctor::v1;

struct RenderOptions {
  bool color = false;
  bool show_all_netns = true;  // false: only netns with Istio state or findings
  // Recently resolved findings listed in the table (newest first); the rest are counted.
  size_t max_recently_resolved = 20;
};

std::string RenderReportTable(const pb::Report& report, const RenderOptions& options);
std::string RenderReportJson(const pb::Report& report);
// One finding as the report lists it (severity, code, netns, pod, summary, ages, evidence, hint).
std::string RenderFindingBlock(const pb::Finding& finding, int64_t taken_at_unix_ms, bool color);
// The report's kubernetes line: the API source, desired counts, istio-cni's pod and taint, or why
// desired state is not judged.
std::string KubernetesLine(const pb::Kubernetes& kube, bool color);

// `explain pod` / `report --pod`: one pod's story as text (a verdict line, then desired state,
// netns pairing, rules, ZDS hand-off, listeners, flows, findings with fixes).
std::string RenderPodText(const pb::PodReport& pod, bool color);
std::string RenderPodJson(const pb::PodReport& pod);
// 0: judged without findings at warning or above; 1: such findings (or the verdict says it is
// not where it should be); 2: not on this node, unknown, or not judged.
int PodExitCode(const pb::PodReport& pod);

// One set of changes for `watch`: from a local engine step, or from the daemon's FindingEvents of
// one published result (the first set: its current findings, each as opened).
struct ChangeSet {
  struct Change {
    bool opened = true;  // else resolved
    pb::Finding finding;
  };
  std::string node;
  double taken_at_unix_ms = 0;
  std::vector<Change> changes;       // in the order they happened (resolved before opened)
  pb::SeverityCounts open_findings;  // after the changes
};

ChangeSet LocalChangeSet(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                         const std::vector<FindingChange>& changes);

// `watch`: one line per opened/resolved finding, stamped with the scan time (UTC), e.g.
// "2026-08-22T10:00:30.000Z critical opened ZDS_STALL /run/netns/x (inode 5) pod demo/a: ...".
std::string RenderChangeLines(const ChangeSet& set, bool color);
// `watch -o json`: one single-line JSON document per change set (schema kChangesSchema): the
// ChangesDocument message (proto/ambientdoctor/v1/documents.proto), written by protobuf's printer.
std::string RenderChangesJson(const ChangeSet& set);

// "2026-08-22T10:00:30Z" (with_millis: "...30.000Z").
std::string FormatUnixMs(int64_t unix_ms, bool with_millis = false);
// "95 s", "3m05s", "2h01m", "3d04h".
std::string FormatDuration(int64_t ms);

}  // namespace ad::cli
