// Forked helper processes for socket tests: each child runs a body with a two-way byte channel to
// the test, dies with the test (PR_SET_PDEATHSIG) and is killed and reaped on destruction, so no
// test leaves a process behind even when an assertion fails midway.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace ad::testing {

// The child's end: Signal() reports to the test, Wait() blocks for the next command (nullopt
// when the test is gone).
class ChildChannel {
 public:
  ChildChannel(int to_parent, int from_parent) : to_parent_(to_parent), from_parent_(from_parent) {}
  void Signal(char byte) const { (void)!::write(to_parent_, &byte, 1); }
  std::optional<char> Wait() const {
    char byte = 0;
    return ::read(from_parent_, &byte, 1) == 1 ? std::optional(byte) : std::nullopt;
  }
  // Serves until the test closes the channel.
  void Linger() const {
    while (Wait()) {
    }
  }

 private:
  int to_parent_;
  int from_parent_;
};

class ChildProcess {
 public:
  explicit ChildProcess(const std::function<void(const ChildChannel&)>& body) {
    int to_parent[2];
    int from_parent[2];
    if (::pipe2(to_parent, O_CLOEXEC) != 0) return;
    if (::pipe2(from_parent, O_CLOEXEC) != 0) {
      ::close(to_parent[0]);
      ::close(to_parent[1]);
      return;
    }
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::close(to_parent[0]);
      ::close(from_parent[1]);
      body(ChildChannel(to_parent[1], from_parent[0]));
      ::_exit(0);
    }
    ::close(to_parent[1]);
    ::close(from_parent[0]);
    from_child_ = to_parent[0];
    to_child_ = from_parent[1];
    if (pid_ < 0) Close();
  }
  ~ChildProcess() { Stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  int pid() const { return pid_; }
  // Next byte from the child, or nullopt after `timeout_ms` / when the child died.
  std::optional<char> Read(int timeout_ms = 5000) const {
    pollfd poll_fd{.fd = from_child_, .events = POLLIN, .revents = 0};
    if (from_child_ < 0 || ::poll(&poll_fd, 1, timeout_ms) != 1) return std::nullopt;
    char byte = 0;
    return ::read(from_child_, &byte, 1) == 1 ? std::optional(byte) : std::nullopt;
  }
  bool Send(char byte) const { return ::write(to_child_, &byte, 1) == 1; }
  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    Close();
  }

 private:
  void Close() {
    if (from_child_ >= 0) ::close(from_child_);
    if (to_child_ >= 0) ::close(to_child_);
    from_child_ = to_child_ = -1;
  }
  pid_t pid_ = -1;
  int from_child_ = -1;
  int to_child_ = -1;
};

// A temporary directory removed with everything in it.
class ScopedTempDir {
 public:
  // Short names under /tmp: unix socket paths inside must stay below 108 bytes.
  explicit ScopedTempDir(const std::string& tag = "adt-tmp") {
    std::string pattern = "/tmp/" + tag + "-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Child-side helpers (no gtest inside forked children: failures end the child, the test times
// out waiting for its signal).
inline bool EnterNetns(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

inline sockaddr_un UnixAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  return address;
}

// Sends `payload` with one fd in SCM_RIGHTS (as istio-cni sends AddWorkload + netns fd).
inline bool SendWithFd(int socket, const void* payload, size_t size, int fd) {
  iovec iov{.iov_base = const_cast<void*>(payload), .iov_len = size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  return ::sendmsg(socket, &message, 0) == static_cast<ssize_t>(size);
}

// Receives one record and the fd it carries; -1 when none.
inline int ReceiveFd(int socket) {
  char payload[1024];
  iovec iov{.iov_base = payload, .iov_len = sizeof(payload)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  if (::recvmsg(socket, &message, MSG_CMSG_CLOEXEC) < 0) return -1;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header), sizeof(int));
      return fd;
    }
  }
  return -1;
}

}  // namespace ad::testing
