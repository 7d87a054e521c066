// kubelet-prober: the lab's stand-in for kubelet's TCP probes. Runs in the lab host netns and,
// every --interval-ms, opens one non-blocking TCP connection to each --target IP:PORT, waits up to
// --timeout-ms (kubelet's timeoutSeconds) for it to connect or fail, then closes it. The lab
// host's Istio SNAT rule rewrites these connections to the probe address, like kubelet's.
// Stops on SIGTERM/SIGINT.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

struct Target {
  sockaddr_storage address{};
  socklen_t length = 0;
  std::string text;
};

bool ParseTarget(const std::string& text, Target& target) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = text.substr(0, colon);
  const int port = std::atoi(text.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return false;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  target.text = text;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&target.address);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    target.length = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&target.address);
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    target.length = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

// One probe: true when it connected or was refused (both answers), false on timeout.
bool Probe(const Target& target, int timeout_ms) {
  const int fd = ::socket(target.address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool answered = false;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&target.address), target.length) == 0) {
    answered = true;
  } else if (errno == EINPROGRESS) {
    pollfd waiting{fd, POLLOUT, 0};
    answered = ::poll(&waiting, 1, timeout_ms) > 0;
  } else {
    answered = errno == ECONNREFUSED;
  }
  ::close(fd);  // a SYN_SENT socket goes away without a packet: its conntrack entry stays
  return answered;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Target> targets;
  int interval_ms = 2000;
  int timeout_ms = 1000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--target" && has_value) {
      Target target;
      if (!ParseTarget(argv[++i], target)) {
        std::fprintf(stderr, "kubelet-prober: bad target '%s' (IP:PORT)\n", argv[i]);
        return 2;
      }
      targets.push_back(target);
    } else if (arg == "--interval-ms" && has_value) {
      interval_ms = std::max(10, std::atoi(argv[++i]));
    } else if (arg == "--timeout-ms" && has_value) {
      timeout_ms = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: kubelet-prober --target IP:PORT [--target ...] [--interval-ms N] "
                   "[--timeout-ms N]\n");
      return 2;
    }
  }
  if (targets.empty()) {
    std::fprintf(stderr, "kubelet-prober: no --target\n");
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::fprintf(stderr, "kubelet-prober: %zu targets every %d ms (timeout %d ms)\n", targets.size(),
               interval_ms, timeout_ms);
  while (!g_stop) {
    const auto round = std::chrono::steady_clock::now();
    for (const Target& target : targets) {
      if (g_stop) break;
      if (!Probe(target, timeout_ms))
        std::fprintf(stderr, "probe %s: timeout\n", target.text.c_str());
    }
    while (!g_stop &&
           std::chrono::steady_clock::now() - round < std::chrono::milliseconds(interval_ms)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return 0;
}
