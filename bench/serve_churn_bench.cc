// Pod churn under the node daemon: `ambient-doctor serve` (the real binary, default
// flags) on a ZDS lab while pods are added and removed through cni-sim (rules + hand-off to
// ztunnel-sim, the way istio-cni does it) at --rate changes per second for --seconds, in one
// cni-sim batch every --batch-ms. An observer asks GetReport every --poll-ms and records, per
// churned pod, when it first appeared and when it was gone. Missed: an added pod never seen in any
// report, or a removed one still reported
// --settle-seconds after the churn. At the end the daemon's netns set must equal the lab's.
// Figures: the daemon's CPU over the run (/proc/<pid>/stat), peak RSS, fds, event-socket
// overflows and resyncs (its /metrics), and the observer's own cost on the daemon at rest.
//
//   serve_churn_bench [--pods 250] [--rate 20] [--seconds 60] [--extra 20] [--poll-ms 200]
//                     [--batch-ms 500] [--settle-seconds 15]
//
// Needs root. Measures and prints; never asserts.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/serve_support.h"
#include "lab/lab.h"

namespace ad::bench {
namespace {

namespace pb = ambientdoctor::v1;

volatile std::sig_atomic_t g_interrupted = 0;
void OnTerminationSignal(int /*signal_number*/) { g_interrupted = 1; }
bool Interrupted() { return g_interrupted != 0; }

struct Flags {
  int pods = 250;
  double rate = 20;  // adds + deletes per second
  int seconds = 60;
  int extra = 20;  // churned pods alive at a time once the pool is full
  int poll_ms = 200;
  int batch_ms = 500;
  int settle_seconds = 15;
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atof(argv[++i]) : 0.0; };
    if (arg == "--pods") flags.pods = static_cast<int>(next());
    if (arg == "--rate") flags.rate = next();
    if (arg == "--seconds") flags.seconds = static_cast<int>(next());
    if (arg == "--extra") flags.extra = static_cast<int>(next());
    if (arg == "--poll-ms") flags.poll_ms = static_cast<int>(next());
    if (arg == "--batch-ms") flags.batch_ms = static_cast<int>(next());
    if (arg == "--settle-seconds") flags.settle_seconds = static_cast<int>(next());
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: serve_churn_bench [--pods 250] [--rate 20] [--seconds 60] [--extra 20] "
          "[--poll-ms 200] [--batch-ms 500] [--settle-seconds 15]\n");
      std::exit(0);
    }
  }
  return flags;
}

struct ChurnedPod {
  std::string path;
  Clock::time_point added;  // EnrollPod returned
  std::optional<Clock::time_point> removed;
  std::optional<Clock::time_point> first_seen;
  std::optional<Clock::time_point> gone_seen;  // first report without it after removal
};

// The churned pods by netns path, shared by the churner and the observer.
struct Ledger {
  std::mutex mutex;
  std::map<std::string, ChurnedPod> pods;
};

std::set<std::string> ReportPaths(const pb::Report& report) {
  std::set<std::string> paths;
  for (const pb::NetnsEntry& netns : report.netns()) {
    for (const std::string& path : netns.paths()) paths.insert(path);
    paths.insert(netns.path());
  }
  return paths;
}

std::optional<pb::Report> GetReport(pb::AmbientDoctor::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  pb::Report report;
  if (!stub.GetReport(&context, {}, &report).ok()) return std::nullopt;
  return report;
}

std::set<std::string> LabPaths(const std::string& prefix) {
  std::set<std::string> paths;
  for (const std::string& name : lab::ListLabNetns(prefix)) paths.insert("/run/netns/" + name);
  return paths;
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  if (::geteuid() != 0) {
    std::fprintf(stderr, "serve_churn_bench: needs root (lab netns)\n");
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal_number, &action, nullptr);
  RaiseFileLimit();

  const std::string prefix = "adchurn" + std::to_string(::getpid() % 10000);
  std::printf("lab %s up: %d pods, ZDS emulators, load %s\n", prefix.c_str(), flags.pods,
              LoadAverage().c_str());
  std::fflush(stdout);
  lab::ScopedLab lab({.prefix = prefix, .pods = flags.pods, .zds = true});
  if (!lab.ok()) {
    std::fprintf(stderr, "serve_churn_bench: lab up failed: %s\n", lab.error().message.c_str());
    return 1;
  }
  const std::string run_dir = lab::LabRunDir(prefix);
  ServeProcess serve({.lab_prefix = prefix,
                      .api_socket = run_dir + "/api.sock",
                      .metrics_port = 30000 + ::getpid() % 20000,
                      .log_path = run_dir + "/serve.log"});
  if (!serve.running() || !serve.WaitReady(std::chrono::seconds(60))) {
    std::fprintf(stderr, "serve_churn_bench: %s\n", serve.error().c_str());
    return 1;
  }
  auto stub = pb::AmbientDoctor::NewStub(serve.Channel());
  std::this_thread::sleep_for(std::chrono::seconds(5));  // start-up scan, re-read after watching
  const std::string metrics_before = ScrapeMetrics(serve.options().metrics_port);

  Ledger ledger;
  std::atomic<bool> stop_observer{false};
  std::atomic<int> reports{0};
  std::atomic<int> report_failures{0};
  std::thread observer([&] {
    while (!stop_observer && !Interrupted()) {
      const std::optional<pb::Report> report = GetReport(*stub);
      const Clock::time_point now = Clock::now();
      if (!report) {
        ++report_failures;
      } else {
        ++reports;
        const std::set<std::string> paths = ReportPaths(*report);
        std::lock_guard lock(ledger.mutex);
        for (auto& [path, pod] : ledger.pods) {
          const bool present = paths.count(path) > 0;
          if (present && !pod.first_seen) pod.first_seen = now;
          if (!present && pod.removed && !pod.gone_seen) pod.gone_seen = now;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(flags.poll_ms));
    }
  });

  // ---- Churn: every --batch-ms, one cni-sim batch (lab::ChurnPods: one pods-file rewrite and
  // one SIGHUP) of rate * batch / 2 adds and as many deletes of the oldest churned pods (only
  // adds until `extra` churned pods live).
  const ProcSample cpu_start = ReadProcSample(serve.pid());
  const Clock::time_point churn_start = Clock::now();
  const auto churn_end = churn_start + std::chrono::seconds(flags.seconds);
  const int per_batch =
      std::max(1, static_cast<int>(flags.rate * flags.batch_ms / 1000.0 / 2 + 0.5));
  std::deque<std::pair<int, std::string>> alive;  // index, netns path
  int next_index = flags.pods + 100;
  int adds = 0, deletes = 0, failures = 0, batches = 0;
  std::string first_failure;
  std::vector<double> batch_ms;  // how long cni-sim took per batch
  auto tick = churn_start;
  long max_rss = 0;
  int max_fds = 0;
  while (Clock::now() < churn_end && !Interrupted()) {
    lab::ChurnBatch batch;
    std::vector<std::string> removed_paths;
    if (static_cast<int>(alive.size()) >= flags.extra) {
      for (int i = 0; i < per_batch && !alive.empty(); ++i) {
        batch.remove.push_back(alive.front().first);
        removed_paths.push_back(alive.front().second);
        alive.pop_front();
      }
    }
    for (int i = 0; i < per_batch; ++i) batch.add.push_back({.index = next_index++});
    const Clock::time_point op_start = Clock::now();
    Result<std::vector<lab::LabPod>> churned = lab::ChurnPods(prefix, batch);
    const Clock::time_point op_end = Clock::now();
    ++batches;
    batch_ms.push_back(MillisecondsBetween(op_start, op_end));
    {
      std::lock_guard lock(ledger.mutex);
      for (const std::string& path : removed_paths) ledger.pods[path].removed = op_end;
      deletes += static_cast<int>(removed_paths.size());
      if (churned.ok()) {
        for (const lab::LabPod& pod : *churned) {
          ledger.pods[pod.netns_path] = {.path = pod.netns_path, .added = op_end};
          alive.emplace_back(pod.index, pod.netns_path);
          ++adds;
        }
      }
    }
    if (!churned.ok() && failures++ == 0) first_failure = churned.error().message;
    const ProcSample sample = ReadProcSample(serve.pid());
    max_rss = std::max(max_rss, sample.rss_kib);
    max_fds = std::max(max_fds, sample.fds);
    tick += std::chrono::milliseconds(flags.batch_ms);
    std::this_thread::sleep_until(tick);
  }
  const Clock::time_point churn_stopped = Clock::now();
  const ProcSample cpu_end = ReadProcSample(serve.pid());
  const double churn_s = MillisecondsBetween(churn_start, churn_stopped) / 1000;

  // ---- Settle: the daemon's netns set must become the lab's, exactly.
  const std::set<std::string> lab_paths = LabPaths(prefix);
  std::set<std::string> daemon_paths;
  bool equal = false;
  const auto settle_deadline = Clock::now() + std::chrono::seconds(flags.settle_seconds);
  while (Clock::now() < settle_deadline && !Interrupted()) {
    if (std::optional<pb::Report> report = GetReport(*stub)) {
      daemon_paths.clear();
      for (const pb::NetnsEntry& netns : report->netns()) daemon_paths.insert(netns.path());
      if (daemon_paths == lab_paths) {
        equal = true;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const double settled_s = MillisecondsBetween(churn_stopped, Clock::now()) / 1000;
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * flags.poll_ms));

  // ---- The observer's own cost: the daemon at rest, polled and not.
  const ProcSample polled_start = ReadProcSample(serve.pid());
  std::this_thread::sleep_for(std::chrono::seconds(10));
  const ProcSample polled_end = ReadProcSample(serve.pid());
  stop_observer = true;
  observer.join();
  const ProcSample rest_start = ReadProcSample(serve.pid());
  std::this_thread::sleep_for(std::chrono::seconds(10));
  const ProcSample rest_end = ReadProcSample(serve.pid());
  const std::string metrics = ScrapeMetrics(serve.options().metrics_port);

  int observed = 0, missed_adds = 0, removed_total = 0, missed_deletes = 0;
  std::vector<double> appear_ms, vanish_ms;
  {
    std::lock_guard lock(ledger.mutex);
    for (const auto& [path, pod] : ledger.pods) {
      if (pod.first_seen) {
        ++observed;
        appear_ms.push_back(MillisecondsBetween(pod.added, *pod.first_seen));
      } else {
        ++missed_adds;
        if (missed_adds <= 5) std::printf("never observed: %s\n", path.c_str());
      }
      if (!pod.removed) continue;
      ++removed_total;
      if (pod.gone_seen) {
        vanish_ms.push_back(MillisecondsBetween(*pod.removed, *pod.gone_seen));
      } else if (daemon_paths.count(path)) {
        ++missed_deletes;
        if (missed_deletes <= 5) std::printf("still reported after removal: %s\n", path.c_str());
      }
    }
  }
  auto counter_delta = [&](const std::string& name) {
    return MetricValue(metrics, name).value_or(0) - MetricValue(metrics_before, name).value_or(0);
  };
  std::printf(
      "\n== churn through cni-sim: %d base pods, %.0f s at a requested %.0f changes/s "
      "(load %s)\n",
      flags.pods, churn_s, flags.rate, LoadAverage().c_str());
  std::printf("adds %d, deletes %d (%.1f changes/s achieved), lab failures %d%s%s\n", adds, deletes,
              (adds + deletes) / std::max(1e-9, churn_s), failures,
              first_failure.empty() ? "" : ": ", first_failure.c_str());
  std::printf(
      "lab: %d batches of up to %d adds + %d deletes, cni-sim took p50 %.0f / max %.0f ms "
      "per batch\n",
      batches, per_batch, per_batch, Percentile(batch_ms, 0.5), Percentile(batch_ms, 1));
  std::printf(
      "observed %d of %d added (GetReport every %d ms: %d reports, %d failed), missed %d "
      "(adds never seen %d, removed but still reported %d)  [must be 0]\n",
      observed, adds, flags.poll_ms, reports.load(), report_failures.load(),
      missed_adds + missed_deletes, missed_adds, missed_deletes);
  std::printf(
      "appear after EnrollPod returned: p50 %.0f / p99 %.0f / max %.0f ms; gone after "
      "UnenrollPod returned: p50 %.0f / p99 %.0f / max %.0f ms (%zu of %d removed)\n",
      Percentile(appear_ms, 0.5), Percentile(appear_ms, 0.99), Percentile(appear_ms, 1),
      Percentile(vanish_ms, 0.5), Percentile(vanish_ms, 0.99), Percentile(vanish_ms, 1),
      vanish_ms.size(), removed_total);
  std::printf("final netns set: daemon %zu, lab %zu, %s (settled %.1f s after the churn)\n",
              daemon_paths.size(), lab_paths.size(), equal ? "equal" : "DIFFERENT", settled_s);
  std::printf(
      "daemon CPU over the churn %.1f millicores (observer included); peak RSS %ld KiB "
      "(VmHWM %ld KiB), max fds %d\n",
      (cpu_end.cpu_seconds - cpu_start.cpu_seconds) / std::max(1e-9, churn_s) * 1000, max_rss,
      rest_end.hwm_kib, max_fds);
  std::printf("daemon at rest after the churn: %.1f millicores with the observer, %.1f without\n",
              (polled_end.cpu_seconds - polled_start.cpu_seconds) / 10 * 1000,
              (rest_end.cpu_seconds - rest_start.cpu_seconds) / 10 * 1000);
  std::printf(
      "metrics over the churn: event-socket overflows %.0f, resync scans %.0f, event scans %.0f, "
      "poll scans %.0f, netns re-reads %.0f\n",
      counter_delta("ambient_doctor_event_socket_overflows_total"),
      counter_delta("ambient_doctor_scans_total{trigger=\"resync\"}"),
      counter_delta("ambient_doctor_scans_total{trigger=\"event\"}"),
      counter_delta("ambient_doctor_scans_total{trigger=\"poll\"}"),
      counter_delta("ambient_doctor_netns_rereads_total"));
  std::printf("baseline: the idle daemon (serve_footprint, 250 pods, ZDS): 8.3 millicores\n");
  return 0;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) { return ad::bench::Main(argc, argv); }
