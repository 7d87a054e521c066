// CNI_CHAIN_BROKEN on the lab node with the real binary: the lab writes a CNI config directory
// under its host root (passed with --host-root by the lab's flags file). The healthy lab has no
// finding, the cni-chain-missing fault exactly CNI_CHAIN_BROKEN on the lab host, and a running
// `serve` names the pod whose sandbox started while the chain lacked istio-cni (a new cri-sim
// sandbox created after the break); restoring the chain resolves the chain part only.
// Bad directory contents (malformed, dangling symlink, huge file, no config) give a clear finding.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.pb.h"
#include "child_process_util.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "report_proto.h"
#include "scoped_child.h"

namespace ad {
namespace {

namespace fs = std::filesystem;
namespace pb = ::ambientdoctor::v1;
using std::chrono::milliseconds;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Dump(const pb::Report& report) { return test::DumpFindings(report); }

std::vector<const pb::Finding*> CniFindings(const pb::Report& report) {
  return test::FindingsWithCode(report, "CNI_CHAIN_BROKEN");
}

const pb::Finding* WithSubject(const pb::Report& report, const std::string& subject) {
  for (const pb::Finding* f : CniFindings(report)) {
    if (f->subject() == subject) return f;
  }
  return nullptr;
}

std::string Prefix(const std::string& tag) {
  return "adcc" + std::to_string(::getpid() % 100000) + tag;
}

class CniChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }
  pb::Report LocalReport(const std::string& prefix) {
    const lab::CommandOutput out =
        test::RunDoctor({"report", "--local", "--lab-prefix", prefix, "-o", "json"});
    auto report = test::ParseReportJson(out.out);
    EXPECT_TRUE(report) << out.out << out.err;
    return report.value_or(pb::Report{});
  }
};

TEST_F(CniChainTest, HealthyLabHasNoFindingAndShowsTheChain) {
  lab::LabOptions options;
  options.prefix = Prefix("h");
  options.pods = 2;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  EXPECT_NE(lab.node().Describe().find("host root " + lab.node().host_root), std::string::npos);
  const pb::Report report = LocalReport(options.prefix);
  EXPECT_EQ(report.findings_size(), 0) << Dump(report);
  const pb::CniConfig& cni = report.node().cni();
  EXPECT_EQ(cni.dir(), lab.node().cni_conf_dir);
  EXPECT_EQ(cni.active_file(), lab::LabCniConflistName(options.prefix));
  EXPECT_TRUE(cni.istio_cni_chained());
  EXPECT_EQ(cni.kubeconfig_error(), "");
  ASSERT_EQ(cni.plugin_types_size(), 3);
  EXPECT_EQ(cni.plugin_types(2), "istio-cni");
}

TEST_F(CniChainTest, FaultGivesExactlyCniChainBrokenOnTheHost) {
  lab::LabOptions options;
  options.prefix = Prefix("f");
  options.pods = 2;
  options.faults = {{lab::FaultKind::kCniChainMissing, std::nullopt}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const pb::Report report = LocalReport(options.prefix);
  ASSERT_EQ(report.findings_size(), 1) << Dump(report);
  const pb::Finding& f = report.findings(0);
  EXPECT_EQ(f.code(), "CNI_CHAIN_BROKEN");
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.subject(), "chain");
  EXPECT_EQ(f.netns().path(), lab.node().host_netns_path);
  EXPECT_TRUE(test::EvidenceMentions(f, lab::LabCniConflistName(options.prefix) + " (network"))
      << Dump(report);
  EXPECT_TRUE(test::EvidenceMentions(f, "ptp -> portmap")) << Dump(report);
  EXPECT_TRUE(test::EvidenceMentions(f, "one-shot report: judges the current state only"))
      << Dump(report);
  EXPECT_EQ(test::RunDoctor({"report", "--local", "--lab-prefix", options.prefix}).exit_code, 1);
}

TEST_F(CniChainTest, BadDirectoryContentsGiveAClearFindingNeverACrash) {
  lab::LabOptions options;
  options.prefix = Prefix("b");
  options.pods = 1;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const std::string dir = lab.node().cni_conf_dir;
  // Lexically before the good conflist: malformed, a dangling symlink, a huge file.
  std::ofstream(dir + "/00-malformed.conflist") << R"({"name": "x", "plugins": [{"type": )";
  fs::create_symlink("/nonexistent/05.conflist", dir + "/05-dangling.conflist");
  std::ofstream(dir + "/07-huge.conflist") << std::string(3 << 20, ' ');
  pb::Report report = LocalReport(options.prefix);
  // CRI-O and the kubelet skip them: the good conflist is active; no finding, but the report
  // lists why each was skipped.
  EXPECT_EQ(report.findings_size(), 0) << Dump(report);
  ASSERT_GE(report.node().cni().files_size(), 4);
  EXPECT_NE(report.node().cni().files(0).error().find("malformed JSON"), std::string::npos);
  EXPECT_NE(report.node().cni().files(1).error().find("dangling symlink"), std::string::npos);
  EXPECT_NE(report.node().cni().files(2).error().find("too large"), std::string::npos);

  // Without the good one nothing loads: broken, naming every file.
  fs::remove(dir + "/" + lab::LabCniConflistName(options.prefix));
  report = LocalReport(options.prefix);
  const pb::Finding* chain = WithSubject(report, "chain");
  ASSERT_NE(chain, nullptr) << Dump(report);
  EXPECT_TRUE(test::EvidenceMentions(*chain, "no .conflist, .conf or .json file loads"))
      << Dump(report);
  EXPECT_TRUE(test::EvidenceMentions(*chain, "00-malformed.conflist: malformed JSON"))
      << Dump(report);

  // No config directory at all: a node with ambient pods and no CNI config is broken.
  fs::remove_all(dir);
  report = LocalReport(options.prefix);
  chain = WithSubject(report, "chain");
  ASSERT_NE(chain, nullptr) << Dump(report);
  EXPECT_TRUE(test::EvidenceMentions(*chain, "does not exist")) << Dump(report);

  // --cni-conf-dir off: no check, no finding.
  const lab::CommandOutput off = test::RunDoctor(
      {"report", "--local", "--lab-prefix", options.prefix, "--cni-conf-dir", "off", "-o", "json"});
  auto quiet = test::ParseReportJson(off.out);
  ASSERT_TRUE(quiet) << off.out << off.err;
  EXPECT_TRUE(CniFindings(*quiet).empty()) << Dump(*quiet);
  EXPECT_FALSE(quiet->node().has_cni());
}

TEST_F(CniChainTest, MissingKubeconfigIsItsOwnFinding) {
  lab::LabOptions options;
  options.prefix = Prefix("k");
  options.pods = 1;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  fs::remove(lab.node().cni_conf_dir + "/ZZZ-istio-cni-kubeconfig");
  const pb::Report report = LocalReport(options.prefix);
  ASSERT_EQ(report.findings_size(), 1) << Dump(report);
  EXPECT_EQ(report.findings(0).subject(), "kubeconfig");
  EXPECT_TRUE(test::EvidenceMentions(report.findings(0), "No such file or directory"))
      << Dump(report);
}

TEST_F(CniChainTest, ServeNamesThePodStartedWhileTheChainLackedIstioCni) {
  lab::LabOptions options;
  options.prefix = Prefix("d");
  options.pods = 2;
  options.zds = true;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  testing::ScopedTempDir dir("adt-cni-chain");
  const std::string socket = dir.path() + "/api.sock";
  const std::string log = dir.path() + "/serve.log";
  // Node sources (CRI: the new sandbox) are polled every 2 s; the chain change itself is seen
  // through inotify on the CNI config directory.
  testing::ScopedChild serve(
      {test::DoctorBinary(), "serve", "--lab-prefix", options.prefix, "--interval", "2s",
       "--api-socket", socket, "--metrics-address", "off", "--no-flows"},
      "", log, /*with_stderr=*/true);
  auto wait_for = [&](const std::function<bool(const pb::Report&)>& done) {
    for (int i = 0; i < 300; ++i) {
      if (fs::exists(socket)) {
        auto report = test::ParseReportJson(
            test::RunDoctor({"report", "--api-socket", socket, "-o", "json"}).out);
        if (report && report->origin().source() == "daemon" && done(*report)) return report;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return std::optional<pb::Report>{};
  };
  auto first = wait_for([](const pb::Report&) { return true; });
  ASSERT_TRUE(first) << ReadAll(log);
  EXPECT_TRUE(CniFindings(*first).empty()) << Dump(*first);

  // The primary CNI rewrites its conflist without istio-cni.
  ASSERT_TRUE(lab::WriteLabCniConfig(options.prefix, false).ok());
  auto broken = wait_for([](const pb::Report& r) { return WithSubject(r, "chain") != nullptr; });
  ASSERT_TRUE(broken) << ReadAll(log);
  EXPECT_TRUE(
      test::EvidenceMentions(*WithSubject(*broken, "chain"), "chain without istio-cni since"))
      << Dump(*broken);
  EXPECT_EQ(broken->node().cni().gaps_size(), 1);

  // A pod created meanwhile: the runtime knows it, istio-cni never heard of it.
  Result<lab::LabPod> pod = lab::EnrollPod(options.prefix);
  ASSERT_TRUE(pod.ok()) << pod.error().message;
  EXPECT_FALSE(pod->meshed);
  auto named = wait_for([&](const pb::Report& r) {
    const pb::Finding* f = WithSubject(r, "uncaptured");
    return f != nullptr && f->netns().path() == pod->netns_path;
  });
  ASSERT_TRUE(named) << ReadAll(log);
  const pb::Finding* uncaptured = WithSubject(*named, "uncaptured");
  EXPECT_EQ(uncaptured->severity(), "warning");
  EXPECT_FALSE(uncaptured->pod().empty()) << Dump(*named);
  EXPECT_TRUE(test::EvidenceMentions(*uncaptured, "CRI created_at")) << Dump(*named);
  EXPECT_TRUE(test::EvidenceMentions(*WithSubject(*named, "chain"), uncaptured->pod()))
      << Dump(*named);
  // Only the new pod: the ones enrolled before the break are fine.
  int uncaptured_count = 0;
  for (const pb::Finding* f : CniFindings(*named)) uncaptured_count += f->subject() == "uncaptured";
  EXPECT_EQ(uncaptured_count, 1) << Dump(*named);

  // The chain restored: its part resolves; the pod stays uncaptured until restarted.
  ASSERT_TRUE(lab::WriteLabCniConfig(options.prefix, true).ok());
  auto restored = wait_for([](const pb::Report& r) { return WithSubject(r, "chain") == nullptr; });
  ASSERT_TRUE(restored) << ReadAll(log);
  ASSERT_NE(WithSubject(*restored, "uncaptured"), nullptr) << Dump(*restored);
  ASSERT_EQ(restored->node().cni().gaps_size(), 1);
  EXPECT_GT(restored->node().cni().gaps(0).end_unix_ms(), 0);
  bool resolved = false;
  for (const pb::Finding& f : restored->recently_resolved()) {
    resolved = resolved || (f.code() == "CNI_CHAIN_BROKEN" && f.subject() == "chain");
  }
  EXPECT_TRUE(resolved) << Dump(*restored);
}

}  // namespace
}  // namespace ad
