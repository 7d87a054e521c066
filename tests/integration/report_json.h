// `ambient-doctor report -o json` as the integration tests read it: each finding's fields, and a
// run of the real binary with its exit code and raw output (for failure messages).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lab/exec.h"
#include "model/json_reader.h"

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

// A JSON number as an integer; also the quoted form protobuf's JSON printer gives 64-bit fields.
// 0 when absent, null or neither.
inline int64_t JsonInt(const rapidjson::Value* value) {
  if (value == nullptr) return 0;
  if (value->IsInt64()) return value->GetInt64();
  if (value->IsNumber()) return static_cast<int64_t>(value->GetDouble());
  const std::string_view text = JsonText(value);
  int64_t out = 0;
  std::from_chars(text.data(), text.data() + text.size(), out);
  return out;
}

inline JsonFinding ToFinding(const rapidjson::Value& f) {
  JsonFinding out;
  out.code = JsonStringMember(f, "code");
  out.severity = JsonStringMember(f, "severity");
  out.subject = JsonStringMember(f, "subject");
  if (const rapidjson::Value* netns = JsonMember(f, "netns")) {
    out.netns_path = JsonStringMember(*netns, "path");
    out.netns_inode = static_cast<uint64_t>(JsonInt(JsonMember(*netns, "inode")));
  }
  if (const rapidjson::Value* evidence = JsonMember(f, "evidence");
      evidence && evidence->IsArray()) {
    for (const rapidjson::Value& line : evidence->GetArray())
      out.evidence.emplace_back(JsonText(&line));
  }
  out.since_unix_ms = JsonInt(JsonMember(f, "since_unix_ms"));
  return out;
}

inline std::vector<JsonFinding> ToFindings(const rapidjson::Value* array) {
  std::vector<JsonFinding> out;
  if (array == nullptr || !array->IsArray()) return out;
  for (const rapidjson::Value& f : array->GetArray()) out.push_back(ToFinding(f));
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
  rapidjson::Document parsed;
  if (ParseJsonDocument(out->out, parsed).ok()) {
    report.findings = ToFindings(JsonMember(parsed, "findings"));
  }
  return report;
}

inline bool EvidenceHas(const JsonFinding& finding, std::string_view text) {
  for (const std::string& line : finding.evidence) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace ad::test
