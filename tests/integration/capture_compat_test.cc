// The compatibility promise of docs/capture.md: a capture written by the first format version
// (tests/data/captures/v1-lab.capture, a lab node with ZDS emulators, kube-api-sim and three
// faults) is read by every later build and judged the same (v1-lab.findings), without root.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "integration/report_proto.h"

namespace ad::test {
namespace {

const std::string kDir = std::string(AD_SOURCE_DIR) + "/tests/data/captures/";

std::vector<std::string> ExpectedFindings() {
  std::ifstream in(kDir + "v1-lab.findings");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  }
  return lines;
}

TEST(CaptureCompat, TheFirstFormatVersionIsJudgedTheSame) {
  const lab::CommandOutput out =
      RunDoctor({"report", "--from", kDir + "v1-lab.capture", "-o", "json"});
  const std::optional<pb::Report> report = ParseReportJson(out.out);
  ASSERT_TRUE(report) << out.out << out.err;
  EXPECT_EQ(out.exit_code, 1) << out.err;
  std::vector<std::string> found;
  for (const pb::Finding& f : report->findings()) {
    found.push_back(f.code() + "\t" + f.subject() + "\t" + std::to_string(f.netns().inode()) +
                    "\t" + f.severity());
  }
  std::sort(found.begin(), found.end());
  const std::vector<std::string> expected = ExpectedFindings();
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(found, expected) << DumpFindings(*report);
  EXPECT_EQ(report->origin().source(), "capture");
  EXPECT_EQ(report->node().name(), "adv1-node");
  EXPECT_EQ(report->netns_size(), 7);
}

TEST(CaptureCompat, RulesAndExplainReadItToo) {
  const lab::CommandOutput rules =
      RunDoctor({"rules", "--from", kDir + "v1-lab.capture", "--netns", "/run/netns/adv1-pod-001"});
  EXPECT_EQ(rules.exit_code, 0) << rules.err;
  EXPECT_NE(rules.out.find("ISTIO_OUTPUT"), std::string::npos) << rules.out;
  const lab::CommandOutput by_inode =
      RunDoctor({"rules", "--from", kDir + "v1-lab.capture", "--netns", "4026532304"});
  EXPECT_EQ(by_inode.out, rules.out);
  const lab::CommandOutput missing =
      RunDoctor({"rules", "--from", kDir + "v1-lab.capture", "--netns", "/run/netns/nope"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("holds no netns"), std::string::npos) << missing.err;
  const lab::CommandOutput explain = RunDoctor(
      {"explain", "pod", "lab/adv1-pod-004", "--from", kDir + "v1-lab.capture", "-o", "json"});
  EXPECT_EQ(explain.exit_code, 1) << explain.out << explain.err;
  EXPECT_NE(explain.out.find("POD_NOT_ENROLLED"), std::string::npos) << explain.out;
}

}  // namespace
}  // namespace ad::test
