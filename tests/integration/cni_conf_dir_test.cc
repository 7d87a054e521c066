// Where the CNI config directory comes from, with the real binary: the directory a real
// containerd reports in its verbose CRI Status (a private conf_dir, nowhere near /etc/cni/net.d)
// is the one judged, without --cni-conf-dir; with no runtime, no flag and no /etc/cni/net.d the
// chain is not judged (an info line, no CNI_CHAIN_BROKEN, the exit code of a healthy node).
// `serve` watches the runtime's directory: a change there is judged without waiting for a poll.
// The lab provides ambient pods (its flags file names its own CNI directory; `--cni-conf-dir
// auto` on the command line puts the agent back to its default behaviour).
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.pb.h"
#include "child_process_util.h"
#include "containerd_fixture.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "netns_test_util.h"
#include "report_proto.h"
#include "scoped_child.h"
#include "sources/cri/cri_client.h"
#include "sources/cri/runtime_status.h"

namespace ad {
namespace {

namespace fs = std::filesystem;
namespace pb = ::ambientdoctor::v1;
using testing::ContainerdFixture;

std::string Dump(const pb::Report& report) {
  std::string out = "cni: dir " + report.node().cni().dir() + " (" +
                    report.node().cni().dir_source() + ") " + report.node().cni().not_judged() +
                    "\n" + test::DumpFindings(report);
  for (const pb::SourceError& e : report.node().cri().errors()) out += "cri: " + e.message() + "\n";
  return out;
}

std::vector<const pb::Finding*> CniFindings(const pb::Report& report) {
  return test::FindingsWithCode(report, "CNI_CHAIN_BROKEN");
}

std::string Prefix(const std::string& tag) {
  return "adcd" + std::to_string(::getpid() % 100000) + tag;
}

class CniConfDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::IsRoot()) GTEST_SKIP() << "needs root (network namespaces, containerd)";
  }
  static pb::Report Report(const std::vector<std::string>& extra, int* exit_code = nullptr) {
    std::vector<std::string> args = {"report", "--local", "-o", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const lab::CommandOutput out = test::RunDoctor(args);
    if (exit_code != nullptr) *exit_code = out.exit_code;
    auto report = test::ParseReportJson(out.out);
    EXPECT_TRUE(report) << out.out << out.err;
    return report.value_or(pb::Report{});
  }
};

// containerd's verbose Status names the conf_dir of its config.toml and the network it loaded.
TEST_F(CniConfDirTest, RealContainerdReportsItsConfDirInStatus) {
  if (std::string missing = ContainerdFixture::MissingPrerequisites(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  ContainerdFixture containerd;
  ASSERT_EQ(containerd.Start(), "");
  auto client = cri::CriClient::Connect({.endpoints = {containerd.endpoint()}});
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto status = client->Status(true);
  ASSERT_TRUE(status.ok()) << status.error().message;
  const auto& info = status->info();
  ASSERT_TRUE(info.contains("config") && info.contains("cniconfig"));
  // AD_CRI_CAPTURE_DIR=DIR writes the documents there: the source of the unit tests' fixtures
  // (tests/unit/golden/cri/, private paths rewritten to containerd's defaults).
  if (const char* capture = std::getenv("AD_CRI_CAPTURE_DIR")) {
    for (const char* key : {"config", "cniconfig", "lastCNILoadStatus"}) {
      if (info.contains(key)) std::ofstream(std::string(capture) + "/" + key) << info.at(key);
    }
  }
  const auto parsed = cri::ParseRuntimeCniConfig(
      info.at("config"), info.at("cniconfig"),
      info.contains("lastCNILoadStatus") ? info.at("lastCNILoadStatus") : "");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->conf_dir, containerd.dir() + "/cni");
  EXPECT_EQ(parsed->conf_dir_key, "config.cni.confDir");
  EXPECT_EQ(parsed->networks, std::vector<std::string>{"adt-cri"});
  EXPECT_EQ(parsed->pod_network, "adt-cri");
  EXPECT_EQ(parsed->last_load_status, "OK");
  // Without verbose there is no info at all.
  auto quiet = client->Status(false);
  ASSERT_TRUE(quiet.ok()) << quiet.error().message;
  EXPECT_TRUE(quiet->info().empty());
}

// No --cni-conf-dir, /etc/cni/net.d under the host root holds a healthy chain, but containerd
// reads its CNI config from its private conf_dir: that one is judged, both ways.
TEST_F(CniConfDirTest, TheRuntimesDirectoryIsJudgedNotTheDefault) {
  if (std::string missing = ContainerdFixture::MissingPrerequisites(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  ContainerdFixture containerd;
  ASSERT_EQ(containerd.Start(), "") << containerd.LogTail();
  lab::LabOptions options;
  options.prefix = Prefix("r");
  options.pods = 1;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  // The runtime reports a host path; the agent reads it under --host-root (the lab's), where the
  // node's / would be mounted in a pod: the runtime's real directory appears there.
  const std::string host_root = lab.node().host_root;
  const std::string runtime_dir = containerd.dir() + "/cni";
  fs::create_directories(fs::path(host_root + containerd.dir()).parent_path());
  fs::create_directory_symlink(containerd.dir(), host_root + containerd.dir());
  const std::vector<std::string> flags = {"--lab-prefix", options.prefix,   "--cni-conf-dir",
                                          "auto",         "--cri-endpoint", containerd.endpoint()};

  // Its chain (bridge -> loopback) lacks istio-cni while an ambient pod runs: broken.
  pb::Report report = Report(flags);
  const pb::CniConfig& cni = report.node().cni();
  EXPECT_EQ(cni.dir_source(), "runtime") << Dump(report);
  EXPECT_EQ(cni.dir(), host_root + runtime_dir);
  EXPECT_EQ(cni.runtime_dir(), runtime_dir);
  EXPECT_TRUE(cni.runtime().starts_with("containerd ")) << cni.runtime();
  EXPECT_EQ(cni.not_judged(), "");
  EXPECT_EQ(cni.active_file(), "10-adt.conflist");
  ASSERT_EQ(cni.plugin_types_size(), 2) << Dump(report);
  EXPECT_EQ(cni.plugin_types(0), "bridge");
  EXPECT_FALSE(cni.istio_cni_chained());
  auto found = CniFindings(report);
  ASSERT_EQ(found.size(), 1u) << Dump(report);
  EXPECT_EQ(found[0]->subject(), "chain");
  EXPECT_EQ(found[0]->severity(), "critical");
  EXPECT_TRUE(test::EvidenceMentions(*found[0], runtime_dir + "/10-adt.conflist")) << Dump(report);
  EXPECT_TRUE(test::EvidenceMentions(*found[0], "the directory containerd ")) << Dump(report);

  // The primary CNI's conflist chains istio-cni again (with its kubeconfig): healthy.
  std::ofstream(runtime_dir + "/ZZZ-istio-cni-kubeconfig") << "apiVersion: v1\nkind: Config\n";
  std::ofstream(runtime_dir + "/10-adt.conflist") << R"({
  "cniVersion": "0.4.0",
  "name": "adt-cri",
  "plugins": [
    {"type": "bridge", "bridge": "adtbr0", "isGateway": false, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "192.0.2.0/24"}]]}},
    {"type": "loopback"},
    {"type": "istio-cni", "kubeconfig": ")" << runtime_dir
                                                  << R"(/ZZZ-istio-cni-kubeconfig"}
  ]
}
)";
  report = Report(flags);
  EXPECT_EQ(report.node().cni().dir_source(), "runtime") << Dump(report);
  EXPECT_TRUE(report.node().cni().istio_cni_chained()) << Dump(report);
  EXPECT_EQ(report.node().cni().kubeconfig_error(), "") << Dump(report);
  EXPECT_TRUE(CniFindings(report).empty()) << Dump(report);

  // --cni-conf-dir still overrides the runtime: the lab's own (healthy) directory, named beside
  // the runtime's.
  report = Report({"--lab-prefix", options.prefix, "--cni-conf-dir", "/etc/cni/net.d",
                   "--cri-endpoint", containerd.endpoint()});
  EXPECT_EQ(report.node().cni().dir_source(), "flag") << Dump(report);
  EXPECT_EQ(report.node().cni().dir(), lab.node().cni_conf_dir);
  EXPECT_EQ(report.node().cni().runtime_dir(), runtime_dir);
}

// The runtime's conflist is rewritten while `serve` polls only every 5 minutes: the change is
// judged within seconds, so the daemon's inotify watch is on the runtime's directory.
TEST_F(CniConfDirTest, ServeWatchesTheRuntimesDirectory) {
  if (std::string missing = ContainerdFixture::MissingPrerequisites(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  ContainerdFixture containerd;
  ASSERT_EQ(containerd.Start(), "") << containerd.LogTail();
  lab::LabOptions options;
  options.prefix = Prefix("s");
  options.pods = 1;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const std::string host_root = lab.node().host_root;
  const std::string runtime_dir = containerd.dir() + "/cni";
  fs::create_directories(fs::path(host_root + containerd.dir()).parent_path());
  fs::create_directory_symlink(containerd.dir(), host_root + containerd.dir());
  std::ofstream(runtime_dir + "/ZZZ-istio-cni-kubeconfig") << "apiVersion: v1\nkind: Config\n";

  testing::ScopedTempDir dir("adt-cni-dir");
  const std::string socket = dir.path() + "/api.sock";
  const std::string log = dir.path() + "/serve.log";
  testing::ScopedChild serve(
      {test::DoctorBinary(), "serve", "--lab-prefix", options.prefix, "--cni-conf-dir", "auto",
       "--cri-endpoint", containerd.endpoint(), "--interval", "300s", "--resync-interval", "600s",
       "--api-socket", socket, "--metrics-address", "off", "--no-flows"},
      "", log, /*with_stderr=*/true);
  auto read_log = [&log] {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  auto wait_for = [&](const std::function<bool(const pb::Report&)>& done) {
    for (int i = 0; i < 200; ++i) {
      if (fs::exists(socket)) {
        auto report = test::ParseReportJson(
            test::RunDoctor({"report", "--api-socket", socket, "-o", "json"}).out);
        if (report && report->origin().source() == "daemon" && done(*report)) return report;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return std::optional<pb::Report>{};
  };
  auto first = wait_for([](const pb::Report&) { return true; });
  ASSERT_TRUE(first) << read_log();
  EXPECT_EQ(first->node().cni().dir_source(), "runtime") << Dump(*first);
  ASSERT_EQ(CniFindings(*first).size(), 1u) << Dump(*first);  // bridge -> loopback

  std::ofstream(runtime_dir + "/10-adt.conflist")
      << R"({"cniVersion": "0.4.0", "name": "adt-cri", "plugins": [{"type": "bridge"},
          {"type": "istio-cni", "kubeconfig": ")"
      << runtime_dir << R"(/ZZZ-istio-cni-kubeconfig"}]})";
  auto healthy = wait_for([](const pb::Report& r) { return CniFindings(r).empty(); });
  ASSERT_TRUE(healthy) << read_log();
  EXPECT_TRUE(healthy->node().cni().istio_cni_chained()) << Dump(*healthy);
  EXPECT_NE(read_log().find("CNI config directory " + host_root + runtime_dir + " (runtime: "),
            std::string::npos)
      << read_log();
}

// No runtime (the lab's node has none), no flag, and no /etc/cni/net.d under the host root: the
// chain is not judged, the report says why and which flag to set, the exit code is a healthy
// node's. The same node with the directory given is judged as before.
TEST_F(CniConfDirTest, UnknowableDirectoryIsNotJudged) {
  lab::LabOptions options;
  options.prefix = Prefix("u");
  options.pods = 1;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  int healthy_exit = -1;
  const pb::Report healthy = Report({"--lab-prefix", options.prefix}, &healthy_exit);
  EXPECT_EQ(healthy.findings_size(), 0) << Dump(healthy);
  fs::remove_all(lab.node().cni_conf_dir);

  int exit_code = -1;
  const pb::Report report =
      Report({"--lab-prefix", options.prefix, "--cni-conf-dir", "auto"}, &exit_code);
  const pb::CniConfig& cni = report.node().cni();
  EXPECT_EQ(cni.dir_source(), "none") << Dump(report);
  EXPECT_EQ(cni.dir(), "");
  EXPECT_NE(cni.not_judged().find("no container runtime answered over CRI"), std::string::npos)
      << cni.not_judged();
  EXPECT_NE(cni.not_judged().find(lab.node().cni_conf_dir + " does not exist"), std::string::npos)
      << cni.not_judged();
  EXPECT_NE(cni.not_judged().find("Set --cni-conf-dir"), std::string::npos) << cni.not_judged();
  EXPECT_TRUE(CniFindings(report).empty()) << Dump(report);
  EXPECT_EQ(report.findings_size(), 0) << Dump(report);
  EXPECT_EQ(exit_code, healthy_exit);

  // The text report carries the info line.
  const lab::CommandOutput text =
      test::RunDoctor({"report", "--local", "--lab-prefix", options.prefix, "--cni-conf-dir",
                       "auto", "--color", "never"});
  EXPECT_NE(text.out.find("CNI chain not judged: "), std::string::npos) << text.out;
  EXPECT_EQ(text.exit_code, healthy_exit);

  // Given explicitly, the same missing directory is the runtime's word: no CNI config at all.
  const pb::Report given = Report({"--lab-prefix", options.prefix});
  ASSERT_EQ(CniFindings(given).size(), 1u) << Dump(given);
  EXPECT_TRUE(test::EvidenceMentions(*CniFindings(given)[0], "does not exist")) << Dump(given);
}

}  // namespace
}  // namespace ad
