// The real `ambient-doctor` binary run from an integration test, and its `report -o json` read
// back into the proto the printer wrote it from (`pb::Report`), with the finding lookups the CNI
// tests share.
#pragma once

#include <google/protobuf/util/json_util.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.pb.h"
#include "lab/exec.h"

namespace ad::test {

namespace pb = ::ambientdoctor::v1;

// The build's ambient-doctor binary.
inline std::string DoctorBinary() { return std::string(AD_BINARY_DIR) + "/agent/ambient-doctor"; }

// Runs it with `args`; exit code -1 when it could not be started.
inline lab::CommandOutput RunDoctor(std::vector<std::string> args) {
  args.insert(args.begin(), DoctorBinary());
  Result<lab::CommandOutput> out = lab::RunCommand({args, "", ""});
  if (!out.ok()) return lab::CommandOutput{-1, "", out.error().message};
  return std::move(out).value();
}

inline std::optional<pb::Report> ParseReportJson(const std::string& json) {
  pb::Report report;
  if (!google::protobuf::util::JsonStringToMessage(json, &report).ok()) return std::nullopt;
  return report;
}

// Every finding, one line each with its evidence indented: for failure messages.
inline std::string DumpFindings(const pb::Report& report) {
  std::string out;
  for (const pb::Finding& f : report.findings()) {
    out += f.code() + " [" + f.subject() + "] " + f.netns().path() + " " + f.pod() + ": " +
           f.summary() + "\n";
    for (const std::string& e : f.evidence()) out += "    " + e + "\n";
  }
  return out;
}

inline std::vector<const pb::Finding*> FindingsWithCode(const pb::Report& report,
                                                        const std::string& code) {
  std::vector<const pb::Finding*> found;
  for (const pb::Finding& f : report.findings()) {
    if (f.code() == code) found.push_back(&f);
  }
  return found;
}

// Whether a line of the finding's evidence contains `text`.
inline bool EvidenceMentions(const pb::Finding& f, const std::string& text) {
  for (const std::string& e : f.evidence()) {
    if (e.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace ad::test
