// The procfs / cgroupfs parsers behind ZTUNNEL_RESOURCE_PRESSURE, and ReadProcessResources on a
// fake proc root and cgroup root (no root needed): real shapes, "unlimited", "max", v1 and v2,
// garbage, and a pid that vanished.
#include "sources/proc/process_resources.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ad {
namespace {

namespace fs = std::filesystem;

constexpr char kLimits[] =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max open files            1024                 524288               files     \n"
    "Max locked memory         8388608              8388608              bytes     \n";

TEST(ProcessResourcesTest, MaxOpenFiles) {
  auto limit = ParseMaxOpenFiles(kLimits);
  ASSERT_TRUE(limit.ok()) << limit.error().message;
  EXPECT_EQ(limit->soft, 1024u);
  EXPECT_FALSE(limit->unlimited);

  auto unlimited =
      ParseMaxOpenFiles("Max open files            unlimited            unlimited  files\n");
  ASSERT_TRUE(unlimited.ok());
  EXPECT_TRUE(unlimited->unlimited);

  for (const char* bad :
       {"", "Max cpu time unlimited unlimited seconds\n",
        "Max open files            lots                 524288   files\n", "Max open files\n",
        "Max open files   -5  10 files\n", "Max open files   99999999999999999999999 1 files\n"}) {
    auto parsed = ParseMaxOpenFiles(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.error().kind, SourceKind::kProc);
    }
  }
}

TEST(ProcessResourcesTest, VmRss) {
  EXPECT_EQ(ParseVmRssBytes("Name:\tztunnel\nVmRSS:\t   51200 kB\nThreads:\t4\n"), 51200u * 1024);
  EXPECT_EQ(ParseVmRssBytes("Name:\tkthreadd\n"), std::nullopt);  // kernel threads have none
  EXPECT_EQ(ParseVmRssBytes("VmRSS:\tabc kB\n"), std::nullopt);
  EXPECT_EQ(ParseVmRssBytes("VmRSS:\t12 MB\n"), std::nullopt);
}

TEST(ProcessResourcesTest, MemoryCgroup) {
  auto v2 =
      ParseMemoryCgroup("0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-ab.scope\n");
  ASSERT_TRUE(v2.ok());
  EXPECT_TRUE(v2->v2);
  EXPECT_EQ(v2->path, "/kubepods.slice/kubepods-burstable.slice/cri-containerd-ab.scope");

  auto v1 = ParseMemoryCgroup(
      "12:pids:/kubepods/pod1/abc\n5:memory:/kubepods/pod1/abc\n1:name=systemd:/kubepods/x\n");
  ASSERT_TRUE(v1.ok());
  EXPECT_FALSE(v1->v2);
  EXPECT_EQ(v1->path, "/kubepods/pod1/abc");

  auto combined = ParseMemoryCgroup("4:cpu,memory:/a:b\n0::/ignored\n");  // hybrid: v1 limits
  ASSERT_TRUE(combined.ok());
  EXPECT_FALSE(combined->v2);
  EXPECT_EQ(combined->path, "/a:b");

  for (const char* bad : {"", "garbage\n", "3:cpu:/x\n", "0::relative\n", "::::\n"}) {
    EXPECT_FALSE(ParseMemoryCgroup(bad).ok()) << bad;
  }
}

TEST(ProcessResourcesTest, MemoryLimit) {
  auto max = ParseMemoryLimit("max\n");
  ASSERT_TRUE(max.ok());
  EXPECT_TRUE(max->unlimited);
  auto bytes = ParseMemoryLimit("536870912\n");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->bytes, 536870912u);
  EXPECT_FALSE(bytes->unlimited);
  auto v1_none = ParseMemoryLimit("9223372036854771712\n");  // v1 "no limit"
  ASSERT_TRUE(v1_none.ok());
  EXPECT_TRUE(v1_none->unlimited);
  for (const char* bad : {"", "lots", "-1", "12 34", "18446744073709551616"}) {
    EXPECT_FALSE(ParseMemoryLimit(bad).ok()) << bad;
  }
}

class FakeProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ad-resources-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "proc/4242/fd");
    fs::create_directories(root_ / "cgroup/kubepods/ztunnel");
    for (int fd = 0; fd < 5; ++fd) Write("proc/4242/fd/" + std::to_string(fd), "");
    Write("proc/4242/limits", kLimits);
    Write("proc/4242/status", "Name:\tztunnel\nVmRSS:\t 2048 kB\n");
    Write("proc/4242/cgroup", "0::/kubepods/ztunnel\n");
    Write("cgroup/kubepods/ztunnel/memory.max", "4194304\n");
    options_.proc_root = (root_ / "proc").string();
    options_.cgroup_root = (root_ / "cgroup").string();
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& relative, const std::string& text) {
    std::ofstream(root_ / relative) << text;
  }

  fs::path root_;
  ProcessResourceOptions options_;
};

TEST_F(FakeProcTest, ReadsEverything) {
  std::string problems;
  auto read = ReadProcessResources(4242, options_, &problems);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_TRUE(problems.empty()) << problems;
  EXPECT_EQ(read->open_fds, 5u);  // a regular directory has no fd-count st_size: counted
  EXPECT_TRUE(read->fd_limit_known);
  EXPECT_EQ(read->fd_limit.soft, 1024u);
  EXPECT_EQ(read->rss_bytes, 2048u * 1024);
  EXPECT_EQ(read->cgroup, "/kubepods/ztunnel");
  EXPECT_TRUE(read->memory_limit_known);
  EXPECT_EQ(read->memory_limit.bytes, 4194304u);
}

TEST_F(FakeProcTest, MalformedAndMissingPartsAreProblemsNotFailures) {
  Write("proc/4242/limits", "Max open files  unlimited unlimited files\n");
  Write("cgroup/kubepods/ztunnel/memory.max", "max\n");
  std::string problems;
  auto read = ReadProcessResources(4242, options_, &problems);
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->fd_limit.unlimited);
  EXPECT_TRUE(read->memory_limit.unlimited);
  EXPECT_TRUE(problems.empty()) << problems;

  Write("proc/4242/limits", "Max open files  ??? 1 files\n");
  Write("cgroup/kubepods/ztunnel/memory.max", "\x01\x02garbage");
  Write("proc/4242/status", "Name:\tztunnel\n");
  problems.clear();
  read = ReadProcessResources(4242, options_, &problems);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->fd_limit_known);
  EXPECT_FALSE(read->memory_limit_known);
  EXPECT_NE(problems.find("is not a number"), std::string::npos) << problems;
  EXPECT_NE(problems.find("no VmRSS"), std::string::npos) << problems;
  EXPECT_NE(problems.find("memory.max"), std::string::npos) << problems;

  // A cgroup outside the agent's cgroup namespace, and a v1 node without the memory hierarchy.
  Write("proc/4242/cgroup", "0::/../../kubepods/ztunnel\n");
  problems.clear();
  read = ReadProcessResources(4242, options_, &problems);
  ASSERT_TRUE(read.ok());
  EXPECT_NE(problems.find("outside the agent's cgroup namespace"), std::string::npos) << problems;
  Write("proc/4242/cgroup", "5:memory:/kubepods/ztunnel\n");
  problems.clear();
  read = ReadProcessResources(4242, options_, &problems);
  ASSERT_TRUE(read.ok());
  EXPECT_NE(problems.find("memory.limit_in_bytes"), std::string::npos) << problems;
}

TEST_F(FakeProcTest, VanishedPidIsAnError) {
  fs::remove_all(root_ / "proc/4242");
  auto read = ReadProcessResources(4242, options_, nullptr);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().error_number, ESRCH);
  EXPECT_NE(read.error().message.find("exited"), std::string::npos);
}

TEST(ProcessResourcesTest, OwnProcess) {
  std::string problems;
  auto read = ReadProcessResources(::getpid(), ProcessResourceOptions{}, &problems);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_GT(read->open_fds, 2u);
  EXPECT_TRUE(read->fd_limit_known);
  EXPECT_GT(read->rss_bytes, 0u);
}

}  // namespace
}  // namespace ad
