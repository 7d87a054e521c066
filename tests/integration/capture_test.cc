// `capture -o FILE` of a lab node (ZDS emulators, kube-api-sim, faults) and `report --from FILE`
// run as an unprivileged user: the replay finds what the live report found (codes, subjects,
// netns, severities, redirect modes, desired counts, exit code) and says it judged a capture;
// bad files get exit 2 and a reason; nothing secret is in the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "integration/child_process_util.h"
#include "integration/kube_fixture.h"
#include "lab/exec.h"
#include "lab/kube_objects.h"
#include "lab/lab.h"

namespace ad::test {
namespace {

using Strings = std::vector<std::string>;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Runs ambient-doctor as nobody (setpriv), so a replay proves it needs no privilege.
lab::CommandOutput RunDoctorAsNobody(const Strings& args) {
  Strings command = {"setpriv",        "--reuid=65534",   "--regid=65534",
                     "--clear-groups", "--inh-caps=-all", DoctorBinary()};
  command.insert(command.end(), args.begin(), args.end());
  Result<lab::CommandOutput> out = lab::RunCommand({command, "", ""});
  if (!out.ok()) return lab::CommandOutput{-1, "", out.error().message};
  return std::move(out).value();
}

// What must match between a live report and its capture's replay, one tuple per finding.
std::multiset<std::tuple<std::string, std::string, uint64_t, std::string, std::string>> FindingKeys(
    const pb::Report& report) {
  std::multiset<std::tuple<std::string, std::string, uint64_t, std::string, std::string>> keys;
  for (const pb::Finding& f : report.findings()) {
    keys.emplace(f.code(), f.subject(), f.netns().inode(), f.severity(), f.summary());
  }
  return keys;
}

std::multiset<std::tuple<uint64_t, std::string, std::string>> NetnsKeys(const pb::Report& report) {
  std::multiset<std::tuple<uint64_t, std::string, std::string>> keys;
  for (const pb::NetnsEntry& n : report.netns()) keys.emplace(n.inode(), n.mode(), n.status());
  return keys;
}

class CaptureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    lab::LabOptions options;
    options.prefix = LabPrefix("cap");
    options.pods = 3;
    options.plain_pods = 1;
    options.zds = true;
    options.kube = true;
    options.faults = {{lab::FaultKind::kDeleteRule, 1}, {lab::FaultKind::kNotEnrolled, {}}};
    lab_ = std::make_unique<lab::ScopedLab>(options);
    if (!lab_->ok()) return;
    dir_ = std::make_unique<testing::ScopedTempDir>("adt-cap");
    ::chmod(dir_->path().c_str(), 0755);  // the replay runs as nobody
    capture_file_ = dir_->path() + "/node.capture";
    live_ = RunDoctor({"report", "--lab-prefix", options.prefix, "--local", "-o", "json"});
    capture_ = RunDoctor({"capture", "--lab-prefix", options.prefix, "-o", capture_file_});
    ::chmod(capture_file_.c_str(), 0644);
  }
  static void TearDownTestSuite() {
    dir_.reset();
    lab_.reset();
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    ASSERT_TRUE(lab_->ok()) << lab_->error().message;
    ASSERT_EQ(capture_.exit_code, 0) << capture_.out << capture_.err;
  }

  static inline std::unique_ptr<lab::ScopedLab> lab_;
  static inline std::unique_ptr<testing::ScopedTempDir> dir_;
  static inline std::string capture_file_;
  static inline lab::CommandOutput live_;
  static inline lab::CommandOutput capture_;
};

TEST_F(CaptureTest, ReplayFindsWhatTheLiveReportFound) {
  const std::optional<pb::Report> live = ParseReportJson(live_.out);
  ASSERT_TRUE(live) << live_.out << live_.err;
  ASSERT_FALSE(FindingsWithCode(*live, "POD_NOT_ENROLLED").empty()) << DumpFindings(*live);
  ASSERT_FALSE(FindingsWithCode(*live, "INCOMPLETE_RULESET").empty()) << DumpFindings(*live);
  const lab::CommandOutput out =
      RunDoctorAsNobody({"report", "--from", capture_file_, "-o", "json"});
  const std::optional<pb::Report> replay = ParseReportJson(out.out);
  ASSERT_TRUE(replay) << out.out << out.err;
  EXPECT_EQ(out.exit_code, live_.exit_code) << out.err;
  EXPECT_EQ(FindingKeys(*replay), FindingKeys(*live)) << "replay:\n"
                                                      << DumpFindings(*replay) << "live:\n"
                                                      << DumpFindings(*live);
  EXPECT_EQ(NetnsKeys(*replay), NetnsKeys(*live));
  EXPECT_EQ(replay->kubernetes().pods_desired().DebugString(),
            live->kubernetes().pods_desired().DebugString());
  EXPECT_EQ(replay->node().name(), live->node().name());
  EXPECT_EQ(replay->origin().source(), "capture");
  EXPECT_EQ(replay->origin().capture_file(), capture_file_);
  EXPECT_EQ(replay->origin().captured_from(), "local");
  EXPECT_FALSE(replay->origin().captured_by().empty());
  EXPECT_FALSE(replay->origin().history());
}

TEST_F(CaptureTest, ExplainPodFromTheCapture) {
  const lab::LabPod& not_enrolled = lab_->node().pods.at(3);
  const std::string pod =
      std::string(lab::LabKubeNamespace(not_enrolled)) + "/" + not_enrolled.netns_name;
  const lab::CommandOutput live = RunDoctor(
      {"explain", "pod", pod, "--lab-prefix", lab_->node().prefix, "--local", "-o", "json"});
  const lab::CommandOutput replay =
      RunDoctorAsNobody({"explain", "pod", pod, "--from", capture_file_, "-o", "json"});
  const std::optional<pb::PodReport> a = ParsePodJson(live.out);
  const std::optional<pb::PodReport> b = ParsePodJson(replay.out);
  ASSERT_TRUE(a) << live.out << live.err;
  ASSERT_TRUE(b) << replay.out << replay.err;
  EXPECT_EQ(a->verdict_code(), "not_in_mesh") << a->verdict();
  EXPECT_EQ(b->verdict_code(), a->verdict_code()) << b->verdict();
  EXPECT_EQ(b->verdict(), a->verdict());
  EXPECT_EQ(b->findings_size(), a->findings_size());
  EXPECT_EQ(replay.exit_code, live.exit_code);
  EXPECT_EQ(b->origin().source(), "capture");
  // A pod the capture does not hold: exit 2, and why it cannot say more.
  const lab::CommandOutput ghost =
      RunDoctorAsNobody({"explain", "pod", "lab/ghost", "--from", capture_file_});
  EXPECT_EQ(ghost.exit_code, 2) << ghost.out << ghost.err;
  EXPECT_NE(ghost.out.find("in this capture"), std::string::npos) << ghost.out;
}

// The daemon's capture carries its history: the replay's findings are the daemon's, with the
// first-seen times the daemon had (ages), and it says it came from the daemon.
TEST_F(CaptureTest, TheDaemonsCaptureKeepsItsHistory) {
  testing::ScopedTempDir dir("adt-capd");
  ::chmod(dir.path().c_str(), 0755);
  ServeProcess serve(dir.path(), {"--lab-prefix", lab_->node().prefix});
  ASSERT_TRUE(serve.WaitReady(std::chrono::seconds(30))) << serve.log();
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::optional<pb::Report> r = serve.Report();
        return r && !FindingsWithCode(*r, "POD_NOT_ENROLLED").empty();
      },
      std::chrono::seconds(20)))
      << serve.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // findings with some age
  const std::string file = dir.path() + "/daemon.capture";
  const lab::CommandOutput taken =
      RunDoctor({"capture", "--api-socket", serve.socket(), "-o", file});
  ASSERT_EQ(taken.exit_code, 0) << taken.out << taken.err;
  EXPECT_NE(taken.err.find("the daemon's latest scan"), std::string::npos) << taken.err;
  const std::optional<pb::Report> daemon = serve.Report();
  ASSERT_TRUE(daemon);
  ::chmod(file.c_str(), 0644);
  const lab::CommandOutput out = RunDoctorAsNobody({"report", "--from", file, "-o", "json"});
  const std::optional<pb::Report> replay = ParseReportJson(out.out);
  ASSERT_TRUE(replay) << out.out << out.err;
  EXPECT_EQ(FindingKeys(*replay), FindingKeys(*daemon)) << "replay:\n"
                                                        << DumpFindings(*replay) << "daemon:\n"
                                                        << DumpFindings(*daemon);
  EXPECT_EQ(replay->origin().captured_from(), "daemon");
  EXPECT_TRUE(replay->origin().history());
  std::map<std::string, double> first_seen;
  for (const pb::Finding& f : daemon->findings()) {
    first_seen[f.code() + "/" + f.subject() + "/" + std::to_string(f.netns().inode())] =
        f.first_seen_unix_ms();
  }
  for (const pb::Finding& f : replay->findings()) {
    ASSERT_TRUE(f.has_first_seen_unix_ms()) << f.code();
    EXPECT_EQ(f.first_seen_unix_ms(),
              first_seen[f.code() + "/" + f.subject() + "/" + std::to_string(f.netns().inode())])
        << f.code() << " keeps the age the daemon gave it";
  }
  const lab::LabPod& not_enrolled = lab_->node().pods.at(3);
  const lab::CommandOutput story = RunDoctorAsNobody(
      {"explain", "pod",
       std::string(lab::LabKubeNamespace(not_enrolled)) + "/" + not_enrolled.netns_name, "--from",
       file, "-o", "json"});
  const std::optional<pb::PodReport> pod = ParsePodJson(story.out);
  ASSERT_TRUE(pod) << story.out << story.err;
  ASSERT_EQ(pod->findings_size(), 1) << story.out;
  EXPECT_TRUE(pod->findings(0).has_first_seen_unix_ms()) << "the pod's story keeps the ages too";
}

TEST_F(CaptureTest, TheTableSaysItJudgedACapture) {
  const lab::CommandOutput out = RunDoctorAsNobody({"report", "--from", capture_file_});
  EXPECT_NE(out.out.find("capture " + capture_file_), std::string::npos) << out.out;
  EXPECT_EQ(out.err.find("not running as root"), std::string::npos) << out.err;
}

TEST_F(CaptureTest, BadFilesGetExitTwoAndAReason) {
  const std::string good = ReadFile(capture_file_);
  ASSERT_GT(good.size(), 100u);
  std::string flipped = good;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5a);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not an ambient-doctor capture"},
      {"#!/bin/sh\necho hello\n", "not an ambient-doctor capture"},
      {good.substr(0, good.size() / 2), "truncated"},
      {good.substr(0, 12), "truncated"},
      {flipped, "corrupted"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir_->path() + "/bad-" + std::to_string(i);
    WriteFile(path, cases[i].first);
    ::chmod(path.c_str(), 0644);
    const lab::CommandOutput out = RunDoctorAsNobody({"report", "--from", path});
    EXPECT_EQ(out.exit_code, 2) << i << ": " << out.out << out.err;
    EXPECT_NE(out.err.find(cases[i].second), std::string::npos) << i << ": " << out.err;
    EXPECT_NE(out.err.find(path), std::string::npos) << "names the file: " << out.err;
    EXPECT_TRUE(out.out.empty()) << "no partial report: " << out.out;
  }
  const lab::CommandOutput missing =
      RunDoctorAsNobody({"report", "--from", dir_->path() + "/absent"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("No such file"), std::string::npos) << missing.err;
}

TEST_F(CaptureTest, FromRefusesLabAndConfigFlags) {
  const lab::CommandOutput out =
      RunDoctor({"report", "--from", capture_file_, "--lab-prefix", lab_->node().prefix});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.err.find("--from judges a capture"), std::string::npos) << out.err;
}

// --redact-ips: no lab pod address is left in the file, and the replay still pairs every pod with
// its netns by IP and finds the same codes in the same netns.
TEST_F(CaptureTest, RedactedIpsJudgeTheSame) {
  const std::string file = dir_->path() + "/redacted.capture";
  const lab::CommandOutput taken =
      RunDoctor({"capture", "--lab-prefix", lab_->node().prefix, "--redact-ips", "-o", file});
  ASSERT_EQ(taken.exit_code, 0) << taken.out << taken.err;
  Result<lab::CommandOutput> text = lab::RunCommand({{"gzip", "-dc", file}, "", ""});
  ASSERT_TRUE(text.ok()) << text.error().message;
  for (const lab::LabPod& pod : lab_->node().pods) {
    EXPECT_EQ(text->out.find(pod.ipv4), std::string::npos) << pod.ipv4 << " left in the file";
  }
  EXPECT_NE(text->out.find("198.18."), std::string::npos);
  ::chmod(file.c_str(), 0644);
  const lab::CommandOutput out = RunDoctorAsNobody({"report", "--from", file, "-o", "json"});
  const std::optional<pb::Report> replay = ParseReportJson(out.out);
  const std::optional<pb::Report> live = ParseReportJson(live_.out);
  ASSERT_TRUE(replay) << out.out << out.err;
  ASSERT_TRUE(live);
  std::multiset<std::pair<std::string, uint64_t>> want, got;
  for (const pb::Finding& f : live->findings()) want.emplace(f.code(), f.netns().inode());
  for (const pb::Finding& f : replay->findings()) got.emplace(f.code(), f.netns().inode());
  EXPECT_EQ(got, want) << DumpFindings(*replay);
  EXPECT_EQ(replay->kubernetes().pods_desired().DebugString(),
            live->kubernetes().pods_desired().DebugString());
  EXPECT_EQ(out.exit_code, live_.exit_code);
}

TEST_F(CaptureTest, NothingSecretIsInTheFile) {
  Result<lab::CommandOutput> text = lab::RunCommand({{"gzip", "-dc", capture_file_}, "", ""});
  ASSERT_TRUE(text.ok()) << text.error().message;
  ASSERT_EQ(text->exit_code, 0) << text->err;
  const std::string token = ReadFile(lab_->node().kube.token_file);
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(text->out.find(token), std::string::npos) << "the API token";
  EXPECT_EQ(text->out.find("PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(text->out.find("BEGIN CERTIFICATE"), std::string::npos);
}

}  // namespace
}  // namespace ad::test
