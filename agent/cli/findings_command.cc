#include <cstdio>
#include <string>

#include "cli/command_common.h"
#include "model/json.h"
#include "report/finding_alerts.h"

namespace ad::cli {

int RunFindings(const std::vector<std::string>& args) {
  FlagSet flags("findings", "[-o table|json|markdown]",
                "Lists every finding code the agent can emit, with severity, meaning and the alert "
                "(runbook) that pages for it.");
  CommonConfig config;
  AddCommonFlags(flags, config);
  if (auto rc = ParseOrExit(flags, args, nullptr, config.output, {"table", "json", "markdown"})) {
    return *rc;
  }
  const std::string& out = config.output;
  if (out == "json") {
    JsonWriter j;
    j.BeginArray();
    for (const auto& c : AllFindingCodes()) {
      j.BeginObject().Field("code", c.name).Field("severity", SeverityName(c.severity));
      j.Field("meaning", c.meaning).Field("hint", c.hint);
      j.Field("alert", AlertForFinding(c.code)).Field("runbook", RunbookForFinding(c.code));
      j.EndObject();
    }
    j.EndArray();
    std::fputs((j.str() + "\n").c_str(), stdout);
  } else if (out == "markdown") {
    std::fputs("| code | severity | meaning | alert (runbook) |\n|---|---|---|---|\n", stdout);
    for (const auto& c : AllFindingCodes()) {
      const std::string_view alert = AlertForFinding(c.code);
      const std::string paged_by =
          alert.empty() ? "–" : "[" + std::string(alert) + "](" + RunbookForFinding(c.code) + ")";
      std::printf("| `%.*s` | %.*s | %.*s | %s |\n", static_cast<int>(c.name.size()), c.name.data(),
                  static_cast<int>(SeverityName(c.severity).size()),
                  SeverityName(c.severity).data(), static_cast<int>(c.meaning.size()),
                  c.meaning.data(), paged_by.c_str());
    }
  } else {
    for (const auto& c : AllFindingCodes()) {
      std::printf("%-22.*s %-9.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                  static_cast<int>(SeverityName(c.severity).size()),
                  SeverityName(c.severity).data(), static_cast<int>(c.meaning.size()),
                  c.meaning.data());
    }
  }
  return 0;
}

}  // namespace ad::cli
