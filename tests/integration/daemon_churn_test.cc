// The daemon over a churn run on a ZDS lab: pods are enrolled and removed through cni-sim (the
// way istio-cni does it) while `Daemon` runs with the ZDS sources on. It follows every pod (each
// added pod appears in a published result, each removed one goes), it never connects to the ZDS
// socket (cni-sim accepted exactly its one ztunnel connection), and it writes nothing: the rules
// of the pods that were left alone are byte-identical before and after.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "daemon/daemon.h"
#include "lab/emulators.h"
#include "lab/lab.h"
#include "netns_test_util.h"

namespace ad {
namespace {

using std::chrono::milliseconds;

std::string RulesOf(const lab::LabPod& pod) {
  return testing::Capture(
             "ip netns exec " + pod.netns_name +
             " iptables-nft-save 2>/dev/null | grep -v '^#' | sed 's/\\[[0-9]*:[0-9]*\\]//'") +
         testing::Capture("ip -n " + pod.netns_name + " rule") +
         testing::Capture("ip -n " + pod.netns_name + " route show table 100");
}

bool Contains(const PublishedResult& result, const std::string& path) {
  for (const NetnsSnapshot& netns : result.step.snapshot.netns) {
    for (const std::string& p : netns.netns.paths) {
      if (p == path) return true;
    }
  }
  return false;
}

TEST(DaemonChurn, FollowsEveryPodNeverConnectsToZdsWritesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  const std::string prefix = "adch" + std::to_string(::getpid() % 100000);
  lab::ScopedLab lab({.prefix = prefix, .pods = 3, .zds = true});
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  std::map<std::string, std::string> before;
  for (const lab::LabPod& pod : node.pods) before[pod.netns_name] = RulesOf(pod);
  const auto stats_before = lab::ReadStatsFile(node.zds.stats_file);
  ASSERT_TRUE(stats_before.count("accepted_connections"));

  DaemonOptions options;
  options.engine.discovery.proc_root.clear();
  options.engine.discovery.netns_dirs = {"/run/netns"};
  options.engine.discovery.name_glob = prefix + "-*";
  options.engine.discovery.host_netns_path = node.host_netns_path;
  options.engine.host_root = node.host_root;  // its CNI config (as the lab flags say)
  options.engine.zds_socket = node.zds.socket_path;
  options.engine.ztunnel_netns = {node.zds.ztunnel_netns_path};
  options.engine.cri_endpoints = {"unix://" + node.zds.cri_socket_path};
  options.poll_interval = milliseconds(200);
  Daemon daemon(options);
  std::thread runner([&daemon] { daemon.Run(); });
  uint64_t seen = 0;
  auto wait_for = [&](const std::function<bool(const PublishedResult&)>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      for (const auto& result : daemon.hub().WaitSince(seen, milliseconds(200)).results) {
        seen = result->sequence;
        if (!result->step.light && done(*result)) return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(wait_for([](const PublishedResult&) { return true; }));

  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    Result<lab::LabPod> added = lab::EnrollPod(prefix, {.index = 10 + round});
    ASSERT_TRUE(added.ok()) << added.error().message;
    const std::string path = added->netns_path;
    EXPECT_TRUE(wait_for([&path](const PublishedResult& r) { return Contains(r, path); }))
        << "round " << round << ": the added pod";
    ASSERT_TRUE(lab::UnenrollPod(prefix, added->index).ok());
    EXPECT_TRUE(wait_for([&path](const PublishedResult& r) { return !Contains(r, path); }))
        << "round " << round << ": the removed pod";
  }
  // A healthy node again: no finding is left over from the churn.
  EXPECT_TRUE(wait_for([](const PublishedResult& r) {
    return r.step.usable && r.trigger == StepTrigger::kPoll && r.step.analysis.findings.empty();
  })) << "findings left after the churn";

  daemon.Stop();
  runner.join();
  const auto stats_after = lab::ReadStatsFile(node.zds.stats_file);
  EXPECT_EQ(stats_after.at("accepted_connections"), stats_before.at("accepted_connections"))
      << "the daemon connected to the ZDS socket";
  for (const lab::LabPod& pod : node.pods) {
    EXPECT_EQ(RulesOf(pod), before[pod.netns_name]) << pod.netns_name << " was changed";
  }
}

}  // namespace
}  // namespace ad
