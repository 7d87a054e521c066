// Change detection cost on a lab node, side by side in one run:
//  1. steady state, nothing changing: one ChangeMonitor poll cycle (epoll + legacy GET_INFO gate +
//     GETGEN gate over every netns) vs a full in-process re-read of all netns (ScanNode) vs the
//     five-command shell-out baseline (bench_support.h), extrapolated to all netns;
//  2. drift latency: from spawning `ip netns exec <pod> iptables-nft -t nat -D ...` to the monitor
//     reporting that pod dirty (coalescing window included), p50/p99.
//
//   watch_bench [--pods 250] [--trials 100] [--cycles 300] [--shell-sample 20] [--no-ipv6]
//               [--backend iptables-nft|legacy|nft]
//
// Needs root: brings up a lab node (prefix "adwatch", default iptables-nft backend; the drift
// trials always delete an iptables-nft rule of their own) and removes it again.
// Measures and prints; never asserts. Targets are printed as information.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "lab/lab.h"
#include "scan/inspector.h"
#include "scan/scanner.h"
#include "sources/watch/change_monitor.h"

extern char** environ;

namespace ad::bench {
namespace {

constexpr char kLabPrefix[] = "adwatch";
// A rule of our own in each trial pod, deleted (the drift) and re-added between trials.
constexpr char kMarkerRule[] = "OUTPUT -p tcp --dport 9 -j RETURN";

volatile std::sig_atomic_t g_interrupted = 0;
void OnTerminationSignal(int /*signal_number*/) { g_interrupted = 1; }
bool Interrupted() { return g_interrupted != 0; }

struct Flags {
  int pods = 250;
  int trials = 100;
  int cycles = 300;
  int shell_sample = 20;
  bool ipv6 = true;
  lab::LabBackend backend = lab::LabBackend::kIptablesNft;
};

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(fraction * values.size()));
  return values[index];
}

pid_t Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  if (pid <= 0 || ::waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double ThreadCpuMilliseconds() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

int RunQuiet(const std::vector<std::string>& argv) { return WaitExit(Spawn(argv)); }

long SelfRssKb() {
  long pages_total = 0;
  long pages_resident = 0;
  FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  if (std::fscanf(statm, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
  std::fclose(statm);
  return pages_resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

int OpenFdCount() {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++count;
  }
  return count;
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (arg == "--pods") flags.pods = next();
    if (arg == "--trials") flags.trials = next();
    if (arg == "--cycles") flags.cycles = next();
    if (arg == "--shell-sample") flags.shell_sample = next();
    if (arg == "--no-ipv6") flags.ipv6 = false;
    if (arg == "--backend" && i + 1 < argc) {
      Result<lab::LabBackend> backend = lab::ParseBackend(argv[++i]);
      if (backend.ok()) flags.backend = *backend;
    }
  }
  return flags;
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  if (::geteuid() != 0) {
    std::fprintf(stderr, "watch_bench: needs root (lab netns)\n");
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal_number, &action, nullptr);
  // About 7 fds per watched netns.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  const auto ip = FindExecutable("ip");
  const auto iptables = FindExecutable("iptables-nft");
  Result<ShellOutTools> shell_tools = FindShellOutTools();
  if (!ip || !iptables || !shell_tools.ok()) {
    std::fprintf(stderr, "watch_bench: ip, iptables-nft and the shell-out tools are needed\n");
    return 2;
  }

  lab::LabOptions options;
  options.prefix = kLabPrefix;
  options.pods = flags.pods;
  options.backend = flags.backend;
  options.ipv6 = flags.ipv6;
  std::printf("lab up: %d pods, %s, %s, load %s\n", flags.pods,
              std::string(lab::LabBackendName(flags.backend)).c_str(),
              flags.ipv6 ? "IPv4+IPv6" : "IPv4", LoadAverage().c_str());
  std::fflush(stdout);
  lab::ScopedLab lab(options);
  if (!lab.ok()) {
    std::fprintf(stderr, "watch_bench: lab up failed: %s\n", lab.error().message.c_str());
    return 1;
  }
  const std::vector<std::string> names = lab::ListLabNetns(kLabPrefix);

  // ---- Watch every lab netns.
  watch::ChangeMonitorConfig config;
  config.legacy_interval = std::chrono::milliseconds(0);  // the cycle below runs the gates
  Result<std::unique_ptr<watch::ChangeMonitor>> created = watch::ChangeMonitor::Create(config);
  if (!created.ok()) {
    std::fprintf(stderr, "watch_bench: %s\n", created.error().message.c_str());
    return 1;
  }
  watch::ChangeMonitor& monitor = **created;
  const long rss_before = SelfRssKb();
  const int fds_before = OpenFdCount();
  std::vector<std::pair<std::string, uint64_t>> pods;  // name, inode
  const Clock::time_point watch_start = Clock::now();
  for (const std::string& name : names) {
    const std::string path = "/run/netns/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;
    if (Status watched = monitor.Watch(NetnsRecord{.inode = st.st_ino, .paths = {path}});
        !watched.ok()) {
      std::fprintf(stderr, "watch %s: %s\n", name.c_str(), watched.error().message.c_str());
      continue;
    }
    if (name.find("-pod-") != std::string::npos) pods.emplace_back(name, st.st_ino);
  }
  const double watch_ms = MillisecondsBetween(watch_start, Clock::now());
  const size_t watched = monitor.watched();
  std::printf(
      "watched %zu netns in %.1f ms (%.1f us each); +%d fds (%.1f per netns), RSS +%ld KiB\n",
      watched, watch_ms, watch_ms * 1000 / std::max<size_t>(1, watched), OpenFdCount() - fds_before,
      static_cast<double>(OpenFdCount() - fds_before) / std::max<size_t>(1, watched),
      SelfRssKb() - rss_before);
  std::map<std::string, size_t> dirty_reasons;  // while idle: what and when
  auto note = [&](const char* phase, const std::vector<watch::DirtyNetns>& dirty) {
    for (const watch::DirtyNetns& d : dirty) {
      ++dirty_reasons[std::string(phase) + ":" + watch::DescribeReasons(d.reasons)];
    }
    return dirty.size();
  };
  // Settle: the lab's last commits and address/route churn may still be arriving.
  size_t settled = 0;
  for (int quiet = 0; quiet < 5;) {
    const size_t n = note("settle", monitor.Poll(std::chrono::milliseconds(100)));
    settled += n;
    quiet = n == 0 ? quiet + 1 : 0;
  }
  std::printf("settle: %zu dirty reports before the steady state\n", settled);

  // ---- Steady state: one poll cycle.
  std::vector<double> cycle_ms;
  std::vector<double> cycle_cpu_ms;  // this thread's CPU time: robust against a loaded machine
  std::vector<double> hash_cycle_ms;
  size_t dirty_seen = 0;
  for (int i = 0; i < flags.cycles && !Interrupted(); ++i) {
    const double cpu_start = ThreadCpuMilliseconds();
    const Clock::time_point start = Clock::now();
    dirty_seen += note("cycle", monitor.Poll(std::chrono::milliseconds(0)));
    monitor.PollLegacy(watch::LegacyDepth::kGate);
    monitor.PollGenerations();
    cycle_ms.push_back(MillisecondsBetween(start, Clock::now()));
    cycle_cpu_ms.push_back(ThreadCpuMilliseconds() - cpu_start);
  }
  // The same cycle with the legacy gate spread over 4 cycles (ChangeMonitorConfig::legacy_spread).
  std::vector<double> spread_cpu_ms;
  for (int i = 0; i < flags.cycles && !Interrupted(); ++i) {
    const double cpu_start = ThreadCpuMilliseconds();
    dirty_seen += note("cycle", monitor.Poll(std::chrono::milliseconds(0)));
    monitor.PollLegacy(watch::LegacyDepth::kGate, (monitor.watched() + 3) / 4);
    monitor.PollGenerations();
    spread_cpu_ms.push_back(ThreadCpuMilliseconds() - cpu_start);
  }
  for (int i = 0; i < std::max(1, flags.cycles / 10) && !Interrupted(); ++i) {
    const Clock::time_point start = Clock::now();
    monitor.PollLegacy(watch::LegacyDepth::kContentHash);
    hash_cycle_ms.push_back(MillisecondsBetween(start, Clock::now()));
  }
  dirty_seen += note("after-cycles", monitor.Poll(std::chrono::milliseconds(20)));

  // ---- Full in-process re-read of every lab netns.
  std::unique_ptr<NetnsInspector> inspector =
      MakeKernelInspector(ReadLimits{}, {.ipsets_in_host_only = true});
  ScanOptions scan;
  scan.discovery.proc_root.clear();
  scan.discovery.netns_dirs = {"/run/netns"};
  scan.discovery.name_glob = std::string(kLabPrefix) + "-*";
  scan.discovery.host_netns_path = std::string("/run/netns/") + kLabPrefix + "-host";
  scan.workers = 2;
  scan.node_name = kLabPrefix;
  std::vector<double> scan_ms;
  size_t scanned = 0;
  for (int i = 0; i < 5 && !Interrupted(); ++i) {
    const Clock::time_point start = Clock::now();
    scanned = ScanNode(scan, *inspector).netns.size();
    scan_ms.push_back(MillisecondsBetween(start, Clock::now()));
  }
  dirty_seen += note("after-rescan", monitor.Poll(std::chrono::milliseconds(20)));

  // ---- Shell-out baseline on a fixed sample, extrapolated.
  ShellOutResult shell = MeasureShellOut(names, *shell_tools, flags.shell_sample, Interrupted);

  const double cycle_p50 = Percentile(cycle_ms, 0.5);
  std::printf("\n== steady state, %zu netns, nothing changing (load %s)\n", watched,
              LoadAverage().c_str());
  std::printf(
      "poll cycle (epoll + legacy GET_INFO gate + GETGEN gate): p50 %.3f ms, p90 %.3f ms, "
      "p99 %.3f ms over %zu cycles (%.2f us/netns)  [target <= 3 ms]\n",
      cycle_p50, Percentile(cycle_ms, 0.9), Percentile(cycle_ms, 0.99), cycle_ms.size(),
      cycle_p50 * 1000 / std::max<size_t>(1, watched));
  std::printf("poll cycle CPU time (this thread): p50 %.3f ms, p90 %.3f ms, p99 %.3f ms\n",
              Percentile(cycle_cpu_ms, 0.5), Percentile(cycle_cpu_ms, 0.9),
              Percentile(cycle_cpu_ms, 0.99));
  std::printf("poll cycle, legacy gate spread over 4 cycles, CPU time: p50 %.3f ms, p99 %.3f ms\n",
              Percentile(spread_cpu_ms, 0.5), Percentile(spread_cpu_ms, 0.99));
  std::printf("legacy content-hash pass (GET_INFO + GET_ENTRIES hash): p50 %.3f ms over %zu\n",
              Percentile(hash_cycle_ms, 0.5), hash_cycle_ms.size());
  std::printf("full re-read (ScanNode, 2 workers, %zu netns): median %.1f ms (%.1fx the cycle)\n",
              scanned, Median(scan_ms), Median(scan_ms) / std::max(1e-9, cycle_p50));
  const double shell_cycle_ms = shell.mean_netns_ms * static_cast<double>(names.size());
  std::printf(
      "shell-out baseline (5 tools per netns, %d of %d sampled): %.1f ms/netns -> %.0f ms "
      "per pass (%.0fx the cycle)\n",
      shell.netns_measured, shell.netns_total, shell.mean_netns_ms, shell_cycle_ms,
      shell_cycle_ms / std::max(1e-9, cycle_p50));
  std::printf("dirty reports while idle (expected 0): %zu\n", dirty_seen);
  for (const auto& [what, count] : dirty_reasons) std::printf("  %s: %zu\n", what.c_str(), count);

  // ---- Drift latency.
  std::vector<double> latency_ms;
  int missed = 0;
  const std::string marker = kMarkerRule;
  auto iptables_argv = [&](const std::string& pod, const char* op) {
    std::vector<std::string> argv = {*ip, "netns", "exec", pod, *iptables, "-t", "nat", op};
    size_t start = 0;
    while (start < marker.size()) {
      const size_t end = marker.find(' ', start);
      argv.push_back(marker.substr(start, end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return argv;
  };
  for (int trial = 0; trial < flags.trials && !pods.empty() && !Interrupted(); ++trial) {
    const auto& [pod, inode] = pods[static_cast<size_t>(trial) * 7 % pods.size()];
    RunQuiet(iptables_argv(pod, "-A"));
    // Drain the re-add (and anything else) before the measured change.
    while (!monitor.Poll(std::chrono::milliseconds(30)).empty()) {
    }
    const Clock::time_point start = Clock::now();
    const pid_t child = Spawn(iptables_argv(pod, "-D"));
    bool seen = false;
    while (!seen && MillisecondsBetween(start, Clock::now()) < 2000) {
      for (const watch::DirtyNetns& dirty : monitor.Poll(std::chrono::milliseconds(500))) {
        if (dirty.inode == inode &&
            watch::HasReason(dirty.reasons, watch::DirtyReason::kNftCommit)) {
          seen = true;
        }
      }
    }
    const double elapsed = MillisecondsBetween(start, Clock::now());
    WaitExit(child);
    if (seen) {
      latency_ms.push_back(elapsed);
    } else {
      ++missed;
    }
  }
  std::printf(
      "\n== drift latency: spawn `ip netns exec POD iptables-nft -t nat -D ...` -> dirty "
      "report (coalescing window %lld ms included)\n",
      static_cast<long long>(config.coalesce_window.count()));
  std::printf(
      "p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms over %zu trials, %d missed  "
      "[target p99 <= 100 ms]\n",
      Percentile(latency_ms, 0.5), Percentile(latency_ms, 0.9), Percentile(latency_ms, 0.99),
      Percentile(latency_ms, 1.0), latency_ms.size(), missed);
  const watch::ChangeMonitorCounters& counters = monitor.counters();
  std::printf(
      "counters: events %llu, nft commits %llu, overflows %llu, polls %llu, gate errors "
      "%llu, watch errors %llu\n",
      static_cast<unsigned long long>(counters.events),
      static_cast<unsigned long long>(counters.nft_commits),
      static_cast<unsigned long long>(counters.overflows),
      static_cast<unsigned long long>(counters.polls),
      static_cast<unsigned long long>(counters.gate_errors),
      static_cast<unsigned long long>(counters.watch_errors));
  std::printf("load after: %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) { return ad::bench::Main(argc, argv); }
