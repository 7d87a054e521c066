// The HBONE flow tracer's overhead: a connect/accept/close loop on 127.0.0.1 inside
// a fresh netns, side by side in one run, interleaved: no tracer, tracer loaded but the loop on a
// filtered-out port, tracer on the traced port; mesh-bypass mode with the loop's netns not
// watched (250 other netns in the map) and watched (any port; ztunnel's capture port 15001), 15001
// added to the port list instead, and the whole-node all-connects mode. Prints connections/s
// (median of --runs; each run rotates the order of the modes, and the baseline has the same idle
// consumer thread), ratios to the baseline, lost events, user-space CPU per 1000 events consumed
// and the RSS the tracer adds. Paced runs (--rate, default 20000/s; traced port, and a watched
// netns's :15001) check zero loss at that rate. Events of other netns (the machine's own traffic
// on traced ports) are counted apart.
//
//   sudo build/bench/flow_tracer_bench [--connections 20000] [--runs 5] [--rate 20000]
//                                      [--ring-bytes 1048576] [--modes 0,4 (rows, from 0)]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "sources/netns/netns_guard.h"
#include "tracing/flow_tracer.h"

namespace ad {
namespace {

constexpr uint16_t kTracedPort = 15008;
constexpr uint16_t kUntracedPort = 15009;

double ThreadCpuMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

long RssKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

// Connections/s of `count` connect+accept+RST-close cycles on 127.0.0.1:port, optionally paced
// to `rate` per second (0: as fast as possible). Runs on a thread inside `netns_path`.
double ConnectLoop(const std::string& netns_path, uint16_t port, int count, int rate) {
  double per_second = 0;
  std::thread worker([&] {
    Result<NetnsGuard> guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) return;
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listener, 1024) != 0) {
      std::fprintf(stderr, "listen on %u: %s\n", port, std::strerror(errno));
      ::close(listener);
      return;
    }
    const linger abort_on_close{.l_onoff = 1, .l_linger = 0};  // RST: no TIME_WAIT pile-up
    const auto start = bench::Clock::now();
    for (int i = 0; i < count; ++i) {
      if (rate > 0) {
        const auto due = start + std::chrono::nanoseconds(int64_t{1'000'000'000} * i / rate);
        std::this_thread::sleep_until(due);
      }
      const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        ::close(client);
        continue;
      }
      const int server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      ::setsockopt(client, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
      ::close(client);
      if (server >= 0) ::close(server);
    }
    const double ms = bench::MillisecondsBetween(start, bench::Clock::now());
    per_second = count / (ms / 1000.0);
    ::close(listener);
  });
  worker.join();
  return per_second;
}

struct Consumer {
  std::unique_ptr<FlowTracer> tracer;
  std::atomic<bool> stop{false};
  uint32_t loop_inode = 0;            // events of other netns (the machine's other traffic)
  std::atomic<uint64_t> consumed{0};  // are counted apart: they are not the loop's
  std::atomic<uint64_t> foreign{0};
  std::atomic<double> cpu_ms{0};
  // Batched: drains at most every 50 ms, as the daemon's FlowMonitor spaces them (the kernel side
  // wakes the reader for the first record into an empty ring). Otherwise one drain per wakeup.
  bool batched = true;
  std::thread thread;

  void Start() {
    thread = std::thread([this] {
      const double begin = ThreadCpuMs();
      while (!stop && !tracer) {
        // No tracer: the same thread waking as often, so the modes differ only by the tracer.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      while (!stop && tracer) {
        const auto drained_at = std::chrono::steady_clock::now();
        auto polled = tracer->Poll(std::chrono::milliseconds(50), [this](const FlowEvent& e) {
          (e.flow.netns_inode == loop_inode ? consumed : foreign)
              .fetch_add(1, std::memory_order_relaxed);
        });
        if (!polled.ok()) break;
        if (batched) std::this_thread::sleep_until(drained_at + std::chrono::milliseconds(50));
      }
      cpu_ms = ThreadCpuMs() - begin;
    });
  }
  void Stop() {
    // Drain what is left, then stop.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = true;
    thread.join();
  }
};

// Mesh-bypass mode's netns map: off, holding other netns only, or holding the loop's netns.
enum class Bypass : uint8_t { kOff, kUnwatched, kWatched };

struct Mode {
  const char* name;
  bool tracer;
  uint16_t port;
  bool batch_wakeups = true;
  Bypass bypass = Bypass::kOff;
  bool all_connects = false;
  std::vector<uint16_t> ports = {kTracedPort};
};

// A node's worth of ambient pod netns (fake inodes) in the map, plus the loop's netns if watched.
std::vector<uint32_t> BypassNetns(Bypass bypass, uint32_t loop_inode) {
  std::vector<uint32_t> inodes;
  for (uint32_t i = 0; i < 250; ++i) inodes.push_back(0xF0000000u + i);
  if (bypass == Bypass::kWatched) inodes.push_back(loop_inode);
  return inodes;
}

Result<std::unique_ptr<FlowTracer>> StartFor(const Mode& mode, uint32_t ring_bytes,
                                             uint32_t loop_inode) {
  TracerOptions options;
  options.batch_wakeups = mode.batch_wakeups;
  options.ring_bytes = ring_bytes;
  options.ports = mode.ports;
  options.trace_all_connects = mode.all_connects;
  options.watch_bypass_netns = mode.bypass != Bypass::kOff;
  auto started = StartFlowTracer(options);
  if (!started.ok() || mode.bypass == Bypass::kOff) return started;
  auto fed = (*started)->SetBypassNetns(BypassNetns(mode.bypass, loop_inode));
  if (!fed.ok()) return fed.error();
  return started;
}

int Main(int argc, char** argv) {
  int connections = 20000;
  int runs = 5;
  int rate = 20000;
  uint32_t ring_bytes = TracerOptions{}.ring_bytes;
  std::string only;  // --modes 0,4: only these rows (an A/B of two modes, more runs in the time)
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "usage: flow_tracer_bench [--connections 20000] [--runs 5] [--rate 20000]\n"
          "                         [--ring-bytes 1048576] [--modes 0,4]\n"
          "Needs root; measures and prints the tracer's overhead, never asserts.\n");
      return 0;
    }
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--connections") connections = std::atoi(argv[i + 1]);
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
    if (flag == "--rate") rate = std::atoi(argv[i + 1]);
    if (flag == "--ring-bytes") ring_bytes = static_cast<uint32_t>(std::atol(argv[i + 1]));
    if (flag == "--modes") only = argv[i + 1];
  }
  const std::string netns = "adbench-ebpf-" + std::to_string(::getpid());
  if (std::system(("ip netns add " + netns + " && ip -n " + netns + " link set lo up").c_str()) !=
      0) {
    std::fprintf(stderr, "cannot create netns %s (root?)\n", netns.c_str());
    return 2;
  }
  struct Cleanup {
    std::string name;
    ~Cleanup() { (void)!std::system(("ip netns delete " + name).c_str()); }
  } cleanup{netns};
  const std::string path = "/run/netns/" + netns;

  struct stat netns_stat {};
  if (::stat(path.c_str(), &netns_stat) != 0) return 2;
  const auto loop_inode = static_cast<uint32_t>(netns_stat.st_ino);
  constexpr uint16_t kCapturePort = 15001;  // ztunnel's outbound capture listener in a pod
  const std::vector<Mode> modes = {
      // On the untraced port: another tracer on the machine (a daemon, a test) traces :15008 in
      // every netns, and would slow the baseline down.
      {"no tracer", false, kUntracedPort},
      {"tracer, untraced port", true, kUntracedPort},
      {"tracer, traced port", true, kTracedPort},
      {"traced, wakeup per event", true, kTracedPort, false},
      {"bypass, unwatched netns", true, kUntracedPort, true, Bypass::kUnwatched},
      {"bypass, watched, :15009", true, kUntracedPort, true, Bypass::kWatched},
      {"bypass, watched, :15001", true, kCapturePort, true, Bypass::kWatched},
      {"ports +15001, untraced",
       true,
       kUntracedPort,
       true,
       Bypass::kOff,
       false,
       {kTracedPort, kCapturePort}},
      {"all-connects, :15009", true, kUntracedPort, true, Bypass::kOff, true}};
  const int kModes = static_cast<int>(modes.size());
  auto selected = [&only](int m) {
    if (only.empty()) return true;
    const std::string list = "," + only + ",";
    return list.find("," + std::to_string(m) + ",") != std::string::npos;
  };
  std::vector<std::vector<double>> rates(kModes);
  std::vector<uint64_t> lost(kModes);
  std::vector<uint64_t> events(kModes);
  std::vector<double> cpu_ms(kModes);
  std::vector<uint64_t> foreign(kModes);
  long baseline_rss_kb = 0;  // after a run without tracer
  long traced_rss_kb = 0;    // highest with a tracer loaded, after its run
  std::string attach;
  for (int run = 0; run < runs; ++run) {
    // Each run starts one mode later, so no mode always follows the same one.
    for (int step = 0; step < kModes; ++step) {
      const int m = (run + step) % kModes;
      if (!selected(m)) continue;
      Consumer consumer;
      consumer.loop_inode = loop_inode;
      consumer.batched = modes[m].batch_wakeups;
      if (modes[m].tracer) {
        auto started = StartFor(modes[m], ring_bytes, loop_inode);
        if (!started.ok()) {
          std::fprintf(stderr, "tracer: %s\n", started.error().message.c_str());
          return 2;
        }
        consumer.tracer = std::move(started).value();
        attach = std::string(AttachModeName(consumer.tracer->attach_mode()));
      }
      consumer.Start();
      rates[m].push_back(ConnectLoop(path, modes[m].port, connections, 0));
      consumer.Stop();
      if (!modes[m].tracer && baseline_rss_kb == 0) baseline_rss_kb = RssKb();
      if (modes[m].tracer) {
        const TracerCounters counters = consumer.tracer->Counters();
        lost[m] += counters.lost_events;
        events[m] += consumer.consumed;
        foreign[m] += consumer.foreign;
        cpu_ms[m] += consumer.cpu_ms;
        traced_rss_kb = std::max(traced_rss_kb, RssKb());
        consumer.tracer.reset();
        // The kernel frees the programs and maps after the detach: not on the next mode's time.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      }
    }
  }
  std::printf(
      "flow tracer overhead: %d connect/accept/RST-close cycles on 127.0.0.1 in a netns, "
      "median of %d interleaved runs, attach %s\n",
      connections, runs, attach.c_str());
  std::printf("%-26s %12s %8s %12s %10s %16s %10s\n", "mode", "conn/s", "ratio", "events", "lost",
              "CPU ms/1k events", "other ns");
  const double base = rates[0].empty() ? 1.0 : bench::Median(rates[0]);
  for (int m = 0; m < kModes; ++m) {
    if (!selected(m)) continue;
    const double median = bench::Median(rates[m]);
    char per_k[32] = "-";
    if (events[m] > 0) {
      std::snprintf(per_k, sizeof(per_k), "%.3f",
                    cpu_ms[m] / (static_cast<double>(events[m]) / 1e3));
    }
    std::printf("%-26s %12.0f %7.1f%% %12llu %10llu %16s %10llu\n", modes[m].name, median,
                100.0 * median / base, static_cast<unsigned long long>(events[m]),
                static_cast<unsigned long long>(lost[m]), per_k,
                static_cast<unsigned long long>(foreign[m]));
  }

  // Paced runs at the target rate, traced port and a watched netns's capture port (an app
  // connect plus ztunnel's accept, as in an ambient pod): lost events must be zero.
  if (rate > 0) {
    for (const Mode& mode : {modes[2], modes[6]}) {
      Consumer consumer;
      consumer.loop_inode = loop_inode;
      consumer.batched = mode.batch_wakeups;
      auto started = StartFor(mode, ring_bytes, loop_inode);
      if (!started.ok()) return 2;
      consumer.tracer = std::move(started).value();
      consumer.Start();
      const double achieved = ConnectLoop(path, mode.port, connections, rate);
      consumer.Stop();
      std::printf(
          "%s, paced at %d conn/s (achieved %.0f): %llu events (+%llu of other netns), %llu "
          "lost\n",
          mode.name, rate, achieved, static_cast<unsigned long long>(consumer.consumed.load()),
          static_cast<unsigned long long>(consumer.foreign.load()),
          static_cast<unsigned long long>(consumer.tracer->Counters().lost_events));
    }
  }
  std::printf(
      "RSS: %ld KiB without tracer, %ld KiB with it loaded after a traced run (+%ld KiB; "
      "%u KiB ring buffer, 64 Ki-entry state map)\n",
      baseline_rss_kb, traced_rss_kb, traced_rss_kb - baseline_rss_kb, ring_bytes / 1024);
  return 0;
}

}  // namespace
}  // namespace ad

int main(int argc, char** argv) { return ad::Main(argc, argv); }
