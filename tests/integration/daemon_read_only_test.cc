// The read-only promise of the node daemon over a churn run, from the kernel's side: the real
// `ambient-doctor serve` binary (ZDS sources on, a short poll and resync interval so every read
// path runs many times: events, GETGEN gates, legacy GET_INFO gates and GET_ENTRIES hashes, full
// resyncs, GetNetnsRules) follows pods enrolled and removed through cni-sim while, in the pods it
// must leave alone (iptables-nft lab pods, a native-nft pod and an iptables-legacy pod):
//  - `nft monitor` and `ip monitor rule route` capture nothing (no nf_tables commit, no rule or
//    route change; a control write at the end proves both monitors were listening);
//  - the nf_tables generation (GETGEN) and the iptables-legacy content hash (GET_INFO +
//    GET_ENTRIES of every listed table) are unchanged;
// and cni-sim accepted no connection besides ztunnel-sim's (the daemon never connects to ZDS).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.grpc.pb.h"
#include "child_process_util.h"
#include "lab/emulators.h"
#include "lab/lab.h"
#include "netns_test_util.h"
#include "scoped_child.h"
#include "sources/netns/netns_guard.h"
#include "sources/watch/legacy_fingerprint.h"
#include "sources/watch/watch_sockets.h"

namespace ad {
namespace {

namespace pb = ambientdoctor::v1;
using std::chrono::milliseconds;

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";

// What the daemon must not change in one netns, read in the netns on a throwaway thread.
struct KernelState {
  std::optional<uint32_t> nft_generation;
  std::optional<uint64_t> legacy_hash;
  std::string error;

  bool operator==(const KernelState& other) const {
    return nft_generation == other.nft_generation && legacy_hash == other.legacy_hash;
  }
};

KernelState ReadKernelState(const std::string& netns_path) {
  KernelState state;
  std::thread reader([&] {
    auto guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) {
      state.error = guard.error().message;
      return;
    }
    if (auto gate = watch::NftGenerationGate::Open(); gate.ok()) {
      if (auto generation = gate->Generation(); generation.ok()) state.nft_generation = *generation;
    }
    if (auto fingerprint = watch::LegacyFingerprint::Open(); fingerprint.ok()) {
      if (auto hash = fingerprint->ContentHash(); hash.ok()) state.legacy_hash = *hash;
    }
  });
  reader.join();
  return state;
}

bool ReportHas(pb::AmbientDoctor::Stub& stub, const std::string& path) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  pb::Report report;
  if (!stub.GetReport(&context, {}, &report).ok()) return false;
  for (const pb::NetnsEntry& netns : report.netns()) {
    if (netns.path() == path) return true;
  }
  return false;
}

bool WaitUntil(const std::function<bool()>& done, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(100));
  }
  return false;
}

TEST(DaemonReadOnly, ChurnLeavesUntouchedPodsAndZdsAlone) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  for (const char* tool : {"/usr/sbin/nft", "/usr/bin/stdbuf", "/usr/sbin/iptables-legacy"}) {
    if (::access(tool, X_OK) != 0) GTEST_SKIP() << tool << " not installed";
  }
  const std::string prefix = "adro" + std::to_string(::getpid() % 100000);
  lab::ScopedLab lab({.prefix = prefix, .pods = 3, .zds = true});
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  Result<lab::LabPod> legacy_pod =
      lab::AddPod(prefix, {.backend = lab::LabBackend::kLegacy, .index = 20});
  ASSERT_TRUE(legacy_pod.ok()) << legacy_pod.error().message;
  Result<lab::LabPod> nft_pod =
      lab::AddPod(prefix, {.backend = lab::LabBackend::kNft, .index = 21});
  ASSERT_TRUE(nft_pod.ok()) << nft_pod.error().message;
  std::vector<lab::LabPod> untouched = node.pods;
  untouched.push_back(*legacy_pod);
  untouched.push_back(*nft_pod);

  std::map<std::string, KernelState> before;
  for (const lab::LabPod& pod : untouched) {
    before[pod.netns_path] = ReadKernelState(pod.netns_path);
    ASSERT_TRUE(before[pod.netns_path].error.empty()) << before[pod.netns_path].error;
    ASSERT_TRUE(before[pod.netns_path].nft_generation) << pod.netns_name;
  }
  ASSERT_TRUE(before[legacy_pod->netns_path].legacy_hash) << "the legacy pod has legacy tables";
  const auto stats_before = lab::ReadStatsFile(node.zds.stats_file);
  ASSERT_TRUE(stats_before.count("accepted_connections"));

  testing::ScopedTempDir dir("adt-readonly");
  std::vector<std::unique_ptr<testing::ScopedChild>> monitors;
  std::map<std::string, std::pair<std::string, std::string>> monitor_files;  // nft, ip
  for (const lab::LabPod& pod : untouched) {
    const std::string nft_out = dir.path() + "/" + pod.netns_name + ".nft";
    const std::string ip_out = dir.path() + "/" + pod.netns_name + ".ip";
    monitor_files[pod.netns_path] = {nft_out, ip_out};
    // Line-buffered: the control event at the end must reach the file while nft still runs.
    monitors.push_back(std::make_unique<testing::ScopedChild>(
        std::vector<std::string>{"/usr/bin/stdbuf", "-oL", "/usr/sbin/nft", "monitor"},
        pod.netns_path, nft_out, /*with_stderr=*/true));
    monitors.push_back(std::make_unique<testing::ScopedChild>(
        std::vector<std::string>{"/usr/bin/stdbuf", "-oL", "/usr/sbin/ip", "monitor", "rule",
                                 "route"},
        pod.netns_path, ip_out, /*with_stderr=*/true));
  }
  // The kernel's own changes settle first: IPv6 link-local DAD on the fresh veths adds their
  // local routes. What the monitors printed until then is not the daemon's.
  for (const lab::LabPod& pod : untouched) {
    EXPECT_TRUE(WaitUntil(
        [&] {
          return testing::Capture("ip -n " + pod.netns_name + " -6 addr show tentative").empty();
        },
        std::chrono::seconds(10)))
        << pod.netns_name << ": DAD did not finish";
  }
  std::this_thread::sleep_for(milliseconds(500));  // the monitors subscribe and print the rest
  std::map<std::string, std::pair<size_t, size_t>> settled;  // monitor output before the daemon
  for (const auto& [path, files] : monitor_files) {
    settled[path] = {testing::ReadFile(files.first).size(), testing::ReadFile(files.second).size()};
  }

  const std::string api_socket = dir.path() + "/api/api.sock";
  testing::ScopedChild serve(
      {kDoctor, "serve", "--lab-prefix", prefix, "--interval", "200ms", "--resync-interval", "1s",
       "--metrics-address", "127.0.0.1:0", "--api-socket", api_socket},
      "", dir.path() + "/serve.log", /*with_stderr=*/true);
  auto stub = pb::AmbientDoctor::NewStub(
      grpc::CreateChannel("unix:" + api_socket, grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(
      WaitUntil([&] { return ReportHas(*stub, nft_pod->netns_path); }, std::chrono::seconds(30)))
      << testing::ReadFile(dir.path() + "/serve.log");

  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    Result<lab::LabPod> added = lab::EnrollPod(prefix, {.index = 10 + round});
    ASSERT_TRUE(added.ok()) << added.error().message;
    EXPECT_TRUE(
        WaitUntil([&] { return ReportHas(*stub, added->netns_path); }, std::chrono::seconds(20)))
        << "round " << round << ": the added pod";
    // The API's one read-now path, on a pod that must stay untouched.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pb::GetNetnsRulesRequest request;
    request.set_path(untouched[static_cast<size_t>(round) % untouched.size()].netns_path);
    pb::NetnsRules rules;
    EXPECT_TRUE(stub->GetNetnsRules(&context, request, &rules).ok());
    ASSERT_TRUE(lab::UnenrollPod(prefix, added->index).ok());
    EXPECT_TRUE(
        WaitUntil([&] { return !ReportHas(*stub, added->netns_path); }, std::chrono::seconds(20)))
        << "round " << round << ": the removed pod";
  }
  // More polls (legacy gates, a GET_ENTRIES hash every 10th) and resyncs with nothing changing.
  std::this_thread::sleep_for(milliseconds(2500));
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(std::chrono::seconds(20)), 0) << "a clean exit on SIGTERM";

  const auto stats_after = lab::ReadStatsFile(node.zds.stats_file);
  EXPECT_EQ(stats_after.at("accepted_connections"), stats_before.at("accepted_connections"))
      << "the daemon connected to the ZDS socket";
  for (const lab::LabPod& pod : untouched) {
    const KernelState after = ReadKernelState(pod.netns_path);
    EXPECT_TRUE(after == before[pod.netns_path])
        << pod.netns_name << ": nf_tables generation "
        << before[pod.netns_path].nft_generation.value_or(0) << " -> "
        << after.nft_generation.value_or(0) << ", legacy hash changed "
        << (after.legacy_hash != before[pod.netns_path].legacy_hash);
    const auto& [nft_out, ip_out] = monitor_files[pod.netns_path];
    const auto& [nft_settled, ip_settled] = settled[pod.netns_path];
    EXPECT_EQ(testing::ReadFile(nft_out).substr(nft_settled), "")
        << pod.netns_name << ": nf_tables events";
    EXPECT_EQ(testing::ReadFile(ip_out).substr(ip_settled), "")
        << pod.netns_name << ": rule/route events";
  }
  // Control: a write in each untouched netns shows up, so the monitors were really listening.
  for (const lab::LabPod& pod : untouched) {
    ASSERT_EQ(testing::Run("ip netns exec " + pod.netns_name +
                           " nft add table inet adro_control && ip -n " + pod.netns_name +
                           " rule add pref 4242 lookup main"),
              0);
  }
  for (const lab::LabPod& pod : untouched) {
    const auto& [nft_out, ip_out] = monitor_files[pod.netns_path];
    EXPECT_TRUE(WaitUntil(
        [&] { return testing::ReadFile(nft_out).find("adro_control") != std::string::npos; },
        std::chrono::seconds(5)))
        << pod.netns_name << ": nft monitor saw no control write: " << testing::ReadFile(nft_out);
    EXPECT_TRUE(
        WaitUntil([&] { return testing::ReadFile(ip_out).find("4242") != std::string::npos; },
                  std::chrono::seconds(5)))
        << pod.netns_name << ": ip monitor saw no control write: " << testing::ReadFile(ip_out);
  }
}

}  // namespace
}  // namespace ad
