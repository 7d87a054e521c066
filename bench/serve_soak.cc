// Soak of the node daemon: `ambient-doctor serve` (the real binary, default flags)
// on a ZDS lab whose pods are churned continuously through cni-sim (one add and one delete per
// churn period: 2 changes/s by default), sampled every --sample-seconds: RSS, open fds, threads,
// the nsfs fds the daemon holds and, for each of its sockets, the netns it lives in (from outside
// the daemon: pidfd_getfd() of each socket fd, then ioctl(SIOCGSKNS)). A netns inode the daemon
// holds that is neither one of the lab's present netns nor the host's, and still held 2 s later,
// is a leak (a deleted netns kept alive).
//
//   serve_soak [--minutes 30] [--pods 250] [--sample-seconds 30] [--churn-ms 1000] [--extra 10]
//
// Needs root. Measures and prints; never asserts.
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "bench/serve_support.h"
#include "lab/lab.h"

namespace ad::bench {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void OnTerminationSignal(int /*signal_number*/) { g_interrupted = 1; }
bool Interrupted() { return g_interrupted != 0; }

struct Flags {
  double minutes = 30;
  int pods = 250;
  int sample_seconds = 30;
  int churn_ms = 1000;  // one add + one delete per period
  int extra = 10;       // churned pods alive at a time
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atof(argv[++i]) : 0.0; };
    if (arg == "--minutes") flags.minutes = next();
    if (arg == "--pods") flags.pods = static_cast<int>(next());
    if (arg == "--sample-seconds") flags.sample_seconds = static_cast<int>(next());
    if (arg == "--churn-ms") flags.churn_ms = static_cast<int>(next());
    if (arg == "--extra") flags.extra = static_cast<int>(next());
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: serve_soak [--minutes 30] [--pods 250] [--sample-seconds 30] [--churn-ms 1000] "
          "[--extra 10]\n");
      std::exit(0);
    }
  }
  return flags;
}

// What the daemon holds: netns fds by inode and sockets by the netns they live in.
struct Holdings {
  int nsfs_fds = 0;
  int sockets = 0;
  int socket_errors = 0;              // fds that vanished or refused SIOCGSKNS meanwhile
  std::map<uint64_t, int> netns_fds;  // inode -> fds
  std::map<uint64_t, int> socket_netns;
};

Holdings ReadHoldings(pid_t pid, int pidfd, dev_t nsfs_dev) {
  Holdings held;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator(dir, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    struct stat st {};
    // stat follows the magic link to the open file itself (a bind-mounted netns reads back as
    // its path, so the link text is no identity).
    if (::stat(it->path().c_str(), &st) != 0) continue;
    if (st.st_dev == nsfs_dev) {
      ++held.nsfs_fds;
      ++held.netns_fds[st.st_ino];
      continue;
    }
    if (!S_ISSOCK(st.st_mode)) continue;
    ++held.sockets;
    const int target = std::atoi(it->path().filename().c_str());
    UniqueFd copy(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, target, 0)));
    if (copy.get() < 0) {
      ++held.socket_errors;
      continue;
    }
    UniqueFd netns(::ioctl(copy.get(), SIOCGSKNS));
    struct stat ns {};
    if (netns.get() < 0 || ::fstat(netns.get(), &ns) != 0) {
      ++held.socket_errors;
      continue;
    }
    ++held.socket_netns[ns.st_ino];
  }
  return held;
}

// The netns that may be held: the lab's present ones and the host's (the daemon's own netns,
// which is also pid 1's on a real node; in a container they may differ).
std::set<uint64_t> AllowedNetns(const std::string& prefix, pid_t daemon) {
  std::set<uint64_t> allowed;
  struct stat st {};
  if (::stat("/proc/1/ns/net", &st) == 0) allowed.insert(st.st_ino);
  const std::string own = "/proc/" + std::to_string(daemon) + "/ns/net";
  if (::stat(own.c_str(), &st) == 0) allowed.insert(st.st_ino);
  for (const std::string& name : lab::ListLabNetns(prefix)) {
    if (::stat(("/run/netns/" + name).c_str(), &st) == 0) allowed.insert(st.st_ino);
  }
  return allowed;
}

std::set<uint64_t> Foreign(const Holdings& held, const std::set<uint64_t>& allowed) {
  std::set<uint64_t> foreign;
  for (const auto& [inode, count] : held.netns_fds) {
    if (!allowed.count(inode)) foreign.insert(inode);
  }
  for (const auto& [inode, count] : held.socket_netns) {
    if (!allowed.count(inode)) foreign.insert(inode);
  }
  return foreign;
}

// Least-squares slope of y over x.
double Slope(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() < 2) return 0;
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double denominator = n * sxx - sx * sx;
  return denominator == 0 ? 0 : (n * sxy - sx * sy) / denominator;
}

struct ChurnCounters {
  std::atomic<int> adds{0};
  std::atomic<int> deletes{0};
  std::atomic<int> failures{0};
  std::mutex mutex;
  std::string first_failure;
};

// One add and one delete (of the oldest churned pod, once `extra` are alive) per period.
void Churn(const std::string& prefix, const Flags& flags, int first_index,
           const std::atomic<bool>& stop, ChurnCounters& counters) {
  std::deque<int> alive;
  int next = 0;
  auto fail = [&](const std::string& message) {
    std::lock_guard lock(counters.mutex);
    if (counters.failures++ == 0) counters.first_failure = message;
  };
  auto period_start = Clock::now();
  while (!stop && !Interrupted()) {
    const int index = first_index + next;
    next = (next + 1) % 5000;
    Result<lab::LabPod> added = lab::EnrollPod(prefix, {.index = index});
    if (added.ok()) {
      ++counters.adds;
      alive.push_back(index);
    } else {
      fail(added.error().message);
    }
    if (static_cast<int>(alive.size()) > flags.extra) {
      const int oldest = alive.front();
      alive.pop_front();
      if (auto removed = lab::UnenrollPod(prefix, oldest); removed.ok()) {
        ++counters.deletes;
      } else {
        fail(removed.error().message);
      }
    }
    period_start += std::chrono::milliseconds(flags.churn_ms);
    while (!stop && !Interrupted() && Clock::now() < period_start) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (Clock::now() > period_start + std::chrono::seconds(5)) period_start = Clock::now();
  }
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  if (::geteuid() != 0) {
    std::fprintf(stderr, "serve_soak: needs root (lab netns)\n");
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal_number, &action, nullptr);
  RaiseFileLimit();
  struct stat own {};
  if (::stat("/proc/self/ns/net", &own) != 0) return 1;
  const dev_t nsfs_dev = own.st_dev;

  const std::string prefix = "adsoak" + std::to_string(::getpid() % 10000);
  std::printf("serve_soak: lab %s up: %d pods, ZDS emulators, load %s\n", prefix.c_str(),
              flags.pods, LoadAverage().c_str());
  std::fflush(stdout);
  lab::ScopedLab lab({.prefix = prefix, .pods = flags.pods, .zds = true});
  if (!lab.ok()) {
    std::fprintf(stderr, "serve_soak: lab up failed: %s\n", lab.error().message.c_str());
    return 1;
  }
  const std::string run_dir = lab::LabRunDir(prefix);
  ServeProcess serve({.lab_prefix = prefix,
                      .api_socket = run_dir + "/api.sock",
                      .metrics_port = 30000 + ::getpid() % 20000,
                      .log_path = run_dir + "/serve.log"});
  if (!serve.running() || !serve.WaitReady(std::chrono::seconds(60))) {
    std::fprintf(stderr, "serve_soak: %s\n", serve.error().c_str());
    return 1;
  }
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, serve.pid(), 0)));
  if (pidfd.get() < 0) {
    std::fprintf(stderr, "serve_soak: pidfd_open: %s\n", std::strerror(errno));
    return 1;
  }
  std::printf(
      "serve pid %d (log %s/serve.log); churn: 1 add + 1 delete every %d ms, %d churned pods "
      "alive; sample every %d s for %.1f min\n",
      serve.pid(), run_dir.c_str(), flags.churn_ms, flags.extra, flags.sample_seconds,
      flags.minutes);
  std::printf("%8s %9s %6s %7s %6s %8s %9s %7s %6s %6s\n", "t_s", "rss_kib", "fds", "threads",
              "nsfs", "sockets", "sock_ns", "lab_ns", "mcore", "leaks");
  std::fflush(stdout);

  std::atomic<bool> stop{false};
  ChurnCounters counters;
  std::thread churner([&] { Churn(prefix, flags, flags.pods + 100, stop, counters); });

  const Clock::time_point start = Clock::now();
  const auto end = start + std::chrono::milliseconds(static_cast<long>(flags.minutes * 60000));
  std::vector<double> t_min, rss, fds;
  long max_rss = 0;
  int max_fds = 0, max_threads = 0;
  int leaks = 0;
  std::set<uint64_t> leaked_inodes;
  ProcSample previous = ReadProcSample(serve.pid());
  Clock::time_point previous_at = Clock::now();
  const ProcSample first_cpu = previous;
  auto next_sample = start;
  while (!Interrupted()) {
    const Holdings held = ReadHoldings(serve.pid(), pidfd.get(), nsfs_dev);
    const ProcSample sample = ReadProcSample(serve.pid());
    const Clock::time_point now = Clock::now();
    const std::set<uint64_t> allowed = AllowedNetns(prefix, serve.pid());
    std::set<uint64_t> foreign = Foreign(held, allowed);
    int sample_leaks = 0;
    if (!foreign.empty()) {
      // A pod deleted a moment ago: the daemon closes its sockets on the inotify event.
      std::this_thread::sleep_for(std::chrono::seconds(2));
      const std::set<uint64_t> again = Foreign(ReadHoldings(serve.pid(), pidfd.get(), nsfs_dev),
                                               AllowedNetns(prefix, serve.pid()));
      for (uint64_t inode : foreign) {
        if (again.count(inode)) {
          if (!leaked_inodes.count(inode)) {
            std::printf("leak: netns inode %llu still held\n",
                        static_cast<unsigned long long>(inode));
          }
          ++sample_leaks;
          leaked_inodes.insert(inode);
        }
      }
    }
    leaks += sample_leaks;
    if (!sample.ok) {
      std::printf("serve is gone\n");
      break;
    }
    const double elapsed_s = MillisecondsBetween(start, now) / 1000;
    const double window_s = MillisecondsBetween(previous_at, now) / 1000;
    const double millicores =
        window_s > 0 ? (sample.cpu_seconds - previous.cpu_seconds) / window_s * 1000 : 0;
    t_min.push_back(elapsed_s / 60);
    rss.push_back(static_cast<double>(sample.rss_kib));
    fds.push_back(sample.fds);
    max_rss = std::max(max_rss, sample.rss_kib);
    max_fds = std::max(max_fds, sample.fds);
    max_threads = std::max(max_threads, sample.threads);
    std::printf("%8.0f %9ld %6d %7d %6d %8d %9zu %7zu %6.1f %6d\n", elapsed_s, sample.rss_kib,
                sample.fds, sample.threads, held.nsfs_fds, held.sockets, held.socket_netns.size(),
                lab::ListLabNetns(prefix).size(), millicores, sample_leaks);
    std::fflush(stdout);
    previous = sample;
    previous_at = now;
    if (now >= end) break;
    next_sample += std::chrono::seconds(flags.sample_seconds);
    while (!Interrupted() && Clock::now() < std::min(next_sample, end)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  stop = true;
  churner.join();
  const double total_s = MillisecondsBetween(start, Clock::now()) / 1000;
  const std::string metrics = ScrapeMetrics(serve.options().metrics_port);
  const ProcSample last = ReadProcSample(serve.pid());
  const int exit_code = serve.Stop();

  const size_t half = t_min.size() / 2;
  auto tail = [half](const std::vector<double>& v) {
    return std::vector<double>(v.begin() + static_cast<long>(half), v.end());
  };
  std::printf("\n== serve_soak summary: %zu samples over %.1f min, %d base pods (load %s)\n",
              t_min.size(), total_s / 60, flags.pods, LoadAverage().c_str());
  std::printf("churn: %d adds, %d deletes (%.2f changes/s), %d failures%s%s\n",
              counters.adds.load(), counters.deletes.load(),
              (counters.adds + counters.deletes) / std::max(1.0, total_s), counters.failures.load(),
              counters.first_failure.empty() ? "" : ": ", counters.first_failure.c_str());
  if (!rss.empty()) {
    std::printf(
        "RSS KiB: first %.0f, last %.0f, max %ld; slope %.1f KiB/min (second half %.1f)  "
        "[target: flat]\n",
        rss.front(), rss.back(), max_rss, Slope(t_min, rss), Slope(tail(t_min), tail(rss)));
    std::printf(
        "open fds: first %.0f, last %.0f, max %d; slope %.2f fds/min (second half %.2f)  "
        "[target: flat]\n",
        fds.front(), fds.back(), max_fds, Slope(t_min, fds), Slope(tail(t_min), tail(fds)));
  }
  std::printf("threads max %d; peak RSS (VmHWM) %ld KiB; CPU over the run %.1f millicores\n",
              max_threads, last.hwm_kib,
              (last.cpu_seconds - first_cpu.cpu_seconds) / std::max(1.0, total_s) * 1000);
  std::printf(
      "metrics: event-socket overflows %.0f, scans by trigger resync %.0f / event %.0f / poll "
      "%.0f\n",
      MetricValue(metrics, "ambient_doctor_event_socket_overflows_total").value_or(-1),
      MetricValue(metrics, "ambient_doctor_scans_total{trigger=\"resync\"}").value_or(-1),
      MetricValue(metrics, "ambient_doctor_scans_total{trigger=\"event\"}").value_or(-1),
      MetricValue(metrics, "ambient_doctor_scans_total{trigger=\"poll\"}").value_or(-1));
  std::printf("leaks found (deleted netns still held 2 s later): %d (%zu netns)  [must be 0]\n",
              leaks, leaked_inodes.size());
  std::printf("serve exit code %d\n", exit_code);
  return 0;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) { return ad::bench::Main(argc, argv); }
