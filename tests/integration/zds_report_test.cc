// Acceptance tests of the ZDS cross-check, end to end: the lab with cni-sim and ztunnel-sim, the
// real ambient-doctor binary (report and watch), its JSON. Each fault must surface as its finding;
// the agent must never connect to the ZDS socket.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "lab/emulators.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "model/json_parse.h"

namespace ad {
namespace {

using lab::FaultKind;
using lab::LabBackend;

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";

std::string UniquePrefix(const std::string& tag) {
  return "adz" + std::to_string(::getpid() % 100000) + tag;
}

class ZdsReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

// (netns path → codes) from `report -o json`.
struct Report {
  int exit_code = -1;
  std::map<std::string, std::set<std::string>> codes_by_netns;
  std::vector<std::string> evidence;  // every evidence line, for substring checks
  std::string raw;
};

Report RunReport(const lab::LabNode& node, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {kDoctor, "report", "--lab-prefix", node.prefix,
                                   "-o",    "json",   "--no-cri"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Report report;
  auto out = lab::RunCommand({argv, "", ""});
  if (!out.ok()) return report;
  report.exit_code = out->exit_code;
  report.raw = out->out + out->err;
  auto parsed = ParseJson(out->out);
  if (!parsed.value) return report;
  const JsonValue* findings = parsed.value->Get("findings");
  if (findings == nullptr) return report;
  for (const JsonValue& f : findings->items()) {
    const JsonValue* netns = f.Get("netns");
    report.codes_by_netns[netns ? netns->GetString("path") : ""].insert(f.GetString("code"));
    if (const JsonValue* evidence = f.Get("evidence")) {
      for (const JsonValue& line : evidence->items()) report.evidence.push_back(line.AsString());
    }
  }
  return report;
}

std::string PodPath(const lab::LabNode& node, int index) {
  return node.pods.at(static_cast<size_t>(index)).netns_path;
}

TEST_F(ZdsReportTest, HealthyZdsLabHasNoFindingsOnEveryBackend) {
  for (LabBackend backend : {LabBackend::kLegacy, LabBackend::kIptablesNft, LabBackend::kNft}) {
    lab::LabOptions options;
    options.prefix = UniquePrefix("h");
    options.pods = 3;
    options.plain_pods = 1;
    options.backend = backend;
    options.zds = true;
    lab::ScopedLab lab(options);
    ASSERT_TRUE(lab.ok()) << lab.error().message;
    Report report = RunReport(lab.node());
    EXPECT_EQ(report.exit_code, 0) << report.raw;
    EXPECT_TRUE(report.codes_by_netns.empty()) << report.raw;
    EXPECT_NE(report.raw.find("\"zds_state\": \"handed-off\""), std::string::npos) << report.raw;
  }
}

TEST_F(ZdsReportTest, PodFaultsGiveTheirFindings) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("p");
  options.pods = 4;  // pod 3 stays healthy
  options.zds = true;
  options.faults = {{FaultKind::kZtunnelNoListeners, 0},
                    {FaultKind::kRedirectMissing, 1},
                    {FaultKind::kStaleWorkload, 2}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  Report report = RunReport(lab.node());
  EXPECT_EQ(report.exit_code, 1) << report.raw;
  EXPECT_TRUE(report.codes_by_netns[PodPath(lab.node(), 0)].count("ZTUNNEL_LISTENERS_MISSING"))
      << report.raw;
  EXPECT_TRUE(report.codes_by_netns[PodPath(lab.node(), 1)].count("REDIRECT_MISSING"))
      << report.raw;
  bool stale = false;
  for (const auto& [netns, codes] : report.codes_by_netns) {
    stale = stale || codes.count("ZTUNNEL_STALE_WORKLOAD") > 0;
  }
  EXPECT_TRUE(stale) << report.raw;
  EXPECT_EQ(report.codes_by_netns.count(PodPath(lab.node(), 3)), 0u) << report.raw;
}

TEST_F(ZdsReportTest, KilledZtunnelIsDisconnected) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("c");
  options.pods = 2;
  options.zds = true;
  options.faults = {{FaultKind::kZtunnelCrash, std::nullopt}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  Report report = RunReport(lab.node());
  bool disconnected = false;
  for (const auto& [netns, codes] : report.codes_by_netns) {
    disconnected = disconnected || codes.count("ZDS_DISCONNECTED") > 0;
  }
  EXPECT_TRUE(disconnected) << report.raw;
}

TEST_F(ZdsReportTest, DeadlockBecomesStallWithinThresholdPlusOneInterval) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("d");
  options.pods = 2;
  options.zds = true;
  options.faults = {{FaultKind::kZdsDeadlock, std::nullopt}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;

  // Threshold 2 s, one scan every 500 ms, 10 scans: the stall must open by scan 1 + 2 s / 0.5 s.
  const auto started = std::chrono::steady_clock::now();
  auto out =
      lab::RunCommand({{kDoctor, "watch", "--lab-prefix", lab.node().prefix, "--no-cri",
                        "--interval", "500ms", "--count", "10", "--zds-stall-threshold", "2s"},
                       "",
                       ""});
  ASSERT_TRUE(out.ok());
  const std::string& log = out->out;
  const size_t pending = log.find("opened ZDS_PENDING");
  const size_t stall = log.find("opened ZDS_STALL");
  ASSERT_NE(pending, std::string::npos) << log;
  ASSERT_NE(stall, std::string::npos) << log;
  EXPECT_LT(pending, stall) << "young signals are pending first";
  EXPECT_NE(log.find("unread"), std::string::npos) << "evidence names the unread hello\n" << log;
  // Detection latency from the first scan: the timestamps are the snapshot times.
  auto stamp = [&](size_t line_start) {
    const size_t begin = log.rfind('\n', line_start);
    const std::string line = log.substr(begin == std::string::npos ? 0 : begin + 1, 23);
    // "2026-11-30T04:04:03.393" → seconds of the day.
    const int h = std::stoi(line.substr(11, 2)), m = std::stoi(line.substr(14, 2));
    const double s = std::stod(line.substr(17, 6));
    return h * 3600.0 + m * 60.0 + s;
  };
  const double latency = stamp(stall) - stamp(pending);
  EXPECT_GE(latency, 2.0 - 0.01) << log;
  EXPECT_LE(latency, 2.0 + 0.5 + 0.5) << "threshold + one interval (+ scheduling slack)\n" << log;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
}

TEST_F(ZdsReportTest, AgentNeverConnectsToTheZdsSocket) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("n");
  options.pods = 2;
  options.zds = true;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const auto before = lab::ReadStatsFile(lab.node().zds.stats_file);
  ASSERT_TRUE(before.count("accepted_connections")) << "cni-sim stats file readable";
  auto out = lab::RunCommand({{kDoctor, "watch", "--lab-prefix", lab.node().prefix, "--no-cri",
                               "--interval", "10ms", "--count", "100"},
                              "",
                              ""});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->exit_code, 0) << out->err;
  // cni-sim rewrites its stats after each event; give it a moment to settle.
  ::usleep(200 * 1000);
  const auto after = lab::ReadStatsFile(lab.node().zds.stats_file);
  EXPECT_EQ(after.at("accepted_connections"), before.at("accepted_connections"))
      << "only ztunnel-sim may ever connect";
}

}  // namespace
}  // namespace ad
