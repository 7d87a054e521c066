// `serve` on a node denser than its inherited soft RLIMIT_NOFILE allows: containerd 2.x starts
// containers with a soft limit of 1024 (hard 524288) and the daemon holds about 7 fds per pod, so
// it must raise its own soft limit or its sources fail with EMFILE from ~140 pods on. Here the
// same at small scale: a soft limit of 128 and a 40-pod lab.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process_util.h"
#include "lab/lab.h"
#include "scoped_child.h"

namespace ad {
namespace {

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Lowers this process's soft open-file limit (children inherit it) for the scope.
class ScopedSoftFdLimit {
 public:
  explicit ScopedSoftFdLimit(rlim_t soft) {
    ok_ = ::getrlimit(RLIMIT_NOFILE, &saved_) == 0;
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    ok_ = ok_ && ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
  }
  ~ScopedSoftFdLimit() {
    if (ok_) ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  ScopedSoftFdLimit(const ScopedSoftFdLimit&) = delete;
  ScopedSoftFdLimit& operator=(const ScopedSoftFdLimit&) = delete;
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

// The "Max open files" soft value of /proc/<pid>/limits, or -1.
long SoftOpenFiles(pid_t pid) {
  const std::string text = ReadAll("/proc/" + std::to_string(pid) + "/limits");
  std::smatch match;
  if (!std::regex_search(text, match, std::regex("Max open files\\s+([0-9]+)"))) return -1;
  return std::stol(match[1].str());
}

size_t OpenFds(pid_t pid) {
  std::error_code error;
  size_t count = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++count;
  }
  return count;
}

TEST(ServeFdLimit, RaisesTheInheritedSoftLimitOnADenseNode) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  constexpr rlim_t kSoft = 128;
  rlimit current{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &current), 0);
  if (current.rlim_max < 4 * kSoft) GTEST_SKIP() << "hard RLIMIT_NOFILE too low to raise";
  lab::LabOptions options;
  options.prefix = "adfl" + std::to_string(::getpid() % 100000);
  options.pods = 40;
  options.zds = true;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;

  testing::ScopedTempDir dir("adt-fd-limit");
  const std::string log = dir.path() + "/serve.log";
  std::optional<testing::ScopedChild> serve;
  {
    ScopedSoftFdLimit low(kSoft);
    ASSERT_TRUE(low.ok());
    serve.emplace(
        std::vector<std::string>{kDoctor, "serve", "--lab-prefix", options.prefix, "--interval",
                                 "200ms", "--metrics-address", "127.0.0.1:0", "--api-socket",
                                 dir.path() + "/api/api.sock"},
        "", log, /*with_stderr=*/true);
  }
  // Started ("metrics on 127.0.0.1:PORT"), then a few 200 ms scans: every watched netns is open
  // by then, and the ZDS and ztunnel sources have opened theirs.
  std::string text;
  for (int i = 0; i < 1000 && text.find("metrics on") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    text = ReadAll(log);
  }
  ASSERT_NE(text.find("metrics on"), std::string::npos) << text;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const long soft = SoftOpenFiles(serve->pid());
  const size_t fds = OpenFds(serve->pid());
  text = ReadAll(log);
  EXPECT_GT(soft, static_cast<long>(kSoft)) << "the soft limit was not raised";
  EXPECT_GT(fds, kSoft) << "the lab is too small to need it (" << fds << " fds)";
  EXPECT_EQ(text.find("Too many open files"), std::string::npos) << text;
}

}  // namespace
}  // namespace ad
