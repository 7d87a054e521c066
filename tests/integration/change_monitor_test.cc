// ChangeMonitor on the real kernel: every kind of change makes exactly its netns dirty with the
// right reason, read-only commands make nothing dirty, a restore is one coalesced report, ENOBUFS
// becomes an overflow, netns appear and disappear through inotify (and no fd keeps a deleted one
// alive), and the monitor itself changes no state. Waits are liveness bounds, never speed checks.
#include "sources/watch/change_monitor.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lab/rules.h"
#include "netns_test_util.h"
#include "sources/watch/legacy_fingerprint.h"

namespace ad::watch {
namespace {

using std::chrono::milliseconds;
using testing::ScopedNetns;

constexpr char kRedirect[] = "-t nat -A OUTPUT -p tcp --dport 80 -j REDIRECT --to-ports 15001";
constexpr char kRedirectDelete[] =
    "-t nat -D OUTPUT -p tcp --dport 80 -j REDIRECT --to-ports 15001";

bool HaveTool(const std::string& name) { return testing::Run("command -v " + name) == 0; }

#define REQUIRE_ROOT_AND_TOOLS()                                                        \
  do {                                                                                  \
    if (!testing::IsRoot()) GTEST_SKIP() << "needs root (netns, netlink, raw sockets)"; \
    for (const char* tool : {"ip", "iptables-nft", "iptables-legacy", "nft"}) {         \
      if (!HaveTool(tool)) GTEST_SKIP() << tool << " not installed";                    \
    }                                                                                   \
  } while (0)

NetnsRecord RecordOf(const ScopedNetns& netns) {
  return NetnsRecord{.inode = testing::InodeOf(netns.path()), .paths = {netns.path()}};
}

std::unique_ptr<ChangeMonitor> MakeMonitor(ChangeMonitorConfig config = {}) {
  config.legacy_interval = milliseconds(0);  // tests drive the gates explicitly
  Result<std::unique_ptr<ChangeMonitor>> monitor = ChangeMonitor::Create(std::move(config));
  EXPECT_TRUE(monitor.ok()) << monitor.error().message;
  return monitor.ok() ? std::move(monitor).value() : nullptr;
}

// Every report per inode seen while polling for `duration`.
std::map<uint64_t, std::vector<DirtyNetns>> Collect(ChangeMonitor& monitor, milliseconds duration) {
  std::map<uint64_t, std::vector<DirtyNetns>> reports;
  const auto deadline = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < deadline) {
    for (DirtyNetns& dirty : monitor.Poll(milliseconds(20))) {
      reports[dirty.inode].push_back(std::move(dirty));
    }
  }
  return reports;
}

// Polls until `inode` is reported (bounded), then a little longer to catch stray reports.
std::map<uint64_t, std::vector<DirtyNetns>> CollectUntil(ChangeMonitor& monitor, uint64_t inode,
                                                         milliseconds settle = milliseconds(300)) {
  std::map<uint64_t, std::vector<DirtyNetns>> reports;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!reports.contains(inode) && std::chrono::steady_clock::now() < deadline) {
    for (DirtyNetns& dirty : monitor.Poll(milliseconds(50))) {
      reports[dirty.inode].push_back(std::move(dirty));
    }
  }
  for (auto& [key, more] : Collect(monitor, settle)) {
    for (DirtyNetns& dirty : more) reports[key].push_back(std::move(dirty));
  }
  return reports;
}

DirtyReasons ReasonsOf(const std::map<uint64_t, std::vector<DirtyNetns>>& reports, uint64_t inode) {
  DirtyReasons reasons = 0;
  if (auto it = reports.find(inode); it != reports.end()) {
    for (const DirtyNetns& dirty : it->second) reasons |= dirty.reasons;
  }
  return reasons;
}

class ChangeMonitorTest : public ::testing::Test {
 protected:
  // Two netns watched; the change happens in `a_`, `b_` must stay clean.
  void StartTwo(ChangeMonitorConfig config = {}) {
    ASSERT_TRUE(a_.ok() && b_.ok()) << "ip netns add failed";
    monitor_ = MakeMonitor(std::move(config));
    ASSERT_NE(monitor_, nullptr);
    for (const ScopedNetns* netns : {&a_, &b_}) {
      Status watched = monitor_->Watch(RecordOf(*netns));
      ASSERT_TRUE(watched.ok()) << watched.error().message;
    }
  }
  // Exactly `a_` dirty (with `expected`), `b_` not at all.
  DirtyReasons ExpectOnlyA(DirtyReason expected) {
    auto reports = CollectUntil(*monitor_, testing::InodeOf(a_.path()));
    const DirtyReasons reasons = ReasonsOf(reports, testing::InodeOf(a_.path()));
    EXPECT_TRUE(HasReason(reasons, expected))
        << "got " << DescribeReasons(reasons) << ", want " << DirtyReasonName(expected);
    EXPECT_EQ(ReasonsOf(reports, testing::InodeOf(b_.path())), 0u);
    return reasons;
  }

  ScopedNetns a_{"watch"};
  ScopedNetns b_{"watch"};
  std::unique_ptr<ChangeMonitor> monitor_;
};

TEST_F(ChangeMonitorTest, IptablesNftDeleteIsAnNftCommitOfThatNetnsOnly) {
  REQUIRE_ROOT_AND_TOOLS();
  ASSERT_TRUE(a_.ok());
  ASSERT_EQ(a_.Exec(std::string("iptables-nft ") + kRedirect), 0);
  StartTwo();
  ASSERT_EQ(a_.Exec(std::string("iptables-nft ") + kRedirectDelete), 0);
  auto reports = CollectUntil(*monitor_, testing::InodeOf(a_.path()));
  const auto& a_reports = reports[testing::InodeOf(a_.path())];
  ASSERT_EQ(a_reports.size(), 1u);
  EXPECT_EQ(a_reports[0].reasons, ReasonBit(DirtyReason::kNftCommit));
  ASSERT_EQ(a_reports[0].commits.size(), 1u);
  EXPECT_EQ(a_reports[0].commits[0].committer_name, "iptables-nft");
  EXPECT_GT(a_reports[0].commits[0].committer_pid, 0u);
  EXPECT_FALSE(reports.contains(testing::InodeOf(b_.path())));
}

TEST_F(ChangeMonitorTest, NftAddAndDeleteRule) {
  REQUIRE_ROOT_AND_TOOLS();
  ASSERT_TRUE(a_.ok());
  ASSERT_EQ(a_.Exec("nft add table inet adw"), 0);
  ASSERT_EQ(a_.Exec("nft add chain inet adw c"), 0);
  StartTwo();
  ASSERT_EQ(a_.Exec("nft add rule inet adw c tcp dport 81 accept"), 0);
  ExpectOnlyA(DirtyReason::kNftCommit);
  ASSERT_EQ(a_.Exec("sh -c 'nft delete rule inet adw c handle $(nft -a list chain inet adw c | "
                    "sed -n \"s/.*accept # handle //p\")'"),
            0);
  ExpectOnlyA(DirtyReason::kNftCommit);
}

TEST_F(ChangeMonitorTest, IpRuleDeleteIsARuleChange) {
  REQUIRE_ROOT_AND_TOOLS();
  ASSERT_TRUE(a_.ok());
  ASSERT_EQ(a_.Exec("ip rule add fwmark 0x111/0xfff pref 32764 table 100"), 0);
  StartTwo();
  ASSERT_EQ(a_.Exec("ip rule del fwmark 0x111/0xfff pref 32764 table 100"), 0);
  const DirtyReasons reasons = ExpectOnlyA(DirtyReason::kRule);
  EXPECT_FALSE(HasReason(reasons, DirtyReason::kNftCommit));
  EXPECT_FALSE(HasReason(reasons, DirtyReason::kRoute));
}

TEST_F(ChangeMonitorTest, IpRouteAddInTable100IsARouteChange) {
  REQUIRE_ROOT_AND_TOOLS();
  ASSERT_TRUE(a_.ok());
  ASSERT_EQ(a_.Exec("ip link set lo up"), 0);
  StartTwo();
  ASSERT_EQ(a_.Exec("ip route add local 0.0.0.0/0 dev lo table 100"), 0);
  const DirtyReasons reasons = ExpectOnlyA(DirtyReason::kRoute);
  EXPECT_FALSE(HasReason(reasons, DirtyReason::kRule));
}

// With a table filter (the daemon watches Istio's table 100 only), routes elsewhere are no reason.
TEST_F(ChangeMonitorTest, RouteTableFilterIgnoresOtherTables) {
  REQUIRE_ROOT_AND_TOOLS();
  ASSERT_TRUE(a_.ok());
  ASSERT_EQ(a_.Exec("ip link set lo up"), 0);
  ChangeMonitorConfig config;
  config.route_tables = {100};
  StartTwo(config);
  ASSERT_EQ(a_.Exec("ip route add 10.99.0.0/16 dev lo table 200"), 0);
  EXPECT_TRUE(Collect(*monitor_, milliseconds(300)).empty()) << "table 200 is not watched";
  ASSERT_EQ(a_.Exec("ip route add local 0.0.0.0/0 dev lo table 100"), 0);
  ExpectOnlyA(DirtyReason::kRoute);
}

TEST_F(ChangeMonitorTest, IptablesLegacyAppendIsSeenByTheGate) {
  REQUIRE_ROOT_AND_TOOLS();
  StartTwo();
  ASSERT_EQ(a_.Exec(std::string("iptables-legacy ") + kRedirect), 0);
  monitor_->PollLegacy(LegacyDepth::kGate);
  const DirtyReasons reasons = ExpectOnlyA(DirtyReason::kLegacyChanged);
  EXPECT_FALSE(HasReason(reasons, DirtyReason::kNftCommit));  // legacy has no nf_tables events
}

// In a netns without legacy tables the gate reads the IPv6 names only every
// kIpv6QuietEvery-th time: an IPv4 table is seen by the next gate, an IPv6-only one within that
// many gates, and a content hash (which reads both) sees it at once.
TEST_F(ChangeMonitorTest, LegacyIpv6OnlyTableInAQuietNetnsIsSeenWithinTheQuietGates) {
  REQUIRE_ROOT_AND_TOOLS();
  if (!HaveTool("ip6tables-legacy")) GTEST_SKIP() << "ip6tables-legacy not installed";
  StartTwo();
  for (int gate = 0; gate < LegacyFingerprint::kIpv6QuietEvery; ++gate) {
    monitor_->PollLegacy(LegacyDepth::kGate);  // quiet gates: the IPv6 part is reused
  }
  EXPECT_TRUE(Collect(*monitor_, milliseconds(100)).empty());
  ASSERT_EQ(a_.Exec(std::string("ip6tables-legacy ") + kRedirect), 0);
  int gates = 0;
  std::map<uint64_t, std::vector<DirtyNetns>> reports;
  while (gates < LegacyFingerprint::kIpv6QuietEvery && reports.empty()) {
    monitor_->PollLegacy(LegacyDepth::kGate);
    ++gates;
    reports = Collect(*monitor_, milliseconds(50));
  }
  ASSERT_EQ(reports.size(), 1u) << "an IPv6-only table unseen after " << gates << " gates";
  EXPECT_TRUE(reports.contains(RecordOf(a_).inode));
  // b: the content hash reads IPv6 whatever the gate's turn.
  ASSERT_EQ(b_.Exec(std::string("ip6tables-legacy ") + kRedirect), 0);
  monitor_->PollLegacy(LegacyDepth::kContentHash);
  reports = Collect(*monitor_, milliseconds(100));
  EXPECT_TRUE(reports.contains(RecordOf(b_).inode));
  EXPECT_FALSE(reports.contains(RecordOf(a_).inode));
}

TEST_F(ChangeMonitorTest, LegacySameSizeReplaceIsSeenOnlyByTheContentHash) {
  REQUIRE_ROOT_AND_TOOLS();
  ASSERT_TRUE(a_.ok());
  ASSERT_EQ(a_.Exec(std::string("iptables-legacy ") + kRedirect), 0);
  StartTwo();
  ASSERT_EQ(a_.Exec("iptables-legacy -t nat -R OUTPUT 1 -p tcp --dport 81 -j REDIRECT "
                    "--to-ports 15001"),
            0);
  monitor_->PollLegacy(LegacyDepth::kGate);
  EXPECT_TRUE(Collect(*monitor_, milliseconds(200)).empty()) << "GET_INFO cannot see a -R";
  monitor_->PollLegacy(LegacyDepth::kContentHash);
  ExpectOnlyA(DirtyReason::kLegacyChanged);
}

// A full re-read saw a legacy delete before the gate did; the restore then brings the gate back
// to its old baseline. Only a baseline refreshed at the read tells the restore apart.
TEST_F(ChangeMonitorTest, LegacyUndoAfterAReadThatSawTheChangeIsSeen) {
  REQUIRE_ROOT_AND_TOOLS();
  ASSERT_TRUE(a_.ok());
  ASSERT_EQ(a_.Exec(std::string("iptables-legacy ") + kRedirect), 0);
  StartTwo();
  ASSERT_EQ(a_.Exec("iptables-legacy -t nat -D OUTPUT 1"), 0);
  monitor_->RefreshLegacyBaselines({});  // the daemon's resync reads every netns now
  ASSERT_EQ(a_.Exec(std::string("iptables-legacy ") + kRedirect), 0);
  monitor_->PollLegacy(LegacyDepth::kGate);
  ExpectOnlyA(DirtyReason::kLegacyChanged);
}

TEST_F(ChangeMonitorTest, LegacyBaselineRefreshOfOneNetnsLeavesTheOthers) {
  REQUIRE_ROOT_AND_TOOLS();
  StartTwo();
  ASSERT_EQ(a_.Exec(std::string("iptables-legacy ") + kRedirect), 0);
  monitor_->RefreshLegacyBaselines({testing::InodeOf(b_.path())});  // a read of b only
  monitor_->PollLegacy(LegacyDepth::kGate);
  ExpectOnlyA(DirtyReason::kLegacyChanged);
}

TEST_F(ChangeMonitorTest, SpreadLegacyPollsVisitEveryNetnsRoundRobin) {
  REQUIRE_ROOT_AND_TOOLS();
  StartTwo();
  ASSERT_EQ(a_.Exec(std::string("iptables-legacy ") + kRedirect), 0);
  ASSERT_EQ(b_.Exec(std::string("iptables-legacy ") + kRedirect), 0);
  std::vector<uint64_t> seen;
  for (int round = 0; round < 2; ++round) {
    monitor_->PollLegacy(LegacyDepth::kGate, 1);
    auto reports = Collect(*monitor_, milliseconds(150));
    ASSERT_EQ(reports.size(), 1u) << "one netns per call";
    EXPECT_EQ(reports.begin()->second[0].reasons, ReasonBit(DirtyReason::kLegacyChanged));
    seen.push_back(reports.begin()->first);
  }
  std::sort(seen.begin(), seen.end());
  std::vector<uint64_t> both = {testing::InodeOf(a_.path()), testing::InodeOf(b_.path())};
  std::sort(both.begin(), both.end());
  EXPECT_EQ(seen, both);
}

TEST_F(ChangeMonitorTest, ReadOnlyCommandsMakeNothingDirty) {
  REQUIRE_ROOT_AND_TOOLS();
  ASSERT_TRUE(a_.ok());
  ASSERT_EQ(a_.Exec(std::string("iptables-nft ") + kRedirect), 0);
  ASSERT_EQ(a_.Exec(std::string("iptables-legacy ") + kRedirect), 0);
  ASSERT_EQ(a_.Exec("nft add table inet adw"), 0);
  StartTwo();
  for (const char* command :
       {"iptables-nft-save", "ip6tables-nft-save", "nft list ruleset", "iptables-legacy-save",
        "ip6tables-legacy-save", "iptables-nft -L -n", "ip rule show", "ip route show table all"}) {
    a_.Exec(command);
  }
  monitor_->PollLegacy(LegacyDepth::kContentHash);
  monitor_->PollGenerations();
  auto reports = Collect(*monitor_, milliseconds(300));
  EXPECT_TRUE(reports.empty()) << DescribeReasons(reports.begin()->second[0].reasons);
  EXPECT_EQ(monitor_->counters().events, 0u);
}

TEST_F(ChangeMonitorTest, IstioRestoreIsOneCoalescedReport) {
  REQUIRE_ROOT_AND_TOOLS();
  // A generous window: the restore's per-table commits must not be split by a busy machine.
  StartTwo({.coalesce_window = milliseconds(50), .max_delay = milliseconds(1000)});
  const std::string rules =
      lab::IptablesInpodRestore({.dns_capture = true}, Family::kIpv4, lab::SnatConfig{});
  ASSERT_EQ(a_.ExecWithInput("iptables-nft-restore", rules), 0);
  auto reports = CollectUntil(*monitor_, testing::InodeOf(a_.path()), milliseconds(500));
  const auto& a_reports = reports[testing::InodeOf(a_.path())];
  ASSERT_EQ(a_reports.size(), 1u);
  EXPECT_EQ(a_reports[0].reasons, ReasonBit(DirtyReason::kNftCommit));
  EXPECT_GE(a_reports[0].commits.size(), 2u) << "one commit per table";
  EXPECT_FALSE(reports.contains(testing::InodeOf(b_.path())));
}

TEST_F(ChangeMonitorTest, UnreadBacklogOverflowIsReported) {
  REQUIRE_ROOT_AND_TOOLS();
  StartTwo({.nft_receive_buffer = 4096});
  ASSERT_EQ(a_.Exec("sh -c 'for i in $(seq 60); do nft add table inet adw$i; done'"), 0);
  const DirtyReasons reasons = ExpectOnlyA(DirtyReason::kOverflow);
  EXPECT_TRUE(HasReason(reasons, DirtyReason::kNftCommit));
  EXPECT_GE(monitor_->counters().overflows, 1u);
}

// Fds of this process that still refer to the netns `inode`: nsfs fds and sockets (SIOCGSKNS).
std::vector<std::string> FdsReferringTo(uint64_t inode) {
  std::vector<std::string> found;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return {"cannot open /proc/self/fd"};
  const int dir_fd = ::dirfd(dir);
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == dir_fd) continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    if (::readlink(link.c_str(), target, sizeof(target) - 1) < 0) continue;
    const std::string text = target;
    if (text == "net:[" + std::to_string(inode) + "]") found.push_back("nsfs fd " + text);
    if (text.starts_with("socket:")) {
      const int netns_fd = ::ioctl(fd, SIOCGSKNS);
      if (netns_fd < 0) continue;
      struct stat st {};
      if (::fstat(netns_fd, &st) == 0 && st.st_ino == inode) {
        found.push_back("socket fd " + std::to_string(fd));
      }
      ::close(netns_fd);
    }
  }
  ::closedir(dir);
  return found;
}

TEST(ChangeMonitorNetnsDirTest, NetnsAppearsAndDisappearsAndNoFdKeepsItAlive) {
  REQUIRE_ROOT_AND_TOOLS();
  // Only this process's names: other tests on the machine add and delete netns too.
  ChangeMonitorConfig config{.netns_dirs = {"/run/netns"},
                             .name_glob = "adt-watchdir-" + std::to_string(::getpid()) + "-*"};
  std::unique_ptr<ChangeMonitor> monitor = MakeMonitor(config);
  ASSERT_NE(monitor, nullptr);
  ScopedNetns netns("watchdir");
  ASSERT_TRUE(netns.ok());
  const uint64_t inode = testing::InodeOf(netns.path());
  auto added = CollectUntil(*monitor, inode, milliseconds(100));
  EXPECT_TRUE(HasReason(ReasonsOf(added, inode), DirtyReason::kAdded))
      << DescribeReasons(ReasonsOf(added, inode));
  ASSERT_TRUE(monitor->IsWatched(inode)) << "added netns are watched (sockets opened inside)";
  // Usually 1: `ip netns add` creates the file before it bind-mounts the netns onto it.
  ::testing::Test::RecordProperty("nsfs_waits", std::to_string(monitor->counters().nsfs_waits));
  EXPECT_FALSE(FdsReferringTo(inode).empty());

  netns.Delete();
  auto removed = CollectUntil(*monitor, inode, milliseconds(100));
  EXPECT_TRUE(HasReason(ReasonsOf(removed, inode), DirtyReason::kRemoved));
  EXPECT_FALSE(monitor->IsWatched(inode));
  EXPECT_EQ(FdsReferringTo(inode), std::vector<std::string>{});
}

// The race made deterministic: a name that is a plain file first and an nsfs bind mount later
// (what `ip netns add` does), in a netns directory that does not exist when the monitor starts.
TEST(ChangeMonitorNetnsDirTest, NameIsReportedOnlyOnceItIsAnNsfsMount) {
  REQUIRE_ROOT_AND_TOOLS();
  ScopedNetns netns("watchrace");
  ASSERT_TRUE(netns.ok());
  const std::string root = "/tmp/adt-watchrace-" + std::to_string(::getpid());
  const std::string dir = root + "/later/netns";
  const std::string name = dir + "/pod";
  const std::string junk = dir + "/not-a-netns";
  struct Cleanup {
    std::string root, name;
    ~Cleanup() {
      testing::Run("umount " + name);
      testing::Run("rm -rf " + root);
    }
  } cleanup{root, name};
  ASSERT_EQ(testing::Run("rm -rf " + root + " && mkdir -p " + root), 0);
  std::unique_ptr<ChangeMonitor> monitor =
      MakeMonitor({.netns_dirs = {dir}, .watch_added = false, .nsfs_deadline = milliseconds(300)});
  ASSERT_NE(monitor, nullptr);

  ASSERT_EQ(testing::Run("mkdir -p " + dir + " && touch " + name + " " + junk), 0);
  EXPECT_TRUE(Collect(*monitor, milliseconds(100)).empty()) << "plain files are not netns yet";
  EXPECT_EQ(monitor->counters().nsfs_waits, 2u);

  ASSERT_EQ(testing::Run("mount --bind " + netns.path() + " " + name), 0);
  const uint64_t inode = testing::InodeOf(netns.path());
  auto reports = CollectUntil(*monitor, inode, milliseconds(400));
  ASSERT_EQ(reports.size(), 1u) << "only the mounted name, never the plain file";
  EXPECT_EQ(ReasonsOf(reports, inode), ReasonBit(DirtyReason::kAdded));
  EXPECT_EQ(reports[inode][0].path, name);
  EXPECT_EQ(monitor->counters().nsfs_timeouts, 1u) << "the plain file was given up on";
  EXPECT_FALSE(monitor->IsWatched(inode)) << "watch_added is off";
}

// Everything the monitor could conceivably touch, dumped by the real tools.
std::string DumpState(const ScopedNetns& netns) {
  std::string state;
  for (const char* command :
       {"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "nft list ruleset",
        "ip rule show", "ip -6 rule show", "ip route show table all"}) {
    const std::string out = "/tmp/adt-watch-dump-" + std::to_string(::getpid());
    netns.Exec(std::string("sh -c '") + command + " | grep -v \"^#\" > " + out + "'");
    state += std::string("== ") + command + "\n" + testing::ReadFile(out);
    ::unlink(out.c_str());
  }
  return state;
}

TEST_F(ChangeMonitorTest, MonitorIsReadOnlyOverALongRun) {
  REQUIRE_ROOT_AND_TOOLS();
  ASSERT_TRUE(a_.ok());
  ASSERT_EQ(a_.ExecWithInput(
                "iptables-nft-restore",
                lab::IptablesInpodRestore({.dns_capture = true}, Family::kIpv4, lab::SnatConfig{})),
            0);
  ASSERT_EQ(a_.Exec(std::string("iptables-legacy ") + kRedirect), 0);
  ASSERT_EQ(a_.Exec("ip rule add fwmark 0x111/0xfff pref 32764 table 100"), 0);
  const std::string before = DumpState(a_);
  StartTwo({.legacy_interval = milliseconds(10), .generation_interval = milliseconds(10)});
  for (int round = 0; round < 100; ++round) {
    monitor_->PollLegacy(round % 10 == 0 ? LegacyDepth::kContentHash : LegacyDepth::kGate);
    monitor_->PollGenerations();
    EXPECT_TRUE(monitor_->Poll(milliseconds(20)).empty());
  }
  EXPECT_EQ(DumpState(a_), before);
  EXPECT_GE(monitor_->counters().legacy_hash_checks, 10u);
  EXPECT_EQ(monitor_->counters().gate_errors, 0u);
}

}  // namespace
}  // namespace ad::watch
