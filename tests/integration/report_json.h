// `ambient-doctor report -o json` as the integration tests read it: each finding's fields, and a
// run of the real binary with its exit code and raw output (for failure messages).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lab/exec.h"
#include "model/json_parse.h"

namespace ad::test {

// One finding of the agent's JSON (report and watch share the shape).
struct JsonFinding {
  std::string code;
  std::string severity;
  std::string netns_path;  // empty for node findings and netns without a path
  uint64_t netns_inode = 0;
  std::string subject;
  std::vector<std::string> evidence;
  int64_t since_unix_ms = 0;  // 0 when null
};

inline JsonFinding ToFinding(const JsonValue& f) {
  JsonFinding out;
  out.code = f.GetString("code");
  out.severity = f.GetString("severity");
  out.subject = f.GetString("subject");
  if (const JsonValue* netns = f.Get("netns")) {
    out.netns_path = netns->GetString("path");
    if (const JsonValue* inode = netns->Get("inode")) {
      out.netns_inode = static_cast<uint64_t>(inode->AsNumber());
    }
  }
  if (const JsonValue* evidence = f.Get("evidence")) {
    for (const JsonValue& line : evidence->items()) out.evidence.push_back(line.AsString());
  }
  if (const JsonValue* since = f.Get("since_unix_ms")) {
    out.since_unix_ms = static_cast<int64_t>(since->AsNumber());
  }
  return out;
}

inline std::vector<JsonFinding> ToFindings(const JsonValue* array) {
  std::vector<JsonFinding> out;
  if (array == nullptr) return out;
  for (const JsonValue& f : array->items()) out.push_back(ToFinding(f));
  return out;
}

struct ReportRun {
  int exit_code = -1;  // -1: the binary did not run
  std::vector<JsonFinding> findings;
  std::string raw;  // stdout + stderr
};

// Runs `argv` (a `report ... -o json` command line) and parses its findings.
inline ReportRun RunReportJson(std::vector<std::string> argv) {
  ReportRun report;
  auto out = lab::RunCommand({std::move(argv), "", ""});
  if (!out.ok()) return report;
  report.exit_code = out->exit_code;
  report.raw = out->out + out->err;
  auto parsed = ParseJson(out->out);
  if (parsed.value) report.findings = ToFindings(parsed.value->Get("findings"));
  return report;
}

inline bool EvidenceHas(const JsonFinding& finding, std::string_view text) {
  for (const std::string& line : finding.evidence) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace ad::test
