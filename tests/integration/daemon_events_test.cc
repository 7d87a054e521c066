// The daemon reacts to changes in the kernel, not to a rescan loop: with a poll interval far longer
// than the test waits (except for iptables-legacy, which has no events and is seen by its
// fingerprint on the interval), deleting an Istio rule in one lab pod opens INCOMPLETE_RULESET for
// exactly that pod, and putting it back resolves it; the same for a native nft pod, a legacy pod,
// a deleted `ip rule`, and a pod netns that appears and one that goes away.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>

#include "daemon/daemon.h"
#include "lab/lab.h"
#include "netns_test_util.h"

namespace ad {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class DaemonEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }

  // A lab and a daemon scanning exactly it (no ZDS: rules only).
  void Start(lab::LabBackend backend, milliseconds poll_interval = milliseconds(60'000)) {
    lab::LabOptions options;
    options.prefix = "adev" + std::to_string(::getpid() % 100000);
    options.pods = 2;
    options.backend = backend;
    lab_ = std::make_unique<lab::ScopedLab>(options);
    ASSERT_TRUE(lab_->ok()) << lab_->error().message;
    DaemonOptions daemon;
    daemon.engine.discovery.proc_root.clear();
    daemon.engine.discovery.netns_dirs = {"/run/netns"};
    daemon.engine.discovery.name_glob = options.prefix + "-*";
    daemon.engine.discovery.host_netns_path = lab_->node().host_netns_path;
    daemon.engine.zds = false;
    daemon.engine.cri = false;
    daemon.engine.host_root = lab_->node().host_root;  // its CNI config (as the lab flags say)
    daemon.poll_interval = poll_interval;
    daemon_ = std::make_unique<Daemon>(daemon);
    runner_ = std::thread([this] { daemon_->Run(); });
    const ResultHub::Since first = daemon_->hub().WaitSince(0, seconds(30));
    ASSERT_FALSE(first.results.empty());
    ASSERT_TRUE(daemon_->event_driven_active() || backend == lab::LabBackend::kLegacy)
        << "the event sockets did not open";
    ASSERT_TRUE(first.results.back()->step.analysis.findings.empty())
        << "the healthy lab has findings";
    seen_ = first.results.back()->sequence;
  }

  void TearDown() override {
    if (daemon_) {
      daemon_->Stop();
      runner_.join();
    }
  }

  // Waits until a published result satisfies `done`; false after `timeout`.
  bool WaitFor(const std::function<bool(const PublishedResult&)>& done,
               milliseconds timeout = milliseconds(15'000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      const ResultHub::Since since = daemon_->hub().WaitSince(seen_, milliseconds(200));
      for (const auto& result : since.results) {
        seen_ = result->sequence;
        if (done(*result)) return true;
      }
    }
    return false;
  }

  // The open findings are exactly {code} in the netns at `path`.
  static std::function<bool(const PublishedResult&)> OnlyFinding(const std::string& path,
                                                                 FindingCode code) {
    const uint64_t inode = testing::InodeOf(path);
    return [inode, code](const PublishedResult& result) {
      const auto& findings = result.step.analysis.findings;
      return findings.size() == 1 && findings[0].code == code && findings[0].netns_inode == inode;
    };
  }
  static bool NoFindings(const PublishedResult& result) {
    return result.step.usable && result.step.analysis.findings.empty();
  }

  const lab::LabPod& Pod(int index) const { return lab_->node().pods.at(index); }
  int InPod(int index, const std::string& command) const {
    return testing::Run("ip netns exec " + Pod(index).netns_name + " " + command);
  }

  std::unique_ptr<lab::ScopedLab> lab_;
  std::unique_ptr<Daemon> daemon_;
  std::thread runner_;
  uint64_t seen_ = 0;
};

TEST_F(DaemonEventsTest, IptablesNftRuleDeletedAndRestored) {
  Start(lab::LabBackend::kIptablesNft);
  const std::string saved =
      testing::Capture("ip netns exec " + Pod(0).netns_name + " iptables-nft-save -t nat");
  ASSERT_EQ(InPod(0, "iptables-nft -t nat -D ISTIO_OUTPUT 1"), 0);
  EXPECT_TRUE(WaitFor(OnlyFinding(Pod(0).netns_path, FindingCode::kIncompleteRuleset)));
  ASSERT_EQ(testing::RunWithInput(
                "ip netns exec " + Pod(0).netns_name + " iptables-nft-restore -T nat", saved),
            0);
  EXPECT_TRUE(WaitFor(NoFindings)) << "restoring the rule resolves it";
}

TEST_F(DaemonEventsTest, NativeNftRuleDeletedAndRestored) {
  Start(lab::LabBackend::kNft);
  const std::string saved = testing::Capture("ip netns exec " + Pod(1).netns_name +
                                             " nft list table inet istio-ambient-nat");
  ASSERT_FALSE(saved.empty());
  ASSERT_EQ(InPod(1, "nft flush chain inet istio-ambient-nat istio-output"), 0);
  EXPECT_TRUE(WaitFor(OnlyFinding(Pod(1).netns_path, FindingCode::kIncompleteRuleset)));
  ASSERT_EQ(testing::RunWithInput("ip netns exec " + Pod(1).netns_name + " nft -f -",
                                  "delete table inet istio-ambient-nat\n" + saved),
            0);
  EXPECT_TRUE(WaitFor(NoFindings));
}

TEST_F(DaemonEventsTest, LegacyRuleSeenWithinOnePollInterval) {
  Start(lab::LabBackend::kLegacy, milliseconds(500));
  ASSERT_EQ(InPod(0, "iptables-legacy -t nat -D ISTIO_OUTPUT 1"), 0);
  EXPECT_TRUE(WaitFor(OnlyFinding(Pod(0).netns_path, FindingCode::kIncompleteRuleset)));
}

TEST_F(DaemonEventsTest, DeletedPolicyRuleAndNetnsChurn) {
  Start(lab::LabBackend::kIptablesNft);
  ASSERT_EQ(testing::Run("ip -n " + Pod(1).netns_name + " rule del pref 32764"), 0);
  EXPECT_TRUE(WaitFor(OnlyFinding(Pod(1).netns_path, FindingCode::kIncompleteRuleset)));
  ASSERT_EQ(testing::Run("ip -n " + Pod(1).netns_name +
                         " rule add fwmark 0x111/0xfff pref 32764 table 100"),
            0);
  EXPECT_TRUE(WaitFor(NoFindings));

  // A new netns matching the lab's names is scanned; a removed one drops out.
  const std::string extra = lab_->node().prefix + "-pod-900";
  ASSERT_EQ(testing::Run("ip netns add " + extra), 0);
  const size_t before = daemon_->hub().Latest()->step.snapshot.netns.size();
  EXPECT_TRUE(WaitFor([before](const PublishedResult& result) {
    return result.step.snapshot.netns.size() == before + 1;
  })) << "the added netns";
  ASSERT_EQ(testing::Run("ip netns del " + extra), 0);
  EXPECT_TRUE(WaitFor([before](const PublishedResult& result) {
    return result.step.snapshot.netns.size() == before;
  })) << "the removed netns";
}

}  // namespace
}  // namespace ad
