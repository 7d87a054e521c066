// Netns discovery from bind-mount directories and /proc, deduplicated by (dev, inode).
#include "sources/netns/discovery.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "netns_test_util.h"

extern char** environ;

namespace ad {
namespace {

using testing::ScopedNetns;

class DiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

// A child process "ip netns exec <ns> sleep 30", killed and reaped on destruction.
class ScopedSleeper {
 public:
  explicit ScopedSleeper(const std::string& netns) {
    std::string cmd = "exec ip netns exec " + netns + " sleep 30";
    const char* argv[] = {"sh", "-c", cmd.c_str(), nullptr};
    if (::posix_spawnp(&pid_, "sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
      pid_ = -1;
    }
  }
  ~ScopedSleeper() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

std::string GlobFor(const ScopedNetns& netns) {
  // adt-<area>-<pid>-<n>: match every netns of this test process and area.
  return netns.name().substr(0, netns.name().rfind('-')) + "-*";
}

TEST_F(DiscoveryTest, FindsBindMountsInGivenDirs) {
  ScopedNetns a("disc");
  ScopedNetns b("disc");
  ASSERT_TRUE(a.ok() && b.ok());
  // A plain file next to the mounts is not a netns.
  const std::string stray = "/run/netns/" + a.name() + "-stray";
  std::ofstream(stray) << "x";

  DiscoveryOptions options;
  options.proc_root = "";
  options.netns_dirs = {"/run/netns", "/nonexistent-adt-dir"};
  options.name_glob = GlobFor(a);
  std::vector<SourceError> warnings;
  auto records = DiscoverNetns(options, &warnings);
  std::filesystem::remove(stray);

  EXPECT_TRUE(warnings.empty()) << warnings.front().message;  // a missing dir is normal
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].PrimaryPath(), a.path());
  EXPECT_EQ(records[1].PrimaryPath(), b.path());
  EXPECT_EQ(records[0].inode, testing::InodeOf(a.path()));
  EXPECT_NE(records[0].inode, records[1].inode);
  EXPECT_FALSE(records[0].is_host);
  EXPECT_TRUE(records[0].pids.empty());
}

TEST_F(DiscoveryTest, FindsProcessNetnsViaProcAndMarksHost) {
  ScopedNetns netns("disc");
  ASSERT_TRUE(netns.ok());
  ScopedSleeper sleeper(netns.name());
  ASSERT_GT(sleeper.pid(), 0);
  // `ip netns exec` switches netns then execs sleep in the same pid.
  const std::string proc_link = "/proc/" + std::to_string(sleeper.pid()) + "/ns/net";
  const ino_t want = testing::InodeOf(netns.path());
  for (int i = 0; i < 200 && testing::InodeOf(proc_link) != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(testing::InodeOf(proc_link), want);

  DiscoveryOptions options;
  options.netns_dirs = {};
  // Some sandboxes deny access to pid 1's links (EACCES); discovery then warns and the host is
  // named explicitly.
  const bool pid1_visible = testing::InodeOf("/proc/1/ns/net") != 0;
  if (!pid1_visible) {
    options.host_netns_path = "/proc/self/ns/net";
  }
  std::vector<SourceError> warnings;
  auto records = DiscoverNetns(options, &warnings);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(records[0].is_host);
  EXPECT_EQ(records[0].inode,
            testing::InodeOf(pid1_visible ? "/proc/1/ns/net" : "/proc/self/ns/net"));
  if (!pid1_visible) {
    EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [](const SourceError& w) {
      return w.message.find("/proc/1/ns/net") != std::string::npos && w.error_number == EACCES;
    }));
  }
  EXPECT_EQ(
      std::count_if(records.begin(), records.end(), [](const NetnsRecord& r) { return r.is_host; }),
      1);
  auto found = std::find_if(records.begin(), records.end(),
                            [&](const NetnsRecord& r) { return r.inode == want; });
  ASSERT_NE(found, records.end());
  EXPECT_NE(std::find(found->pids.begin(), found->pids.end(), sleeper.pid()), found->pids.end());
  EXPECT_NE(std::find(found->paths.begin(), found->paths.end(), proc_link), found->paths.end());

  // With the bind-mount dir too, both paths land on one record, the bind mount first.
  options.netns_dirs = {"/run/netns"};
  options.name_glob = netns.name();
  records = DiscoverNetns(options, &warnings);
  auto merged = std::find_if(records.begin(), records.end(),
                             [&](const NetnsRecord& r) { return r.inode == want; });
  ASSERT_NE(merged, records.end());
  EXPECT_EQ(merged->PrimaryPath(), netns.path());
  EXPECT_GE(merged->paths.size(), 2u);
  EXPECT_EQ(std::count_if(records.begin(), records.end(),
                          [&](const NetnsRecord& r) { return r.inode == want; }),
            1);
}

TEST_F(DiscoveryTest, ExplicitHostPathIsIncluded) {
  ScopedNetns fake_host("disc");
  ASSERT_TRUE(fake_host.ok());
  DiscoveryOptions options;
  options.proc_root = "";
  options.netns_dirs = {};
  options.host_netns_path = fake_host.path();
  std::vector<SourceError> warnings;
  auto records = DiscoverNetns(options, &warnings);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].is_host);
  EXPECT_EQ(records[0].PrimaryPath(), fake_host.path());
}

TEST_F(DiscoveryTest, OutputIsDeterministic) {
  ScopedNetns a("disc");
  ScopedNetns b("disc");
  ScopedNetns c("disc");
  DiscoveryOptions options;
  options.netns_dirs = {"/run/netns"};
  options.name_glob = GlobFor(a);
  std::vector<SourceError> warnings;
  auto first = DiscoverNetns(options, &warnings);
  auto second = DiscoverNetns(options, &warnings);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].inode, second[i].inode);
  }
}

// A daemon's repeated discoveries: paths seen before cost one stat(), yet an unmounted netns (its
// file left behind) and a different netns mounted at a known path are found like the first time.
TEST_F(DiscoveryTest, CacheTakesKnownMountsOnOneStatAndStillSeesUnmountAndRemount) {
  ScopedNetns a("disc");
  ScopedNetns b("disc");
  ScopedNetns other("disc");
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  DiscoveryOptions options;
  options.proc_root = "";
  options.netns_dirs = {"/run/netns"};
  options.name_glob = GlobFor(a);
  std::vector<SourceError> warnings;
  DiscoveryCache cache;
  const auto uncached = DiscoverNetns(options, &warnings);
  const auto first = DiscoverNetns(options, &warnings, &cache);
  EXPECT_EQ(cache.hits, 0u);
  EXPECT_EQ(cache.checks, 3u);
  const auto second = DiscoverNetns(options, &warnings, &cache);
  EXPECT_EQ(cache.hits, 3u);
  EXPECT_EQ(cache.checks, 3u);
  // With the mount table unchanged the known paths cost no stat() at all. Other tests may mount
  // meanwhile (a change makes a discovery stat again, which is right): tries spread over up to
  // 4 s, since a parallel lab set-up changes the table for longer than back-to-back tries take.
  for (int attempt = 0; attempt < 200 && cache.unstated == 0; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto again = DiscoverNetns(options, &warnings, &cache);
    ASSERT_EQ(again.size(), uncached.size());
  }
  EXPECT_GT(cache.unstated, 0u) << "the mount-table watch never found the table unchanged";
  EXPECT_EQ(cache.checks, 3u);
  ASSERT_EQ(second.size(), uncached.size());
  for (size_t i = 0; i < second.size(); ++i) {
    EXPECT_EQ(second[i].inode, uncached[i].inode);
    EXPECT_EQ(second[i].paths, uncached[i].paths);
  }
  const uint64_t b_inode = testing::InodeOf(b.path());
  const uint64_t other_inode = testing::InodeOf(other.path());
  auto inodes = [](const std::vector<NetnsRecord>& records) {
    std::vector<uint64_t> out;
    for (const NetnsRecord& r : records) out.push_back(r.inode);
    std::sort(out.begin(), out.end());
    return out;
  };

  // b's file stays, its mount goes: no longer a netns. Then other's netns is mounted there.
  ASSERT_EQ(std::system(("umount " + b.path()).c_str()), 0);
  auto after_umount = inodes(DiscoverNetns(options, &warnings, &cache));
  EXPECT_EQ(std::count(after_umount.begin(), after_umount.end(), b_inode), 0);
  EXPECT_EQ(after_umount.size(), 2u);
  ASSERT_EQ(std::system(("mount --bind " + other.path() + " " + b.path()).c_str()), 0);
  const auto remounted = DiscoverNetns(options, &warnings, &cache);
  const auto it = std::find_if(remounted.begin(), remounted.end(),
                               [&](const NetnsRecord& r) { return r.inode == other_inode; });
  ASSERT_NE(it, remounted.end());
  EXPECT_NE(std::find(it->paths.begin(), it->paths.end(), b.path()), it->paths.end());
  const auto remounted_inodes = inodes(remounted);
  EXPECT_EQ(std::count(remounted_inodes.begin(), remounted_inodes.end(), b_inode), 0);
}

}  // namespace
}  // namespace ad
