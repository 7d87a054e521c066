// The daemon's idle economies on a ZDS lab keep what it detects: polls that find nothing new are
// not analysed or published, and ztunnel's fds are read incrementally, yet a pod handed off, a pod
// removed (ztunnel's fd set shrinks), a ztunnel restart and a hand-off stuck past the stall
// threshold are all still seen within a few polls (counted in polls, never timed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/daemon.h"
#include "lab/emulators.h"
#include "lab/lab.h"
#include "scoped_child.h"

namespace ad {
namespace {

using std::chrono::milliseconds;

std::vector<std::string> CmdlineOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> argv;
  std::string arg;
  while (std::getline(in, arg, '\0')) argv.push_back(arg);
  return argv;
}

const NetnsSnapshot* NetnsAt(const PublishedResult& result, const std::string& path) {
  for (const NetnsSnapshot& netns : result.step.snapshot.netns) {
    if (std::find(netns.netns.paths.begin(), netns.netns.paths.end(), path) !=
        netns.netns.paths.end()) {
      return &netns;
    }
  }
  return nullptr;
}

// The ztunnel process the snapshot names (role ztunnel), or nullptr.
const ProcessNetnsFds* Ztunnel(const PublishedResult& result) {
  for (const ProcessNetnsFds& process : result.step.snapshot.processes) {
    if (process.role == ProcessRole::kZtunnel) return &process;
  }
  return nullptr;
}

bool ZtunnelHolds(const PublishedResult& result, uint64_t inode) {
  const ProcessNetnsFds* ztunnel = Ztunnel(result);
  return ztunnel != nullptr && std::binary_search(ztunnel->netns_fd_inodes.begin(),
                                                  ztunnel->netns_fd_inodes.end(), inode);
}

bool HasFinding(const PublishedResult& result, FindingCode code) {
  return std::any_of(result.step.analysis.findings.begin(), result.step.analysis.findings.end(),
                     [code](const Finding& f) { return f.code == code; });
}

class DaemonIdleTest : public ::testing::Test {
 protected:
  void StartLab(std::vector<lab::FaultSpec> faults = {}) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    prefix_ = "adidle" + std::to_string(::getpid() % 100000);
    lab_ = std::make_unique<lab::ScopedLab>(
        lab::LabOptions{.prefix = prefix_, .pods = 3, .faults = std::move(faults), .zds = true});
    ASSERT_TRUE(lab_->ok()) << lab_->error().message;
  }

  void StartDaemon(milliseconds stall_threshold = milliseconds(30'000),
                   milliseconds full_resync = milliseconds(600'000)) {
    const lab::LabNode& node = lab_->node();
    DaemonOptions options;
    options.engine.discovery.proc_root.clear();
    options.engine.discovery.netns_dirs = {"/run/netns"};
    options.engine.discovery.name_glob = prefix_ + "-*";
    options.engine.discovery.host_netns_path = node.host_netns_path;
    options.engine.host_root = node.host_root;  // its CNI config (as the lab flags say)
    options.engine.zds_socket = node.zds.socket_path;
    options.engine.ztunnel_netns = {node.zds.ztunnel_netns_path};
    options.engine.cri_endpoints = {"unix://" + node.zds.cri_socket_path};
    options.engine.analysis.zds_stall_threshold_ms = stall_threshold.count();
    options.poll_interval = milliseconds(200);
    options.full_resync = full_resync;  // by default nothing here may rely on a resync
    options.max_unpublished = milliseconds(600'000);
    options.on_step = [this](StepTrigger trigger, double, size_t netns_read) {
      if (trigger == StepTrigger::kPoll) ++polls_;
      if (trigger == StepTrigger::kResync) {
        ++resyncs_;
        resync_reads_max_ = std::max<size_t>(resync_reads_max_.load(), netns_read);
      }
    };
    daemon_ = std::make_unique<Daemon>(options);
    runner_ = std::thread([this] { daemon_->Run(); });
  }

  void TearDown() override {
    if (daemon_) {
      daemon_->Stop();
      runner_.join();
    }
  }

  // The first complete published result (after `seen`) for which `done` holds, waiting up to
  // `max_polls` polls of the daemon (plus a generous safety limit against a hang).
  std::shared_ptr<const PublishedResult> WaitPolls(
      int max_polls, const std::function<bool(const PublishedResult&)>& done) {
    const int limit = polls_.load() + max_polls;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (polls_.load() <= limit && std::chrono::steady_clock::now() < give_up) {
      for (const auto& result : daemon_->hub().WaitSince(seen_, milliseconds(100)).results) {
        seen_ = result->sequence;
        if (!result->step.light && done(*result)) return result;
      }
    }
    return nullptr;
  }

  std::string prefix_;
  std::unique_ptr<lab::ScopedLab> lab_;
  std::unique_ptr<Daemon> daemon_;
  std::thread runner_;
  std::atomic<int> polls_{0};
  std::atomic<int> resyncs_{0};
  std::atomic<size_t> resync_reads_max_{0};
  uint64_t seen_ = 0;
};

TEST_F(DaemonIdleTest, QuietPollsAreSkippedYetHandOffsRemovalsAndRestartsAreSeen) {
  StartLab();
  if (IsSkipped()) return;
  StartDaemon();
  const lab::LabNode& node = lab_->node();
  const std::string pod0 = node.pods[0].netns_path;
  auto settled = WaitPolls(50, [&](const PublishedResult& r) {
    const NetnsSnapshot* netns = NetnsAt(r, pod0);
    return r.step.usable && netns != nullptr && ZtunnelHolds(r, netns->netns.inode) &&
           r.step.analysis.findings.empty();
  });
  ASSERT_NE(settled, nullptr) << "the lab never looked healthy";

  // Idle: polls go on, but results are not published for them.
  const uint64_t unchanged_before = daemon_->unchanged_steps();
  const int polls_before = polls_.load();
  while (polls_.load() < polls_before + 5) std::this_thread::sleep_for(milliseconds(50));
  EXPECT_GT(daemon_->unchanged_steps(), unchanged_before) << "quiet polls are skipped";

  // A new pod handed off: its netns is seen held by ztunnel within a few polls.
  Result<lab::LabPod> added = lab::EnrollPod(prefix_, {.index = 20});
  ASSERT_TRUE(added.ok()) << added.error().message;
  auto handed_off = WaitPolls(3, [&](const PublishedResult& r) {
    const NetnsSnapshot* netns = NetnsAt(r, added->netns_path);
    return netns != nullptr && ZtunnelHolds(r, netns->netns.inode) &&
           !HasFinding(r, FindingCode::kZdsPending);
  });
  ASSERT_NE(handed_off, nullptr) << "the new pod's hand-off was not seen within 3 polls";
  const uint64_t added_inode = NetnsAt(*handed_off, added->netns_path)->netns.inode;

  // Removed (ztunnel closes that netns fd: its fd set shrinks).
  ASSERT_TRUE(lab::UnenrollPod(prefix_, added->index).ok());
  EXPECT_NE(WaitPolls(3,
                      [&](const PublishedResult& r) {
                        return NetnsAt(r, added->netns_path) == nullptr && Ztunnel(r) != nullptr &&
                               !ZtunnelHolds(r, added_inode);
                      }),
            nullptr)
      << "the removed pod's fd was still seen held after 3 polls";

  // ztunnel restarts: a new process (new pid) holding every pod netns again.
  const ProcessNetnsFds* old_ztunnel = Ztunnel(*settled);
  ASSERT_NE(old_ztunnel, nullptr);
  const int old_pid = old_ztunnel->pid;
  const std::vector<std::string> argv = CmdlineOf(old_pid);
  ASSERT_FALSE(argv.empty());
  lab::StopDaemon(old_pid, "ztunnel-sim");
  Result<int> restarted = lab::SpawnDaemon(
      {.argv = argv, .netns_path = node.zds.ztunnel_netns_path, .log_path = node.zds.ztunnel_log});
  ASSERT_TRUE(restarted.ok()) << restarted.error().message;
  const uint64_t pod0_inode = NetnsAt(*settled, pod0)->netns.inode;
  EXPECT_NE(WaitPolls(10,
                      [&](const PublishedResult& r) {
                        const ProcessNetnsFds* ztunnel = Ztunnel(r);
                        return ztunnel != nullptr && ztunnel->pid == *restarted &&
                               ZtunnelHolds(r, pod0_inode);
                      }),
            nullptr)
      << "the restarted ztunnel (pid " << *restarted << ") was not seen holding the pods";
  lab::StopDaemon(*restarted, "ztunnel-sim");  // LabDown stops the pid it recorded, not this one
}

TEST_F(DaemonIdleTest, AHandOffStillAgesIntoAStall) {
  StartLab({{lab::FaultKind::kZdsDeadlock, std::nullopt}});
  if (IsSkipped()) return;
  StartDaemon(/*stall_threshold=*/milliseconds(1000));
  // The threshold passes in about 5 polls; nothing else changes meanwhile, so only ageing can
  // turn the pending hand-off into a stall.
  EXPECT_NE(
      WaitPolls(50, [](const PublishedResult& r) { return HasFinding(r, FindingCode::kZdsStall); }),
      nullptr)
      << "ZDS_STALL never published";
}

// With events, a resync reads in full only what the gates flag, the host netns and a rolling tenth
// of the others, yet a listener that comes and goes without any netfilter or routing event is
// seen when its netns's slice comes round (ztunnel's own listeners are followed at every poll:
// the hand-off case of QuietPollsAreSkippedYetHandOffsRemovalsAndRestartsAreSeen).
TEST_F(DaemonIdleTest, GatedResyncsReadLittleAndStillSeeListeners) {
  StartLab();
  if (IsSkipped()) return;
  StartDaemon(milliseconds(30'000), /*full_resync=*/milliseconds(600));
  const lab::LabNode& node = lab_->node();
  const std::string pod1 = node.pods[1].netns_path;
  auto has_listener = [&](const PublishedResult& r, uint16_t port) {
    const NetnsSnapshot* netns = NetnsAt(r, pod1);
    return netns != nullptr && std::any_of(netns->listeners.begin(), netns->listeners.end(),
                                           [port](const ListeningSocket& l) {
                                             return l.port == port && l.protocol == 6;
                                           });
  };
  auto settled = WaitPolls(50, [&](const PublishedResult& r) {
    return r.step.usable && has_listener(r, 15008) && r.step.analysis.findings.empty();
  });
  ASSERT_NE(settled, nullptr) << "the lab never looked healthy";
  const size_t netns_count = settled->step.snapshot.netns.size();
  ASSERT_GE(netns_count, 5u) << "host, ztunnel and three pods";

  const int resyncs_before = resyncs_.load();
  {
    testing::ScopedChild listener(
        {"/usr/bin/python3", "-c",
         "import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,"
         "socket.SO_REUSEADDR,1)\ns.bind(('0.0.0.0',18080))\ns.listen()\ntime.sleep(120)"},
        pod1);
    ASSERT_GT(listener.pid(), 0);
    auto seen = WaitPolls(100, [&](const PublishedResult& r) { return has_listener(r, 18080); });
    ASSERT_NE(seen, nullptr) << "a new listener was never seen";
    EXPECT_GT(resyncs_.load(), resyncs_before) << "no event announces a listener: a resync did";
    // The netns count here makes a slice of one netns: a full round of slices at the most, plus
    // the resync that was running when the child started listening.
    EXPECT_LE(resyncs_.load(), resyncs_before + static_cast<int>(netns_count) + 1)
        << "the rolling slice reads every netns's listeners within one round";
  }
  auto gone = WaitPolls(100, [&](const PublishedResult& r) {
    return NetnsAt(r, pod1) != nullptr && !has_listener(r, 18080) && has_listener(r, 15008);
  });
  ASSERT_NE(gone, nullptr) << "a closed listener stayed";
  EXPECT_GE(resyncs_.load(), resyncs_before + 1);
  EXPECT_LT(resync_reads_max_.load(), netns_count) << "a gated resync read every netns in full";
}

}  // namespace
}  // namespace ad
