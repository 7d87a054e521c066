// NetnsWorkers: tasks run off the caller's thread on reused workers, a task on a worker that asks
// for another runs inline (no wait on the pool), exceptions come back to the caller, concurrent
// callers each get a worker, and a worker is back in the agent's netns after a task that entered
// another one (that part needs root and skips otherwise).
#include "sources/netns/netns_workers.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sources/netns/netns_guard.h"

namespace ad {
namespace {

ino_t ThreadNetnsInode() {
  struct stat st {};
  return ::stat("/proc/thread-self/ns/net", &st) == 0 ? st.st_ino : 0;
}

TEST(NetnsWorkers, TasksRunOffTheCallerOnReusedThreads) {
  NetnsWorkers pool(/*kept_idle=*/2);
  std::set<std::thread::id> seen;
  for (int i = 0; i < 10; ++i) {
    pool.Run([&] { seen.insert(std::this_thread::get_id()); });
  }
  EXPECT_FALSE(seen.contains(std::this_thread::get_id()));
  EXPECT_EQ(seen.size(), 1u) << "one caller at a time reuses one worker";
  EXPECT_EQ(pool.stats().threads_started, 1u);
  EXPECT_EQ(pool.stats().tasks, 10u);
}

TEST(NetnsWorkers, RunOnEachRunsCopiesAtOnceAndANestedRunIsInline) {
  NetnsWorkers pool(/*kept_idle=*/2);
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::atomic<int> nested_inline{0};
  pool.RunOnEach(3, [&] {
    const int now = ++inside;
    for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto outer = std::this_thread::get_id();
    pool.Run([&] {
      if (std::this_thread::get_id() == outer) ++nested_inline;
    });
    --inside;
  });
  EXPECT_EQ(most.load(), 3) << "three copies ran at the same time";
  EXPECT_EQ(nested_inline.load(), 3);
  EXPECT_EQ(pool.stats().threads_started, 3u);
  pool.RunOnEach(3, [] {});
  EXPECT_EQ(pool.stats().threads_started, 4u) << "two kept idle, one more started";
  pool.RunOnEach(0, [] { FAIL() << "no copies, no run"; });
}

TEST(NetnsWorkers, AnExceptionReachesTheCallerAndTheWorkerStaysUsable) {
  NetnsWorkers pool;
  EXPECT_THROW(pool.Run([] { throw std::runtime_error("read failed"); }), std::runtime_error);
  int ran = 0;
  pool.Run([&] { ++ran; });
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(pool.stats().threads_started, 1u);
}

TEST(NetnsWorkers, ConcurrentCallersEachGetAWorker) {
  NetnsWorkers pool(/*kept_idle=*/1);
  std::atomic<int> done{0};
  std::vector<std::jthread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&] {
      for (int k = 0; k < 20; ++k) pool.Run([&] { ++done; });
    });
  }
  callers.clear();
  EXPECT_EQ(done.load(), 160);
  EXPECT_EQ(pool.stats().tasks, 160u);
}

TEST(NetnsWorkers, AForkedChildRunsItsTasksOnItsOwnThreads) {
  NetnsWorkers& pool = NetnsWorkers::Shared();
  pool.Run([] {});  // the parent has a worker now
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int ran = 0;
    pool.Run([&] { ++ran; });
    ::_exit(ran == 1 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(NetnsWorkers, AWorkerIsBackInTheAgentsNetnsAfterATaskEnteredAnother) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a netns and call setns";
  const std::string name = "adt-workers-" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("ip netns add " + name).c_str()), 0);
  NetnsWorkers pool;
  ino_t inside = 0;
  ino_t after = 0;
  pool.Run([&] {
    auto guard = NetnsGuard::Enter("/run/netns/" + name);
    ASSERT_TRUE(guard.ok()) << guard.error().message;
    inside = ThreadNetnsInode();
  });
  pool.Run([&] { after = ThreadNetnsInode(); });
  (void)std::system(("ip netns del " + name).c_str());
  EXPECT_NE(inside, ThreadNetnsInode());
  EXPECT_EQ(after, ThreadNetnsInode());
  EXPECT_EQ(pool.stats().threads_started, 1u) << "the same worker ran both";
}

}  // namespace
}  // namespace ad
