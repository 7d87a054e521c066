// The finding table's alert and runbook columns (AlertForFinding, RunbookForFinding) are
// documentation that must match deploy/monitoring/prometheusrule.yaml: every named alert exists
// there with a runbook, its expression covers the code, every code an alert expression names maps
// back to that alert, every critical code pages as critical, and the runbook index
// (docs/runbooks/README.md) lists every such alert.
#include "report/finding_alerts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

namespace ad {
namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// alert name -> the text of its rule (up to the next alert).
std::map<std::string, std::string> AlertRules() {
  const std::string text =
      ReadFile(std::filesystem::path(AD_SOURCE_DIR) / "deploy/monitoring/prometheusrule.yaml");
  std::map<std::string, std::string> rules;
  const std::regex alert_line(R"(- alert: (\w+))");
  std::vector<std::pair<std::string, size_t>> starts;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), alert_line);
       it != std::sregex_iterator(); ++it) {
    starts.emplace_back((*it)[1].str(), static_cast<size_t>(it->position()));
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1].second : text.size();
    rules[starts[i].first] = text.substr(starts[i].second, end - starts[i].second);
  }
  return rules;
}

TEST(FindingAlerts, EveryNamedAlertExistsCoversItsCodeAndHasARunbook) {
  const auto rules = AlertRules();
  ASSERT_FALSE(rules.empty());
  int with_alert = 0;
  for (const FindingCodeInfo& info : AllFindingCodes()) {
    const std::string alert(AlertForFinding(info.code));
    if (alert.empty()) {
      EXPECT_EQ(RunbookForFinding(info.code), "");
      continue;
    }
    ++with_alert;
    ASSERT_TRUE(rules.contains(alert)) << info.name << " -> " << alert;
    const std::string& rule = rules.at(alert);
    EXPECT_TRUE(rule.find(std::string(info.name)) != std::string::npos ||
                rule.find("redirect_state") != std::string::npos ||
                rule.find("ambient_doctor_zds_stall") != std::string::npos)
        << alert << " does not cover " << info.name;
    EXPECT_NE(rule.find(RunbookForFinding(info.code)), std::string::npos)
        << alert << " has no runbook_url to " << RunbookForFinding(info.code);
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(AD_SOURCE_DIR) /
                                        RunbookForFinding(info.code)))
        << RunbookForFinding(info.code);
    EXPECT_EQ(info.alert, alert);
    EXPECT_EQ(info.runbook, RunbookForFinding(info.code));
  }
  EXPECT_GE(with_alert, 8);
}

// A critical code pages as critical: it has an alert, and that alert's rule says so.
TEST(FindingAlerts, EveryCriticalCodePagesAsCritical) {
  const auto rules = AlertRules();
  const std::regex critical(R"(\n\s*severity: critical\b)");
  for (const FindingCodeInfo& info : AllFindingCodes()) {
    if (info.severity != Severity::kCritical) continue;
    ASSERT_FALSE(info.alert.empty()) << info.name << " is critical but no alert pages for it";
    ASSERT_TRUE(rules.contains(std::string(info.alert))) << info.alert;
    EXPECT_TRUE(std::regex_search(rules.at(std::string(info.alert)), critical))
        << info.name << " is critical but " << info.alert << " is not";
  }
}

TEST(FindingAlerts, EveryCodeAnAlertNamesMapsBackToIt) {
  for (const auto& [alert, rule] : AlertRules()) {
    for (const FindingCodeInfo& info : AllFindingCodes()) {
      const std::regex named("code=~?\"[^\"]*\\b" + std::string(info.name) + "\\b");
      if (std::regex_search(rule, named)) {
        EXPECT_EQ(AlertForFinding(info.code), alert) << info.name;
      }
    }
  }
}

TEST(FindingAlerts, RunbookIndexListsEveryAlertOfTheTable) {
  const std::string index =
      ReadFile(std::filesystem::path(AD_SOURCE_DIR) / "docs/runbooks/README.md");
  ASSERT_FALSE(index.empty());
  for (const FindingCodeInfo& info : AllFindingCodes()) {
    if (info.alert.empty()) continue;
    // The index's first column links the page: "| [`AmbientZdsStall`](AmbientZdsStall.md) |".
    const std::string row =
        "| [`" + std::string(info.alert) + "`](" + std::string(info.alert) + ".md) |";
    const std::string link = "(" + std::string(info.alert) + ".md)";
    EXPECT_NE(index.find(row), std::string::npos) << info.alert << " has no row in the index";
    EXPECT_NE(index.find(link), std::string::npos) << info.alert << " has no link in the index";
  }
}

}  // namespace
}  // namespace ad
