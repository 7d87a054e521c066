// NetnsGuard errors name the syscall, the path and the errno text; entering and leaving restores
// the thread's own netns (that part needs root and skips otherwise).
#include "sources/netns/netns_guard.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

namespace ad {
namespace {

ino_t ThreadNetnsInode() {
  struct stat st {};
  return ::stat("/proc/thread-self/ns/net", &st) == 0 ? st.st_ino : 0;
}

TEST(NetnsGuard, MissingPathIsAnErrorNamingSyscallAndPath) {
  auto guard = NetnsGuard::Enter("/nonexistent/adt-netns");
  ASSERT_FALSE(guard.ok());
  EXPECT_EQ(guard.error().source(), "netns");
  EXPECT_EQ(guard.error().error_number, ENOENT);
  EXPECT_EQ(guard.error().message, "open(/nonexistent/adt-netns): No such file or directory");
}

TEST(NetnsGuard, NonNetnsFileIsRejectedBySetns) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to call setns";
  auto guard = NetnsGuard::Enter("/proc/self/ns/uts");  // a namespace, but not a network one
  ASSERT_FALSE(guard.ok());
  EXPECT_EQ(guard.error().error_number, EINVAL);
  EXPECT_NE(guard.error().message.find("setns(/proc/self/ns/uts, CLONE_NEWNET)"),
            std::string::npos);
}

TEST(NetnsGuard, EntersAndRestoresOnlyTheCallingThread) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  const std::string name = "adt-guard-" + std::to_string(::getpid()) + "-0";
  ASSERT_EQ(std::system(("ip netns add " + name).c_str()), 0);
  struct Cleanup {
    std::string name;
    ~Cleanup() { std::system(("ip netns delete " + name + " 2>/dev/null").c_str()); }
  } cleanup{name};
  const ino_t home = ThreadNetnsInode();
  struct stat target {};
  ASSERT_EQ(::stat(("/run/netns/" + name).c_str(), &target), 0);
  std::thread([&] {
    auto guard = NetnsGuard::Enter("/run/netns/" + name);
    ASSERT_TRUE(guard.ok()) << guard.error().message;
    EXPECT_EQ(ThreadNetnsInode(), target.st_ino);
    NetnsGuard moved = std::move(*guard);  // the moved-from guard must not restore twice
    EXPECT_EQ(ThreadNetnsInode(), target.st_ino);
  }).join();
  {
    auto guard = NetnsGuard::Enter("/run/netns/" + name);
    ASSERT_TRUE(guard.ok());
    EXPECT_EQ(ThreadNetnsInode(), target.st_ino);
  }
  EXPECT_EQ(ThreadNetnsInode(), home);
}

}  // namespace
}  // namespace ad
