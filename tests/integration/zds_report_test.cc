// Acceptance tests of the ZDS cross-check, end to end: the lab with cni-sim and ztunnel-sim, the
// real ambient-doctor binary (report and watch), its JSON. Each fault must surface as its finding;
// the agent must never connect to the ZDS socket.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "lab/emulators.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "model/json_reader.h"
#include "report_json.h"

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

using test::JsonFinding;
using test::ToFindings;
using Report = test::ReportRun;

Report RunReport(const lab::LabNode& node, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {kDoctor, "report", "--lab-prefix", node.prefix,
                                   "-o",    "json",   "--no-cri"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return test::RunReportJson(std::move(argv));
}

// Where a finding is and what it says: (netns path, netns inode, code). A netns that no longer has
// a path (a deleted pod's, kept alive by ztunnel's fd) has an empty path and its inode.
using NetnsCode = std::tuple<std::string, uint64_t, std::string>;

std::multiset<NetnsCode> WarningOrAbove(const std::vector<JsonFinding>& findings) {
  std::multiset<NetnsCode> out;
  for (const JsonFinding& f : findings) {
    if (f.severity == "warning" || f.severity == "critical") {
      out.insert({f.netns_path, f.netns_inode, f.code});
    }
  }
  return out;
}

uint64_t NetnsInode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// The namespaces a process holds open as fds. The fd's link text is no help (a netns whose bind
// mount is gone reads as "/"), so ask the file system: nsfs files are namespaces.
std::set<uint64_t> HeldNamespaceInodes(int pid) {
  constexpr long kNsfsMagic = 0x6e736673;  // NSFS_MAGIC, linux/magic.h
  std::set<uint64_t> out;
  std::error_code ec;
  for (const auto& fd :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    struct statfs fs {};
    struct stat st {};
    if (::statfs(fd.path().c_str(), &fs) == 0 && fs.f_type == kNsfsMagic &&
        ::stat(fd.path().c_str(), &st) == 0) {
      out.insert(static_cast<uint64_t>(st.st_ino));
    }
  }
  return out;
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
    EXPECT_TRUE(report.findings.empty()) << report.raw;
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
  const lab::LabNode& node = lab.node();
  // Pod 2's netns was deleted after the hand-off; only ztunnel-sim's fd keeps it, so it is the
  // one netns ztunnel-sim holds that no lab netns path leads to.
  std::set<uint64_t> deleted_pod_netns = HeldNamespaceInodes(node.zds.ztunnel_sim_pid);
  deleted_pod_netns.erase(NetnsInode(node.host_netns_path));
  deleted_pod_netns.erase(NetnsInode(node.zds.ztunnel_netns_path));
  for (const lab::LabPod& pod : node.pods) deleted_pod_netns.erase(NetnsInode(pod.netns_path));
  ASSERT_EQ(deleted_pod_netns.size(), 1u) << "netns held by ztunnel-sim without a lab path";

  Report report = RunReport(node);
  EXPECT_EQ(report.exit_code, 1) << report.raw;
  const std::multiset<NetnsCode> expected = {
      {PodPath(node, 0), NetnsInode(PodPath(node, 0)), "ZTUNNEL_LISTENERS_MISSING"},
      {PodPath(node, 1), NetnsInode(PodPath(node, 1)), "REDIRECT_MISSING"},
      {"", *deleted_pod_netns.begin(), "ZTUNNEL_STALE_WORKLOAD"},
  };
  EXPECT_EQ(WarningOrAbove(report.findings), expected) << report.raw;
  for (const JsonFinding& f : report.findings) {
    EXPECT_NE(f.netns_path, PodPath(node, 3)) << "the healthy pod has no finding: " << f.code;
  }
}

TEST_F(ZdsReportTest, KilledZtunnelIsDisconnected) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("c");
  options.pods = 2;
  options.zds = true;
  options.faults = {{FaultKind::kZtunnelCrash, std::nullopt}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  Report report = RunReport(node);
  EXPECT_EQ(report.exit_code, 1) << report.raw;
  // istio-cni's ZDS socket lives in the node's host netns: the finding is about the node. The
  // pods kept their rules but lost ztunnel's listeners: their hand-off is pending and, with no
  // history to age it, a one-shot report raises it to warning ("age unknown").
  std::multiset<NetnsCode> expected = {
      {node.host_netns_path, NetnsInode(node.host_netns_path), "ZDS_DISCONNECTED"}};
  for (int pod = 0; pod < options.pods; ++pod) {
    expected.insert({PodPath(node, pod), NetnsInode(PodPath(node, pod)), "ZDS_PENDING"});
  }
  EXPECT_EQ(WarningOrAbove(report.findings), expected) << report.raw;
}

TEST_F(ZdsReportTest, DeadlockBecomesStallWithinThresholdPlusOneInterval) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("d");
  options.pods = 2;
  options.zds = true;
  options.faults = {{FaultKind::kZdsDeadlock, std::nullopt}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;

  constexpr int64_t kThresholdMs = 2000;
  constexpr int64_t kIntervalMs = 500;
  // A scan can outlast the interval on a loaded 2-core machine (the next one starts when it
  // ends), so the stall may open that much later than threshold + interval.
  constexpr int64_t kLoadSlackMs = 2000;
  auto out = lab::RunCommand(
      {{kDoctor, "watch", "--lab-prefix", lab.node().prefix, "--no-cri", "--interval", "500ms",
        "--count", "10", "--zds-stall-threshold", "2s", "-o", "json"},
       "",
       ""});
  ASSERT_TRUE(out.ok());
  // One JSON line per scan that changed something; taken_at_unix_ms is the snapshot time.
  struct Opened {
    int64_t taken_at_unix_ms = 0;
    JsonFinding finding;
  };
  std::vector<Opened> opened;
  std::istringstream lines(out->out);
  for (std::string line; std::getline(lines, line);) {
    rapidjson::Document parsed;
    const JsonStatus read = ParseJsonDocument(line, parsed);
    ASSERT_TRUE(read.ok()) << read.error << "\n" << line;
    const rapidjson::Value* taken_at = JsonMember(parsed, "taken_at_unix_ms");
    ASSERT_NE(taken_at, nullptr) << line;
    for (JsonFinding& f : ToFindings(JsonMember(parsed, "opened"))) {
      opened.push_back({test::JsonInt(taken_at), std::move(f)});
    }
  }
  const auto stall = std::find_if(opened.begin(), opened.end(),
                                  [](const Opened& o) { return o.finding.code == "ZDS_STALL"; });
  ASSERT_NE(stall, opened.end()) << out->out;
  // The deadlock is istio-cni's, on the node: the node-level stall (host netns) opens first.
  EXPECT_EQ(stall->finding.netns_path, lab.node().host_netns_path) << out->out;
  const auto pending = std::find_if(opened.begin(), stall, [&](const Opened& o) {
    return o.finding.code == "ZDS_PENDING" && o.finding.netns_path == stall->finding.netns_path &&
           o.finding.netns_inode == stall->finding.netns_inode;
  });
  ASSERT_NE(pending, stall) << "young signals are pending first, in the same netns\n" << out->out;
  // Pending opens in the scan that first sees the condition; the stall keeps that first sighting.
  EXPECT_EQ(pending->finding.since_unix_ms, pending->taken_at_unix_ms) << out->out;
  EXPECT_EQ(stall->finding.since_unix_ms, pending->finding.since_unix_ms) << out->out;
  const int64_t latency_ms = stall->taken_at_unix_ms - stall->finding.since_unix_ms;
  EXPECT_GE(latency_ms, kThresholdMs) << out->out;
  EXPECT_LE(latency_ms, kThresholdMs + kIntervalMs + kLoadSlackMs) << out->out;
  const bool names_unread =
      std::any_of(stall->finding.evidence.begin(), stall->finding.evidence.end(),
                  [](const std::string& line) { return line.find("unread") != std::string::npos; });
  EXPECT_TRUE(names_unread) << "evidence names the unread hello\n" << out->out;
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
