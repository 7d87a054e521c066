// The /proc fd inventory on the live system: processes exiting while it reads are skipped without
// a crash, and a process holding thousands of fds (sockets, files, netns fds) is read completely
// and quickly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/unique_fd.h"
#include "child_process_util.h"
#include "netns_test_util.h"
#include "sources/proc/fd_inventory.h"

namespace ad {
namespace {

using testing::ChildChannel;
using testing::ChildProcess;

// The daemon's cache: unchanged processes keep their last fds, a predicate forces a re-read, a
// full read comes on request and every `full_every`-th take.
TEST(FdInventoryLive, CacheReusesUnchangedProcessesUntilAskedOrFull) {
  ChildProcess child([](const ChildChannel& channel) {
    channel.Signal('r');
    while (auto byte = channel.Wait()) {
      if (*byte == 'o') {
        (void)::socket(AF_UNIX, SOCK_DGRAM, 0);  // one more socket, kept open
        channel.Signal('o');
      }
    }
  });
  ASSERT_EQ(child.Read(), 'r');
  auto sockets_of = [&child](const FdInventory& inventory) -> size_t {
    const ProcessFds* process = inventory.Find(child.pid());
    return process == nullptr ? 0 : process->socket_inodes.size();
  };
  FdInventoryCache cache(FdInventoryOptions{"/proc"}, /*full_every=*/4);
  const auto never = [](const ProcessFds&) { return false; };
  const size_t before = sockets_of(cache.Take(never));  // 1: the first take is full
  EXPECT_TRUE(cache.last_take_full());

  ASSERT_TRUE(child.Send('o'));
  ASSERT_EQ(child.Read(), 'o');
  EXPECT_EQ(sockets_of(cache.Take(never)), before) << "2: reused, the new socket is not seen";
  EXPECT_FALSE(cache.last_take_full());
  EXPECT_GT(cache.stats().processes_reused, 0u);

  const int pid = child.pid();
  EXPECT_EQ(sockets_of(cache.Take([pid](const ProcessFds& p) { return p.pid == pid; })), before + 1)
      << "3: the predicate re-reads it";

  ASSERT_TRUE(child.Send('o'));
  ASSERT_EQ(child.Read(), 'o');
  EXPECT_EQ(sockets_of(cache.Take(never)), before + 1) << "4: reused again";
  EXPECT_EQ(sockets_of(cache.Take(never)), before + 2)
      << "5: every 4th take after the first is full";
  EXPECT_TRUE(cache.last_take_full());
  cache.RequestFull();
  (void)cache.Take(never);
  EXPECT_TRUE(cache.last_take_full()) << "on request";
  EXPECT_EQ(cache.stats().takes, 6u);
  EXPECT_EQ(cache.stats().full_takes, 3u);
}

// A known process is recognised by the inode of its /proc/<pid> directory (procfs makes a new one
// for every process), so none of its files are read: a rename (or an exec) is seen only when the
// process is re-read (predicate, full take), which is the cost of not reading every process's stat
// every poll. Ownership that matters (a ZDS socket nobody owns) asks for a full take at once.
TEST(FdInventoryLive, CacheKnowsAProcessByItsProcDirectory) {
  ChildProcess child([](const ChildChannel& channel) {
    (void)::prctl(PR_SET_NAME, "adt-before");
    channel.Signal('r');
    while (auto byte = channel.Wait()) {
      if (*byte == 'n') {
        (void)::prctl(PR_SET_NAME, "adt-after");
        channel.Signal('n');
      }
    }
  });
  ASSERT_EQ(child.Read(), 'r');
  const int pid = child.pid();
  auto comm_of = [pid](const FdInventory& inventory) -> std::string {
    const ProcessFds* process = inventory.Find(pid);
    return process == nullptr ? "" : process->comm;
  };
  FdInventoryCache cache(FdInventoryOptions{"/proc"}, /*full_every=*/1000);
  const auto never = [](const ProcessFds&) { return false; };
  FdInventory first = cache.Take(never);
  EXPECT_EQ(comm_of(first), "adt-before");
  ASSERT_NE(first.Find(pid), nullptr);
  struct stat dir {};
  ASSERT_EQ(::stat(("/proc/" + std::to_string(pid)).c_str(), &dir), 0);
  EXPECT_EQ(first.Find(pid)->proc_dir_inode, dir.st_ino);

  ASSERT_TRUE(child.Send('n'));
  ASSERT_EQ(child.Read(), 'n');
  const uint64_t reused_before = cache.stats().processes_reused;
  EXPECT_EQ(comm_of(cache.Take(never)), "adt-before") << "same directory: nothing read";
  EXPECT_GT(cache.stats().processes_reused, reused_before);
  EXPECT_EQ(comm_of(cache.Take([pid](const ProcessFds& p) { return p.pid == pid; })), "adt-after")
      << "re-read on request";
  cache.RequestFull();
  EXPECT_EQ(comm_of(cache.Take(never)), "adt-after");
}

// A re-read process is read incrementally: new fd numbers are stat()ed at once and closed ones
// dropped at once, while a number closed and reused for another netns between two takes (what
// the kernel's lowest-free-fd rule makes likely) is seen within `revalidate_every` takes, or on
// the next take after RequestDeep().
TEST(FdInventoryLive, IncrementalRereadsSeeNewClosedAndReusedFdNumbers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  testing::ScopedNetns first("fdinv");
  testing::ScopedNetns second("fdinv");
  ASSERT_TRUE(first.ok() && second.ok());
  const uint64_t first_inode = testing::InodeOf(first.path());
  const uint64_t second_inode = testing::InodeOf(second.path());
  constexpr int kSlot = 700;  // the fd number the child reuses
  const std::string first_path = first.path();
  const std::string second_path = second.path();
  ChildProcess child([&](const ChildChannel& channel) {
    auto put = [](const std::string& path, int slot) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      (void)::dup2(fd, slot);
      ::close(fd);
    };
    put(first_path, kSlot);
    channel.Signal('r');
    while (auto byte = channel.Wait()) {
      if (*byte == 's') put(second_path, kSlot);  // same number, other netns (dup2 closes)
      if (*byte == 'f') put(first_path, kSlot);
      if (*byte == 'n') put(first_path, kSlot + 1);  // a new number
      if (*byte == 'c') ::close(kSlot + 1);          // closed again
      channel.Signal(*byte);
    }
  });
  ASSERT_EQ(child.Read(), 'r');
  const int pid = child.pid();
  const auto netns_of = [pid](const FdInventory& inventory) {
    const ProcessFds* process = inventory.Find(pid);
    return process == nullptr ? std::vector<uint64_t>{} : process->netns_fd_inodes;
  };
  const auto holds = [](const std::vector<uint64_t>& inodes, uint64_t inode) {
    return std::find(inodes.begin(), inodes.end(), inode) != inodes.end();
  };
  constexpr int kRevalidateEvery = 4;
  FdInventoryCache cache(FdInventoryOptions{"/proc"}, /*full_every=*/1000, kRevalidateEvery);
  const auto child_only = [pid](const ProcessFds& p) { return p.pid == pid; };
  ASSERT_TRUE(holds(netns_of(cache.Take(child_only)), first_inode));  // full
  ASSERT_TRUE(holds(netns_of(cache.Take(child_only)), first_inode));  // builds its fd table
  const uint64_t stated_before = cache.stats().fds_stated;
  EXPECT_TRUE(holds(netns_of(cache.Take(child_only)), first_inode));
  EXPECT_GT(cache.stats().fds_reused, 0u);
  EXPECT_LT(cache.stats().fds_stated - stated_before, 64u) << "most fds were not stat()ed again";

  ASSERT_TRUE(child.Send('n'));
  ASSERT_EQ(child.Read(), 'n');
  std::vector<uint64_t> now = netns_of(cache.Take(child_only));
  EXPECT_EQ(std::count(now.begin(), now.end(), first_inode), 1) << "sorted unique";
  ASSERT_TRUE(child.Send('s'));  // kSlot now holds the second netns, kSlot + 1 still the first
  ASSERT_EQ(child.Read(), 's');
  bool seen = false;
  for (int take = 0; take < kRevalidateEvery && !seen; ++take) {
    seen = holds(netns_of(cache.Take(child_only)), second_inode);
  }
  EXPECT_TRUE(seen) << "a reused fd number is re-stat()ed within revalidate_every takes";

  ASSERT_TRUE(child.Send('c'));
  ASSERT_EQ(child.Read(), 'c');
  now = netns_of(cache.Take(child_only));
  EXPECT_FALSE(holds(now, first_inode)) << "a closed fd is dropped at once";
  EXPECT_TRUE(holds(now, second_inode));

  // With revalidation far away, only a deep request finds a reused number: the stale entry is
  // kept until then (the bounded staleness the callers' deep requests are for).
  FdInventoryCache rare(FdInventoryOptions{"/proc"}, /*full_every=*/1000,
                        /*revalidate_every=*/1000);
  (void)rare.Take(child_only);
  ASSERT_TRUE(holds(netns_of(rare.Take(child_only)), second_inode));
  ASSERT_TRUE(child.Send('f'));  // kSlot: back to the first netns
  ASSERT_EQ(child.Read(), 'f');
  EXPECT_TRUE(holds(netns_of(rare.Take(child_only)), second_inode)) << "not re-stat()ed yet";
  rare.RequestDeep();
  now = netns_of(rare.Take(child_only));
  EXPECT_TRUE(rare.last_take_deep());
  EXPECT_TRUE(holds(now, first_inode));
  EXPECT_FALSE(holds(now, second_inode));
}

TEST(FdInventoryLive, ProcessesExitingDuringTheScanAreSkipped) {
  // A thread keeps forking children that exit at once, so pids vanish between readdir, stat and
  // the fd walk.
  std::atomic<bool> stop{false};
  std::atomic<int> forked{0};
  std::thread churn([&] {
    while (!stop) {
      const pid_t pid = ::fork();
      if (pid == 0) ::_exit(0);
      if (pid > 0) {
        ::waitpid(pid, nullptr, 0);
        ++forked;
      }
    }
  });
  struct StopChurn {
    std::atomic<bool>& stop;
    std::thread& churn;
    ~StopChurn() {
      stop = true;
      churn.join();
    }
  } stop_churn{stop, churn};
  for (int round = 0; round < 30; ++round) {
    FdInventory inventory = TakeFdInventory({});
    ASSERT_NE(inventory.Find(::getpid()), nullptr);
    for (const ProcessFds& process : inventory.processes) {
      ASSERT_GT(process.pid, 0);
    }
  }
  EXPECT_GT(forked.load(), 0);
}

TEST(FdInventoryLive, ThousandsOfFdsAreReadCompletelyAndQuickly) {
  if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create a network namespace";
  testing::ScopedNetns netns("inv");
  ASSERT_TRUE(netns.ok());
  constexpr int kSocketPairs = 2000;
  constexpr int kFiles = 5000;
  constexpr int kNetnsFds = 50;
  const std::string netns_path = netns.path();
  ChildProcess holder([&](const ChildChannel& channel) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, 20000);
    ::setrlimit(RLIMIT_NOFILE, &limit);
    bool ok = true;
    for (int i = 0; i < kSocketPairs && ok; ++i) {
      int pair[2];
      ok = ::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0;
    }
    for (int i = 0; i < kFiles && ok; ++i) ok = ::open("/dev/null", O_RDONLY) >= 0;
    for (int i = 0; i < kNetnsFds && ok; ++i) ok = ::open(netns_path.c_str(), O_RDONLY) >= 0;
    channel.Signal(ok ? 'r' : 'x');
    channel.Linger();
  });
  ASSERT_EQ(holder.Read(), 'r') << "could not open the fds (RLIMIT_NOFILE?)";

  const auto started = std::chrono::steady_clock::now();
  FdInventory inventory = TakeFdInventory({});
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  const ProcessFds* process = inventory.Find(holder.pid());
  ASSERT_NE(process, nullptr);
  EXPECT_EQ(process->socket_inodes.size(), static_cast<size_t>(2 * kSocketPairs));
  EXPECT_EQ(process->netns_fd_inodes, std::vector<uint64_t>{testing::InodeOf(netns_path)});
  std::printf("inventory of %zu processes incl. one with %d fds: %.1f ms\n",
              inventory.processes.size(), 2 * kSocketPairs + kFiles + kNetnsFds, elapsed_ms);
  EXPECT_LT(elapsed_ms, 2000);
}

TEST(FdInventoryLive, NetnsFdReceivedOverScmRightsIsFound) {
  if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create a network namespace";
  testing::ScopedNetns netns("inv");
  ASSERT_TRUE(netns.ok());
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  ChildProcess receiver([&theirs](const ChildChannel& channel) {
    const int fd = testing::ReceiveFd(theirs.get());
    theirs.Reset();
    channel.Signal(fd >= 0 ? 'r' : 'x');
    channel.Linger();
  });
  theirs.Reset();
  {
    // Opened through the bind mount, sent, and closed here: only the receiver holds it then.
    UniqueFd netns_fd(::open(netns.path().c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(netns_fd.valid());
    const char add[] = {0x0a, 0x00};
    ASSERT_TRUE(testing::SendWithFd(ours.get(), add, sizeof(add), netns_fd.get()));
  }
  ASSERT_EQ(receiver.Read(), 'r');
  FdInventory inventory = TakeFdInventory({});
  const ProcessFds* process = inventory.Find(receiver.pid());
  ASSERT_NE(process, nullptr);
  EXPECT_EQ(process->netns_fd_inodes, std::vector<uint64_t>{testing::InodeOf(netns.path())});
  const ProcessFds* self = inventory.Find(::getpid());
  ASSERT_NE(self, nullptr);
  EXPECT_TRUE(self->netns_fd_inodes.empty());
}

// istio-cni's "UNIX" sockets, learnt once per socket: with every held inode known the fd
// directory is not read at all (a proc root that does not exist still answers), and a new inode
// reads it again.
TEST(FdInventoryLive, SocketProtocolsAreLearntOncePerSocket) {
  UniqueFd datagram(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(datagram.valid() && tcp.valid());
  auto inode_of = [](int fd) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  };
  std::vector<uint64_t> held = {inode_of(datagram.get()), inode_of(tcp.get())};
  std::sort(held.begin(), held.end());
  std::unordered_map<uint64_t, bool> known;
  const auto first = SocketInodesByProtocolCached("/proc", ::getpid(), "UNIX", held, known);
  EXPECT_NE(std::find(first.begin(), first.end(), inode_of(datagram.get())), first.end());
  EXPECT_EQ(std::find(first.begin(), first.end(), inode_of(tcp.get())), first.end());
  EXPECT_EQ(known.at(inode_of(datagram.get())), true);
  EXPECT_EQ(known.at(inode_of(tcp.get())), false);

  const auto cached =
      SocketInodesByProtocolCached("/nonexistent-proc", ::getpid(), "UNIX", held, known);
  EXPECT_EQ(cached, (std::vector<uint64_t>{inode_of(datagram.get())}));

  UniqueFd another(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(another.valid());
  held.push_back(inode_of(another.get()));
  std::sort(held.begin(), held.end());
  EXPECT_TRUE(
      SocketInodesByProtocolCached("/nonexistent-proc", ::getpid(), "UNIX", held, known).empty())
      << "a new inode reads the fd directory (here: one that does not exist)";
  const auto reread = SocketInodesByProtocolCached("/proc", ::getpid(), "UNIX", held, known);
  EXPECT_NE(std::find(reread.begin(), reread.end(), inode_of(another.get())), reread.end());
  EXPECT_EQ(known.at(inode_of(another.get())), true);
}

}  // namespace
}  // namespace ad
