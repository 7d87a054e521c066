// Stable finding identity, end to end through the real binary: while `watch` runs, the container
// runtime goes away and comes back (the pod name disappears and reappears) and the process behind
// a /proc-only netns is replaced by another one (its /proc/<pid>/ns/net path changes). Neither
// changes the condition, so after the first change set no finding may be resolved or reopened.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process_util.h"
#include "lab/rules.h"
#include "model/json_reader.h"
#include "netns_test_util.h"
#include "scoped_child.h"

namespace ad {
namespace {

namespace fs = std::filesystem;

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";
const std::string kCriSim = std::string(AD_BINARY_DIR) + "/tests/sim/cri-sim";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// A fake procfs that lists exactly the processes given, each linking to the real ns/net, so that
// discovery sees this test's /proc-only netns and nothing else of the machine.
void LinkProcess(const std::string& proc_root, pid_t pid) {
  const fs::path dir = fs::path(proc_root) / std::to_string(pid) / "ns";
  fs::create_directories(dir);
  fs::create_symlink("/proc/" + std::to_string(pid) + "/ns/net", dir / "net");
}

TEST(WatchIdentity, CriFlapAndPidChangeResolveAndReopenNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  testing::ScopedNetns host("wid-host");
  testing::ScopedNetns pod("wid-pod");
  ASSERT_TRUE(host.ok() && pod.ok());
  // Istio's in-pod rules with the outbound redirect missing: one INCOMPLETE_RULESET.
  lab::RuleTweaks tweaks;
  tweaks.omit_outbound_redirect = true;
  const std::string rules =
      lab::IptablesInpodRestore(AmbientVariant{}, Family::kIpv4, lab::SnatConfig{}, tweaks);
  ASSERT_EQ(pod.ExecWithInput("iptables-nft-restore --noflush", rules), 0);

  testing::ScopedTempDir dir("adt-wid");
  ASSERT_FALSE(dir.path().empty());
  const std::string proc_root = dir.path() + "/proc";
  const std::string empty_netns_dir = dir.path() + "/netns";
  fs::create_directories(proc_root);
  fs::create_directories(empty_netns_dir);
  // The runtime knows the pod by its netns pin (a path discovery does not scan here).
  const std::string pods_file = dir.path() + "/pods";
  std::ofstream(pods_file) << "uid-echo echo demo default " << pod.path() << "\n";
  const std::string cri_socket = dir.path() + "/cri.sock";
  const std::vector<std::string> cri_argv = {kCriSim,       "--socket", cri_socket,
                                             "--pods-file", pods_file,  "--quiet"};

  auto first = std::make_unique<testing::ScopedChild>(std::vector<std::string>{"/bin/sleep", "300"},
                                                      pod.path());
  LinkProcess(proc_root, first->pid());
  auto cri = std::make_unique<testing::ScopedChild>(cri_argv);
  for (int i = 0; i < 100 && !fs::exists(cri_socket); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(cri_socket)) << "cri-sim did not start";

  const std::string out = dir.path() + "/watch.out";
  testing::ScopedChild watch(
      {kDoctor, "watch", "--proc-root", proc_root, "--netns-dir", empty_netns_dir, "--host-netns",
       host.path(), "--no-zds", "--cri-endpoint", "unix://" + cri_socket, "--interval", "250ms",
       "--count", "16", "-o", "json", "--log-level", "off"},
      "", out);
  // The first change set opens what is wrong; wait for it before flapping anything.
  for (int i = 0; i < 250 && Lines(ReadFile(out)).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(Lines(ReadFile(out)).empty()) << "watch printed nothing";

  cri->Kill();  // the runtime goes away: pods are no longer named
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  cri = std::make_unique<testing::ScopedChild>(cri_argv);  // and comes back
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Another process takes over the netns; the first one exits (its /proc path goes away).
  testing::ScopedChild second({"/bin/sleep", "300"}, pod.path());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  LinkProcess(proc_root, second.pid());
  fs::remove_all(fs::path(proc_root) / std::to_string(first->pid()));
  first->Kill();
  EXPECT_EQ(watch.Wait(std::chrono::seconds(60)), 1) << "findings stay open: exit 1";

  const std::vector<std::string> lines = Lines(ReadFile(out));
  ASSERT_EQ(lines.size(), 1u) << "a change set after the first:\n" << ReadFile(out);
  rapidjson::Document parsed;
  const JsonStatus read = ParseJsonDocument(lines[0], parsed);
  ASSERT_TRUE(read.ok()) << read.error;
  const rapidjson::Value* opened = JsonMember(parsed, "opened");
  ASSERT_NE(opened, nullptr);
  ASSERT_TRUE(opened->IsArray());
  bool incomplete_named = false;
  for (const rapidjson::Value& finding : opened->GetArray()) {
    if (JsonStringMember(finding, "code") == "INCOMPLETE_RULESET") {
      incomplete_named = JsonStringMember(finding, "pod") == "demo/echo";
    }
  }
  EXPECT_TRUE(incomplete_named) << "CRI named the pod in the first scan: " << lines[0];
}

}  // namespace
}  // namespace ad
