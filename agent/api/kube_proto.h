// The Kubernetes part of the report model: the API source's health and the node section
// (Report.kubernetes, Status.kubernetes), and one pod's story (PodReport, the GetPod answer that
// `report --pod` and `explain pod` print). Conversions only; the judging is analysis's.
#pragma once

#include <string>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.pb.h"
#include "analysis/analysis.h"
#include "analysis/desired_state.h"
#include "analysis/history.h"
#include "model/snapshot.h"

namespace ad::api {

namespace pb = ::ambientdoctor::v1;

inline constexpr const char* kPodReportSchema = "ambient-doctor.pod/v1";

// `desired`: the step's desired analysis (nullptr: none ran).
pb::Kubernetes BuildKubernetes(const NodeSnapshot& snapshot, const DesiredAnalysis* desired);

// "namespace/name" split; false when it is not of that form.
bool SplitPodName(const std::string& text, std::string& namespace_name, std::string& name);

// The story of pod `namespace_name`/`name` as this node's latest result tells it. When the API
// source does not list the pod on this node, location is "unknown" and the caller asks the API
// where it is (FillPodLocation). `records`: first/last seen of analysis.findings, same order
// (nullptr: none).
pb::PodReport BuildPodReport(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                             const DesiredAnalysis* desired,
                             const std::vector<FindingRecord>* records,
                             const std::string& namespace_name, const std::string& name);

// The answer of a GET of the pod for a pod this node does not list: where it runs, that it does
// not exist, or why the API could not say.
void FillPodLocation(bool found, bool not_found, const std::string& node, const std::string& error,
                     const std::string& this_node, pb::PodReport& report);

}  // namespace ad::api
