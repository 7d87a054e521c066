// ztunnel-sim: stands in for ztunnel on the lab node. Runs in its own netns (the lab's
// <prefix>-ztunnel, or --netns), where its admin, stats and readiness ports live.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <charconv>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "ztunnel_sim/ztunnel_sim.h"

namespace {

constexpr char kUsage[] = R"(usage: ztunnel-sim --zds PATH [options]

  --zds PATH          ZDS socket of the node agent (SOCK_SEQPACKET client; reconnects with backoff)
  --node NAME         node name in /config_dump workloads (default $NODE_NAME, else the hostname)
  --netns PATH        enter this netns first (admin/stats/readiness ports live there)
  --ipv6              in-pod listeners 15001/15006/15008 on [::] (dual stack); DNS 15053 binds
                      ::1 (besides 127.0.0.1) in every pod netns with IPv6 enabled, with or
                      without this flag, like ztunnel
  --fault KIND        no-listeners | nack | crash | no-dns-listener (15001/15006/15008 only)
  --fault-uid UID     limit no-listeners / nack / no-dns-listener to this pod UID (repeatable)
  --retry-ms N        retry interval for pending pods (default 5000)
  --no-admin          do not serve 127.0.0.1:15000, :15020, :15021
  --cert-unavailable-uid UID  the certificate of this pod's identity is Unavailable (repeatable)
  --nofile N          lower the soft RLIMIT_NOFILE to N at start
  --fd-pressure PCT   keep open fds at PCT % of the soft RLIMIT_NOFILE (holds /dev/null fds,
                      re-balanced 5 times a second as proxies come and go)
  --quiet             no log lines on stderr

SIGUSR1 closes the DNS proxy's 15053 sockets of every running proxy (the listener-loss case).
)";

int Fail(const std::string& message) {
  std::cerr << "ztunnel-sim: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  ad::sim::ZtunnelSimOptions options;
  std::string netns_path;
  bool admin = true;
  long nofile = 0;
  long fd_pressure = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    auto value = [&](std::string_view& out) {
      if (i + 1 >= args.size()) return false;
      out = args[++i];
      return true;
    };
    std::string_view text;
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--quiet") {
      options.log_to_stderr = false;
    } else if (arg == "--ipv6") {
      options.ipv6 = true;
    } else if (arg == "--no-admin") {
      admin = false;
    } else if (arg == "--zds" && value(text)) {
      options.zds_socket_path = text;
    } else if (arg == "--node" && value(text)) {
      options.node_name = text;
    } else if (arg == "--netns" && value(text)) {
      netns_path = text;
    } else if (arg == "--cert-unavailable-uid" && value(text)) {
      options.cert_unavailable_uids.emplace(text);
    } else if ((arg == "--nofile" || arg == "--fd-pressure") && value(text)) {
      long n = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      const long max = arg == "--nofile" ? 1 << 20 : 99;
      if (ec != std::errc() || end != text.data() + text.size() || n <= 0 || n > max) {
        return Fail(std::string(arg) + " wants a number from 1 to " + std::to_string(max));
      }
      (arg == "--nofile" ? nofile : fd_pressure) = n;
    } else if (arg == "--fault-uid" && value(text)) {
      options.fault_uids.emplace(text);
    } else if (arg == "--retry-ms" && value(text)) {
      long ms = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
      if (ec != std::errc() || end != text.data() + text.size() || ms <= 0) {
        return Fail("--retry-ms wants a positive number");
      }
      options.retry_interval = std::chrono::milliseconds(ms);
    } else if (arg == "--fault" && value(text)) {
      ad::Result<ad::sim::ZtunnelFault> fault = ad::sim::ParseZtunnelFault(text);
      if (!fault.ok()) return Fail(fault.error().message);
      options.fault = *fault;
    } else {
      return Fail("bad or incomplete option '" + std::string(arg) + "' (see --help)");
    }
  }
  if (options.zds_socket_path.empty()) return Fail("--zds is required (see --help)");
  if (!netns_path.empty()) {
    // Still single-threaded: every thread started later inherits this netns.
    ad::UniqueFd netns(::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns.valid() || ::setns(netns.get(), CLONE_NEWNET) != 0) {
      return Fail("cannot enter netns " + netns_path);
    }
  }

  if (nofile > 0) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = static_cast<rlim_t>(nofile);
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return Fail("setrlimit(RLIMIT_NOFILE) failed");
  }
  // Held like the sockets of a ztunnel near its fd limit; topped up or released to the target.
  std::vector<ad::UniqueFd> held;
  auto rebalance = [&] {
    if (fd_pressure <= 0) return;
    rlimit limit{};
    struct stat fd_dir {};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || ::stat("/proc/self/fd", &fd_dir) != 0) return;
    const long target = static_cast<long>(limit.rlim_cur) * fd_pressure / 100;
    long open_fds = static_cast<long>(fd_dir.st_size);
    while (open_fds > target && !held.empty()) {
      held.pop_back();
      --open_fds;
    }
    while (open_fds < target) {
      ad::UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) break;
      held.push_back(std::move(fd));
      ++open_fds;
    }
  };

  sigset_t signals;
  sigemptyset(&signals);
  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  ad::Result<std::unique_ptr<ad::sim::ZtunnelSim>> sim = ad::sim::ZtunnelSim::Start(options);
  if (!sim.ok()) return Fail(sim.error().message);
  std::unique_ptr<ad::sim::AdminServer> admin_server;
  if (admin) {
    ad::Result<std::unique_ptr<ad::sim::AdminServer>> started = ad::sim::AdminServer::Start(**sim);
    if (!started.ok()) return Fail(started.error().message);
    admin_server = std::move(started).value();
  }
  for (;;) {
    rebalance();
    const timespec tick{0, 200'000'000};
    const int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal <= 0) continue;
    if (signal == SIGUSR1) {
      (*sim)->DropDnsListeners();  // a ztunnel that loses its in-pod DNS listener
      continue;
    }
    if (signal != SIGHUP) break;
  }
  if (admin_server) admin_server->Stop();
  (*sim)->Stop();
  return 0;
}
