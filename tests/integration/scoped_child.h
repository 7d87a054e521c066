// A child process for integration tests: started with fork/exec (optionally inside a netns and
// with its output in a file), killed and reaped when the scope ends, also when the test fails.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "child_process_util.h"

namespace ad::testing {

// A child process killed and reaped when the scope ends (also when the test fails).
class ScopedChild {
 public:
  // Runs argv inside `netns_path` (when given) with stdout to `stdout_path` (when given), and
  // stderr there too when `with_stderr`.
  ScopedChild(const std::vector<std::string>& argv, const std::string& netns_path = "",
              const std::string& stdout_path = "", bool with_stderr = false) {
    pid_ = ::fork();
    if (pid_ != 0) return;
    if (!netns_path.empty() && !EnterNetns(netns_path)) ::_exit(126);
    if (!stdout_path.empty()) {
      const int fd = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) ::_exit(126);
      if (with_stderr && ::dup2(fd, STDERR_FILENO) < 0) ::_exit(126);
    }
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ~ScopedChild() { Kill(); }
  ScopedChild(const ScopedChild&) = delete;
  ScopedChild& operator=(const ScopedChild&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal) const {
    if (pid_ > 0) ::kill(pid_, signal);
  }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Waits up to `timeout` for the child to exit; its exit code, or -1.
  int Wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace ad::testing
