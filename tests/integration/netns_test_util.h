// Test helpers for integration tests that build real network namespaces. Tests may shell out to
// ip/iptables (the agent never does).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ad::testing {

inline bool IsRoot() { return ::geteuid() == 0; }

// Runs a shell command; returns its exit status (or -1).
inline int Run(const std::string& command) {
  const int status = std::system((command + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs a shell command and returns its stdout (empty when it could not start).
inline std::string Capture(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

// Feeds `input` to a command's stdin; returns its exit status.
inline int RunWithInput(const std::string& command, const std::string& input) {
  FILE* pipe = ::popen((command + " >/dev/null 2>&1").c_str(), "w");
  if (pipe == nullptr) {
    return -1;
  }
  std::fwrite(input.data(), 1, input.size(), pipe);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline ino_t InodeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

inline ino_t ThreadNetnsInode() { return InodeOf("/proc/thread-self/ns/net"); }

// A named netns "adt-<area>-<pid>-<n>" created with `ip netns add` and deleted on destruction.
class ScopedNetns {
 public:
  explicit ScopedNetns(const std::string& area) {
    static std::atomic<int> counter{0};
    name_ = "adt-" + area + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    ok_ = Run("ip netns add " + name_) == 0;
  }
  ~ScopedNetns() { Delete(); }
  ScopedNetns(const ScopedNetns&) = delete;
  ScopedNetns& operator=(const ScopedNetns&) = delete;

  void Delete() {
    if (ok_) {
      Run("ip netns delete " + name_);
      ok_ = false;
    }
  }
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  std::string path() const { return "/run/netns/" + name_; }
  // Runs a command inside the namespace.
  int Exec(const std::string& command) const {
    return Run("ip netns exec " + name_ + " " + command);
  }
  int ExecWithInput(const std::string& command, const std::string& input) const {
    return RunWithInput("ip netns exec " + name_ + " " + command, input);
  }

 private:
  std::string name_;
  bool ok_ = false;
};

}  // namespace ad::testing
