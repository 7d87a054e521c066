// The report model as protobuf messages (proto/ambientdoctor/v1): one conversion from the engine's
// snapshot + analysis (+ finding history) that both `report -o json` and the gRPC API use, so the
// JSON document has no second, hand-written schema.
#pragma once

#include <string>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.pb.h"
#include "analysis/analysis.h"
#include "analysis/desired_state.h"
#include "analysis/history.h"
#include "engine/result_hub.h"
#include "model/snapshot.h"

namespace ad::api {

inline constexpr const char* kReportSchema = "ambient-doctor.report/v2";

namespace pb = ::ambientdoctor::v1;

// History of the findings, when the caller has it (the daemon); the one-shot report has none.
struct ReportHistory {
  // First/last seen of analysis.findings, in the same order (ignored unless sizes match).
  const std::vector<FindingRecord>* finding_records = nullptr;
  const std::vector<FindingRecord>* recently_resolved = nullptr;
};

// `desired`: the step's desired-state analysis (nullptr: none ran); the report's kubernetes
// section is filled whenever the snapshot has a Kubernetes view.
pb::Report BuildReport(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                       const ReportHistory& history = {}, const DesiredAnalysis* desired = nullptr);
pb::Finding BuildFinding(const Finding& finding);
pb::Finding BuildFinding(const FindingRecord& record);
pb::NetnsEntry BuildNetnsEntry(const NetnsSnapshot& netns, const NetnsClassification& c,
                               const NodeAnalysis& analysis);
pb::NetnsRules BuildNetnsRules(const NetnsSnapshot& netns, const NetnsClassification& c,
                               const NodeAnalysis& analysis);

// The daemon's part of a report's origin: source "daemon", the result's sequence and trigger,
// history on. The client adds the socket and the age.
void FillDaemonOrigin(const PublishedResult& result, pb::ReportOrigin* origin);

// protobuf's JSON printer: proto field names, every scalar printed (absent only for unknown
// optional values and messages), indented unless `compact`.
std::string ToJson(const google::protobuf::Message& message, bool compact = false);

}  // namespace ad::api
