// The proto renderers against golden files made by the snapshot-based renderers they replaced
// (written by this test at the commit that added it, on the renderers of main 5086a23): a local
// scan (BuildReport -> render) prints byte for byte what it printed before the report model moved
// to the proto. AD_UPDATE_GOLDEN=1 rewrites the files (then review the diff: it must be empty for
// a local scan). rules.json and changes.json were rewritten once, when `rules -o json` and
// `watch -o json` moved to protobuf's JSON printer: parsed, every old key keeps its value and type;
// the added keys, the key order and the indentation are listed in CHANGELOG.md.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/report_render.h"
#include "cli/rules_render.h"
#include "render_fixtures.h"

namespace ad::cli {
namespace {

std::string GoldenPath(const std::string& name) {
  return std::string(AD_SOURCE_DIR) + "/tests/unit/golden/render/" + name;
}

void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = GoldenPath(name);
  if (std::getenv("AD_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "missing golden file " << path << " (AD_UPDATE_GOLDEN=1 writes it)";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(expected.str(), actual) << "differs from " << path;
}

std::string Table(const test::RenderFixture& f, bool color, bool all) {
  RenderOptions options;
  options.color = color;
  options.show_all_netns = all;
  return RenderReportTable(api::BuildReport(f.snapshot, f.analysis), options);
}

TEST(RenderGolden, ReportTables) {
  const test::RenderFixture rules = test::RulesNode();
  ExpectGolden("report_rules.txt", Table(rules, false, true));
  ExpectGolden("report_rules_istio_only.txt", Table(rules, false, false));
  ExpectGolden("report_rules_color.txt", Table(rules, true, true));
  const test::RenderFixture oneshot = test::ZdsRichNode(false);
  ExpectGolden("report_zds_oneshot.txt", Table(oneshot, false, true));
  ExpectGolden("report_zds_oneshot_color.txt", Table(oneshot, true, false));
  ExpectGolden("report_zds_history.txt", Table(test::ZdsRichNode(true), false, true));
  ExpectGolden("report_zds_no_listener.txt", Table(test::ZdsNoListenerNode(), false, true));
}

TEST(RenderGolden, ReportJson) {
  const test::RenderFixture f = test::ZdsRichNode(false);
  ExpectGolden("report_zds_oneshot.json",
               RenderReportJson(api::BuildReport(f.snapshot, f.analysis)));
}

std::vector<FindingChange> SomeChanges() {
  std::vector<FindingChange> changes;
  const test::RenderFixture before = test::RulesNode();
  for (size_t i = 0; i < before.analysis.findings.size() && i < 2; ++i) {
    changes.push_back({FindingChange::Kind::kResolved, before.analysis.findings[i]});
  }
  for (const Finding& f : test::ZdsRichNode(true).analysis.findings) {
    changes.push_back({FindingChange::Kind::kOpened, f});
  }
  return changes;
}

TEST(RenderGolden, WatchChanges) {
  const test::RenderFixture after = test::ZdsRichNode(true);
  const std::vector<FindingChange> changes = SomeChanges();
  const ChangeSet set = LocalChangeSet(after.snapshot, after.analysis, changes);
  ExpectGolden("changes.txt", RenderChangeLines(set, false));
  ExpectGolden("changes_color.txt", RenderChangeLines(set, true));
  ExpectGolden("changes.json", RenderChangesJson(set));
}

TEST(RenderGolden, Rules) {
  const test::RenderFixture f = test::RulesNode();
  std::string text, json;
  for (const NetnsSnapshot& ns : f.snapshot.netns) {
    const NetnsClassification c = Classify(ns);
    const pb::NetnsRules rules = api::BuildNetnsRules(ns, c, NodeAnalysis{});
    text += RenderRulesText(rules) + "\n=====\n";
    json += RenderRulesJson(rules) + "\n=====\n";
  }
  ExpectGolden("rules.txt", text);
  ExpectGolden("rules.json", json);
}

}  // namespace
}  // namespace ad::cli
