// A small fake HTTP server for tests of the ztunnel admin client: listens on a loopback address
// (optionally inside a netns) and answers each path with canned bytes, silence or an immediate
// close. Every wait also watches a stop eventfd, so the destructor always returns promptly.
// Also a watchdog that turns a hung test into a failure after cleaning up.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "sources/netns/netns_guard.h"

namespace ad::testing {

struct FakeReply {
  enum class Kind { kSend, kSendThenHang, kHang, kCloseImmediately };
  Kind kind = Kind::kSend;
  std::string bytes;

  static FakeReply Send(std::string bytes) { return {Kind::kSend, std::move(bytes)}; }
  // Sends a (partial) response, then keeps the connection open and silent.
  static FakeReply SendThenHang(std::string bytes) {
    return {Kind::kSendThenHang, std::move(bytes)};
  }
  static FakeReply Hang() { return {Kind::kHang, {}}; }  // accepts, never answers
  static FakeReply CloseImmediately() { return {Kind::kCloseImmediately, {}}; }
};

inline std::string HttpResponseText(int status, const std::string& body,
                                    const std::string& extra_headers = "") {
  const char* reason = status == 200 ? "OK" : status == 500 ? "Internal Server Error" : "Other";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\ncontent-type: text/plain\r\n" +
         extra_headers + "content-length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

inline std::string ChunkedResponseText(int status, const std::vector<std::string>& chunks) {
  char size[32];
  std::string out =
      "HTTP/1.1 " + std::to_string(status) + " OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& chunk : chunks) {
    std::snprintf(size, sizeof(size), "%zx", chunk.size());
    out += std::string(size) + "\r\n" + chunk + "\r\n";
  }
  return out + "0\r\n\r\n";
}

class FakeHttpServer {
 public:
  // Listens on host:port (0 = any free port) inside netns_path ("" = the current netns).
  FakeHttpServer(const std::string& netns_path, const std::string& host, uint16_t port,
                 std::map<std::string, FakeReply> routes)
      : routes_(std::move(routes)), stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    const bool ipv6 = host.find(':') != std::string::npos;
    {
      std::optional<Result<NetnsGuard>> guard;
      if (!netns_path.empty()) {
        guard.emplace(NetnsGuard::Enter(netns_path));
        if (!guard->ok()) {
          error_ = guard->error().message;
          return;
        }
      }
      listener_.Reset(::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    }
    const int one = 1;
    ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage address{};
    socklen_t length = 0;
    if (ipv6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(port);
      ::inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr);
      length = sizeof(*in6);
    } else {
      auto* in4 = reinterpret_cast<sockaddr_in*>(&address);
      in4->sin_family = AF_INET;
      in4->sin_port = htons(port);
      ::inet_pton(AF_INET, host.c_str(), &in4->sin_addr);
      length = sizeof(*in4);
    }
    if (!listener_.valid() ||
        ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(listener_.get(), 16) != 0 ||
        ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      error_ = std::string("listen on ") + host + ":" + std::to_string(port) + ": " +
               std::strerror(errno);
      return;
    }
    port_ = ntohs(ipv6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                       : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~FakeHttpServer() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop_.get(), &one, sizeof(one));
    if (accept_thread_.joinable()) accept_thread_.join();
    std::lock_guard lock(mutex_);
    for (std::thread& worker : workers_) worker.join();
  }
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  // Waits for `events` on fd or the stop signal; false when stopping or on timeout.
  bool Wait(int fd, short events, int timeout_ms = -1) {
    pollfd fds[2] = {{fd, events, 0}, {stop_.get(), POLLIN, 0}};
    for (;;) {
      const int rc = ::poll(fds, 2, timeout_ms);
      if (rc < 0 && errno == EINTR) continue;
      return rc > 0 && fds[1].revents == 0;
    }
  }

  void AcceptLoop() {
    while (Wait(listener_.get(), POLLIN)) {
      UniqueFd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!connection.valid()) continue;
      ++accepted_;
      std::lock_guard lock(mutex_);
      workers_.emplace_back([this, fd = connection.Release()] { Serve(UniqueFd(fd)); });
    }
  }

  void Serve(UniqueFd connection) {
    const int fd = connection.get();
    std::string request;
    char buffer[4096];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
      if (!Wait(fd, POLLIN, 5000)) return;
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return;
      request.append(buffer, static_cast<size_t>(n));
    }
    const size_t path_start = request.find(' ') + 1;
    const std::string path = request.substr(path_start, request.find(' ', path_start) - path_start);
    auto route = routes_.find(path);
    const FakeReply reply = route != routes_.end()
                                ? route->second
                                : FakeReply::Send(HttpResponseText(404, "not found\n"));
    if (reply.kind == FakeReply::Kind::kCloseImmediately) return;
    for (size_t sent = 0; sent < reply.bytes.size();) {
      if (!Wait(fd, POLLOUT, 5000)) return;
      const ssize_t n =
          ::send(fd, reply.bytes.data() + sent, reply.bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the client gave up (e.g. response too large)
      sent += static_cast<size_t>(n);
    }
    if (reply.kind == FakeReply::Kind::kSend) return;
    // Silent peer: stay open until the client closes or the server stops.
    while (Wait(fd, POLLIN)) {
      if (::recv(fd, buffer, sizeof(buffer), 0) <= 0) return;
    }
  }

  std::map<std::string, FakeReply> routes_;
  UniqueFd stop_;
  UniqueFd listener_;
  uint16_t port_ = 0;
  std::string error_;
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::thread accept_thread_;
  std::vector<std::thread> workers_;
};

// Fails a hung test instead of letting it hang: after `limit`, runs `cleanup` (delete netns) and
// aborts with a message. Destroy it (end of scope) to disarm.
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, std::function<void()> cleanup)
      : thread_([this, limit, cleanup = std::move(cleanup)] {
          std::unique_lock lock(mutex_);
          if (cv_.wait_for(lock, limit, [this] { return disarmed_; })) return;
          std::fprintf(stderr, "watchdog: test still running after %llds; aborting\n",
                       static_cast<long long>(limit.count()));
          if (cleanup) cleanup();
          std::abort();
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      disarmed_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace ad::testing
