// The /proc fd inventory over a fake proc root built from real symlinks: stat parsing, sockets and
// netns fds found by stat() (whatever the link text), other files ignored, vanished and
// half-populated processes skipped. No root needed.
#include "sources/proc/fd_inventory.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/unique_fd.h"

namespace ad {
namespace {

namespace fs = std::filesystem;

TEST(ParseProcStat, CommMayContainSpacesAndParentheses) {
  std::string comm;
  uint64_t ticks = 0;
  const std::string stat =
      "4242 (we ird) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345 "
      "300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
  ASSERT_TRUE(ParseProcStat(stat, &comm, &ticks));
  EXPECT_EQ(comm, "we ird) (x)");
  EXPECT_EQ(ticks, 987654u);
}

TEST(ParseProcStat, RejectsTruncatedLines) {
  std::string comm;
  uint64_t ticks = 0;
  EXPECT_FALSE(ParseProcStat("1 (init) S 0 1", &comm, &ticks));
  EXPECT_FALSE(ParseProcStat("garbage", &comm, &ticks));
  EXPECT_FALSE(ParseProcStat("", &comm, &ticks));
}

TEST(ParseBootTime, FindsBtimeLine) {
  EXPECT_EQ(ParseBootTimeSeconds("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"),
            1700000000);
  EXPECT_EQ(ParseBootTimeSeconds("cpu 1\n"), 0);
}

class FakeProcRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/adt-fakeproc-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    Write("stat", "cpu 1 2 3\nbtime 1700000000\n");
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  void Write(const std::string& relative, const std::string& text) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text;
  }
  void Link(const std::string& relative, const std::string& target) {
    fs::create_directories((root_ / relative).parent_path());
    fs::create_symlink(target, root_ / relative);
  }
  // Binds a unix socket to a file under the root (closed again: the file stays); its inode.
  uint64_t BoundSocketFile(const std::string& name) {
    const UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string path = (root_ / name).string();
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return 0;
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  }
  static std::string Stat(int pid, const std::string& comm, uint64_t start_ticks) {
    std::string line = std::to_string(pid) + " (" + comm + ") S";
    for (int field = 4; field <= 21; ++field) line += " 0";
    return line + " " + std::to_string(start_ticks) + " 0 0\n";
  }
  fs::path root_;
};

TEST_F(FakeProcRoot, ReadsIdentitySocketsAndNetnsFds) {
  struct stat own_netns {};
  ASSERT_EQ(::stat("/proc/self/ns/net", &own_netns), 0);
  const long hz = ::sysconf(_SC_CLK_TCK);

  // Real socket files stand in for socket fds: stat() reports S_IFSOCK and an inode for both.
  const uint64_t socket_a = BoundSocketFile("a.sock");
  const uint64_t socket_b = BoundSocketFile("b.sock");
  ASSERT_NE(socket_a, 0u);
  ASSERT_NE(socket_b, 0u);
  Write("100/stat", Stat(100, "istio-cni", static_cast<uint64_t>(hz) * 5));
  Link("100/ns/net", "/proc/self/ns/net");
  Link("100/fd/3", (root_ / "a.sock").string());
  Link("100/fd/4", (root_ / "b.sock").string());
  Link("100/fd/5", (root_ / "a.sock").string());  // dup: listed once
  Link("100/fd/6", "/proc/self/ns/net");          // a netns reached through a path
  Link("100/fd/7", "/proc/self/ns/uts");          // a namespace, but not a network one
  Link("100/fd/8", (root_ / "stat").string());    // a plain file
  Link("100/fd/9", "/nonexistent/file");          // closed meanwhile: skipped
  Link("100/fd/10", "socket:[12345]");            // link text alone proves nothing
  Write("200/stat", Stat(200, "ztunnel", 1));     // no fds: identity only
  Link("200/ns/net", "/proc/self/ns/net");
  fs::create_directories(root_ / "200/fd");
  Write("250/stat", Stat(250, "zombie", 1));  // no ns link: exited (or a zombie), skipped
  fs::create_directories(root_ / "300");      // vanished between readdir and read
  fs::create_directories(root_ / "self");     // not a pid

  FdInventory inventory = TakeFdInventory({.proc_root = root_.string()});
  EXPECT_TRUE(inventory.warnings.empty());
  ASSERT_EQ(inventory.processes.size(), 2u);
  const ProcessFds* cni = inventory.Find(100);
  ASSERT_NE(cni, nullptr);
  EXPECT_EQ(cni->comm, "istio-cni");
  EXPECT_EQ(cni->start_time_unix_ms, 1700000000LL * 1000 + 5000);
  EXPECT_EQ(cni->own_netns_inode, own_netns.st_ino);
  EXPECT_EQ(cni->socket_inodes,
            (std::vector<uint64_t>{std::min(socket_a, socket_b), std::max(socket_a, socket_b)}));
  EXPECT_EQ(cni->netns_fd_inodes, std::vector<uint64_t>{own_netns.st_ino});
  const ProcessFds* ztunnel = inventory.Find(200);
  ASSERT_NE(ztunnel, nullptr);
  EXPECT_EQ(ztunnel->comm, "ztunnel");
  EXPECT_EQ(ztunnel->own_netns_inode, own_netns.st_ino);
  EXPECT_TRUE(ztunnel->socket_inodes.empty());
  EXPECT_EQ(inventory.Find(250), nullptr);
  EXPECT_EQ(inventory.Find(300), nullptr);
  const std::span<const int> owners = inventory.SocketOwners(socket_a);
  EXPECT_EQ(std::vector<int>(owners.begin(), owners.end()), std::vector<int>{100});
  EXPECT_TRUE(inventory.SocketOwners(1).empty());
}

TEST_F(FakeProcRoot, MissingRootIsOneWarning) {
  FdInventory inventory = TakeFdInventory({.proc_root = (root_ / "absent").string()});
  EXPECT_TRUE(inventory.processes.empty());
  ASSERT_EQ(inventory.warnings.size(), 1u);
  EXPECT_EQ(inventory.warnings[0].source(), "proc");
  EXPECT_EQ(inventory.warnings[0].error_number, ENOENT);
}

TEST(FdInventoryOfThisProcess, SeesItsOwnSocketsWithoutRoot) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  const UniqueFd first(pair[0]);
  const UniqueFd second(pair[1]);
  struct stat st {};
  ASSERT_EQ(::fstat(first.get(), &st), 0);
  FdInventory inventory = TakeFdInventory({});
  const ProcessFds* self = inventory.Find(::getpid());
  ASSERT_NE(self, nullptr);
  EXPECT_NE(std::find(self->socket_inodes.begin(), self->socket_inodes.end(), st.st_ino),
            self->socket_inodes.end());
  EXPECT_GT(self->start_time_unix_ms, 1600000000000LL);
}

}  // namespace
}  // namespace ad
