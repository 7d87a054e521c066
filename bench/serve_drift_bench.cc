// Drift latency through the daemon's gRPC API: the real `ambient-doctor serve`
// binary, default flags, on a lab node (250 iptables-nft pods, plus one native-nft pod and one
// iptables-legacy pod added with lab::AddPod); a C++ WatchFindings client. Each trial deletes
// the outbound 15001 REDIRECT of one pod (`ip netns exec POD iptables-nft -t nat -D ...`, or
// `nft delete rule ... handle N`, or `iptables-legacy -w -t nat -D ...`) and waits for the
// INCOMPLETE_RULESET KIND_OPENED event of exactly that pod's netns inode, timed from just before
// the command is spawned and, separately, from its exit (negative: the event came first); then
// it restores the rule and waits for the KIND_RESOLVED event.
//
//   serve_drift_bench [--pods 250] [--trials 200] [--nft-trials 200] [--legacy-trials 20]
//                     [--zds]
//
// Needs root. Measures and prints; never asserts. The legacy backend has no change events: the
// daemon sees it at its next legacy fingerprint poll (`--interval`, 5 s), so that latency is
// bounded by the poll interval, not by the event path.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/serve_support.h"
#include "lab/lab.h"

namespace ad::bench {
namespace {

namespace pb = ambientdoctor::v1;

volatile std::sig_atomic_t g_interrupted = 0;
void OnTerminationSignal(int /*signal_number*/) { g_interrupted = 1; }
bool Interrupted() { return g_interrupted != 0; }

// The rule every trial deletes and restores: the last of nat ISTIO_OUTPUT, so re-appending it
// restores the order exactly.
constexpr char kOutboundRedirect[] =
    "ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports "
    "15001";
constexpr char kNftTable[] = "istio-ambient-nat";
constexpr char kNftChain[] = "istio-output";

struct Flags {
  int pods = 250;
  int trials = 200;
  int nft_trials = 200;
  int legacy_trials = 20;
  bool zds = false;
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (arg == "--pods") flags.pods = next();
    if (arg == "--trials") flags.trials = next();
    if (arg == "--nft-trials") flags.nft_trials = next();
    if (arg == "--legacy-trials") flags.legacy_trials = next();
    if (arg == "--zds") flags.zds = true;
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: serve_drift_bench [--pods 250] [--trials 200] [--nft-trials 200] "
          "[--legacy-trials 20] [--zds]\n");
      std::exit(0);
    }
  }
  return flags;
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

struct Tools {
  std::string ip, iptables_nft, iptables_legacy, nft;
};

struct TrialPod {
  std::string netns_name;
  uint32_t inode = 0;
};

// How one backend deletes and restores the rule in a pod (argv built per trial: nft needs the
// rule's current handle).
struct Backend {
  std::string name;
  std::vector<TrialPod> pods;
  int trials = 0;
  std::chrono::milliseconds timeout{3000};
  // A random wait before each trial, up to this long: without it every legacy trial would start
  // right after the poll that saw the previous restore, and measure the whole interval.
  std::chrono::milliseconds jitter{0};
  std::function<std::vector<std::string>(const TrialPod&)> remove;
  std::function<std::vector<std::string>(const TrialPod&)> restore;
};

std::vector<std::string> InNetns(const Tools& tools, const std::string& netns,
                                 std::vector<std::string> command) {
  std::vector<std::string> argv = {tools.ip, "netns", "exec", netns};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

// "... redirect to :15001 # handle 7" in `nft -a list chain`: the handle, or -1.
int NftRedirectHandle(const Tools& tools, const std::string& netns) {
  const std::string listing = CaptureOutput(
      InNetns(tools, netns, {tools.nft, "-a", "list", "chain", "inet", kNftTable, kNftChain}));
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("redirect to :15001") == std::string::npos) continue;
    const size_t handle = line.rfind("# handle ");
    if (handle != std::string::npos) return std::atoi(line.c_str() + handle + 9);
  }
  return -1;
}

struct Latencies {
  std::vector<double> from_spawn, from_exit, resolve_from_spawn;
  int missed = 0;  // no event within the timeout
  int missed_resolve = 0;
  int wrong_pod = 0;  // INCOMPLETE_RULESET opened for another netns meanwhile
  int command_failures = 0;
};

Latencies RunTrials(const Backend& backend, FindingStream& stream) {
  Latencies result;
  for (int trial = 0; trial < backend.trials && !Interrupted() && !stream.broken(); ++trial) {
    const TrialPod& pod = backend.pods[static_cast<size_t>(trial) * 7 % backend.pods.size()];
    if (backend.jitter.count() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % backend.jitter.count()));
    }
    const std::vector<std::string> remove = backend.remove(pod);
    stream.Clear();
    std::string seen;  // this pod's events while waiting, for a missed trial's line
    auto is_incomplete = [&](const pb::FindingEvent& event, pb::FindingEvent::Kind kind) {
      if (event.finding().netns().inode() == pod.inode) {
        seen += " " + pb::FindingEvent::Kind_Name(event.kind()) + ":" + event.finding().code() +
                "@" + std::to_string(event.sequence());
      }
      if (event.kind() != kind || event.finding().code() != "INCOMPLETE_RULESET") return false;
      if (event.finding().netns().inode() == pod.inode) return true;
      ++result.wrong_pod;
      return false;
    };
    auto wall_clock = [] {
      const auto now = std::chrono::system_clock::now().time_since_epoch();
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
      const std::time_t seconds = ms / 1000;
      char text[32];
      std::strftime(text, sizeof(text), "%H:%M:%S", std::gmtime(&seconds));
      return std::string(text) + "." + std::to_string(1000 + ms % 1000).substr(1);
    };
    const std::string spawned_at = wall_clock();
    const Clock::time_point spawned = Clock::now();
    const int code = WaitExit(SpawnQuiet(remove));
    const Clock::time_point exited = Clock::now();
    if (code != 0) {
      ++result.command_failures;
      continue;
    }
    const auto opened = stream.WaitFor(
        [&](const pb::FindingEvent& e) { return is_incomplete(e, pb::FindingEvent::KIND_OPENED); },
        backend.timeout);
    if (opened) {
      result.from_spawn.push_back(MillisecondsBetween(spawned, opened->arrived));
      result.from_exit.push_back(MillisecondsBetween(exited, opened->arrived));
    } else {
      ++result.missed;
      std::printf("  missed: %s trial %d, -D spawned %s, %s events seen:%s\n", backend.name.c_str(),
                  trial, spawned_at.c_str(), pod.netns_name.c_str(),
                  seen.empty() ? " none" : seen.c_str());
    }
    const Clock::time_point restore_spawned = Clock::now();
    if (WaitExit(SpawnQuiet(backend.restore(pod))) != 0) ++result.command_failures;
    const auto resolved = stream.WaitFor(
        [&](const pb::FindingEvent& e) {
          return is_incomplete(e, pb::FindingEvent::KIND_RESOLVED);
        },
        backend.timeout);
    if (!resolved) {
      std::printf("  missed resolve: %s trial %d, restored %s, events seen:%s\n",
                  backend.name.c_str(), trial, wall_clock().c_str(),
                  seen.empty() ? " none" : seen.c_str());
    }
    if (resolved) {
      result.resolve_from_spawn.push_back(MillisecondsBetween(restore_spawned, resolved->arrived));
    } else {
      ++result.missed_resolve;
    }
  }
  return result;
}

void PrintLatencies(const Backend& backend, const Latencies& l, const std::string& target) {
  auto line = [](const char* what, const std::vector<double>& v) {
    std::printf("  %-34s p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  (n=%zu)\n", what,
                Percentile(v, 0.5), Percentile(v, 0.99), Percentile(v, 1.0), v.size());
  };
  std::printf("%s (%zu pod%s, %d trials):  %s\n", backend.name.c_str(), backend.pods.size(),
              backend.pods.size() == 1 ? "" : "s", backend.trials, target.c_str());
  line("spawn of -D -> OPENED event", l.from_spawn);
  line("exit of -D -> OPENED event", l.from_exit);
  line("spawn of restore -> RESOLVED event", l.resolve_from_spawn);
  std::printf("  missed %d, missed resolves %d, wrong-pod events %d, command failures %d\n",
              l.missed, l.missed_resolve, l.wrong_pod, l.command_failures);
}

uint32_t InodeOf(const std::string& netns_name) {
  struct stat st {};
  return ::stat(("/run/netns/" + netns_name).c_str(), &st) == 0 ? static_cast<uint32_t>(st.st_ino)
                                                                : 0;
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  if (::geteuid() != 0) {
    std::fprintf(stderr, "serve_drift_bench: needs root (lab netns)\n");
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal_number, &action, nullptr);
  RaiseFileLimit();
  Tools tools;
  const auto ip = FindExecutable("ip");
  const auto iptables_nft = FindExecutable("iptables-nft");
  const auto iptables_legacy = FindExecutable("iptables-legacy");
  const auto nft = FindExecutable("nft");
  if (!ip || !iptables_nft || !iptables_legacy || !nft) {
    std::fprintf(stderr, "serve_drift_bench: ip, iptables-nft, iptables-legacy, nft needed\n");
    return 2;
  }
  tools = {*ip, *iptables_nft, *iptables_legacy, *nft};

  const std::string prefix = "addrift" + std::to_string(::getpid() % 10000);
  std::printf("lab %s up: %d iptables-nft pods%s + 1 nft pod + 1 legacy pod, load %s\n",
              prefix.c_str(), flags.pods, flags.zds ? " (ZDS emulators)" : "",
              LoadAverage().c_str());
  std::fflush(stdout);
  lab::ScopedLab lab({.prefix = prefix, .pods = flags.pods, .zds = flags.zds});
  if (!lab.ok()) {
    std::fprintf(stderr, "serve_drift_bench: lab up failed: %s\n", lab.error().message.c_str());
    return 1;
  }
  Result<lab::LabPod> nft_pod =
      lab::AddPod(prefix, {.backend = lab::LabBackend::kNft, .index = flags.pods});
  Result<lab::LabPod> legacy_pod =
      lab::AddPod(prefix, {.backend = lab::LabBackend::kLegacy, .index = flags.pods + 1});
  if (!nft_pod.ok() || !legacy_pod.ok()) {
    std::fprintf(stderr, "serve_drift_bench: add pod: %s\n",
                 (nft_pod.ok() ? legacy_pod.error() : nft_pod.error()).message.c_str());
    return 1;
  }

  const std::string run_dir = "/run/ambient-doctor-" + prefix;
  ServeProcess serve({.lab_prefix = prefix,
                      .api_socket = run_dir + "/api.sock",
                      .metrics_port = 30000 + ::getpid() % 20000,
                      .log_path = "/tmp/" + prefix + "-serve.log"});
  if (!serve.running() || !serve.WaitReady(std::chrono::seconds(60))) {
    std::fprintf(stderr, "serve_drift_bench: %s\n", serve.error().c_str());
    return 1;
  }
  FindingStream stream(serve.Channel());
  if (!stream.WaitCurrent(std::chrono::seconds(10))) {
    std::fprintf(stderr, "serve_drift_bench: no initial WatchFindings set: %s\n",
                 stream.status_text().c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the re-read after watching settles
  const ProcSample before = ReadProcSample(serve.pid());
  const Clock::time_point trials_start = Clock::now();

  const std::vector<std::string> redirect = Words(kOutboundRedirect);
  auto iptables = [&](const std::string& binary, const char* op, bool wait) {
    return [&tools, &redirect, binary, op, wait](const TrialPod& pod) {
      std::vector<std::string> command = {binary};
      if (wait) command.push_back("-w");
      command.insert(command.end(), {"-t", "nat", op});
      command.insert(command.end(), redirect.begin(), redirect.end());
      return InNetns(tools, pod.netns_name, command);
    };
  };
  Backend nft_iptables{.name = "iptables-nft",
                       .trials = flags.trials,
                       .remove = iptables(tools.iptables_nft, "-D", false),
                       .restore = iptables(tools.iptables_nft, "-A", false)};
  for (const lab::LabPod& pod : lab.node().pods) {
    nft_iptables.pods.push_back({pod.netns_name, InodeOf(pod.netns_name)});
  }
  Backend native{
      .name = "native nft",
      .pods = {{nft_pod->netns_name, InodeOf(nft_pod->netns_name)}},
      .trials = flags.nft_trials,
      .remove =
          [&tools](const TrialPod& pod) {
            return InNetns(tools, pod.netns_name,
                           {tools.nft, "delete", "rule", "inet", kNftTable, kNftChain, "handle",
                            std::to_string(NftRedirectHandle(tools, pod.netns_name))});
          },
      .restore =
          [&tools](const TrialPod& pod) {
            return InNetns(tools, pod.netns_name,
                           {tools.nft,      "add",      "rule", "inet",  kNftTable, kNftChain,
                            "meta",         "l4proto",  "tcp",  "ip",    "daddr",   "!=",
                            "127.0.0.1/32", "mark",     "and",  "0xfff", "!=",      "0x539",
                            "counter",      "redirect", "to",   ":15001"});
          }};
  Backend legacy{.name = "iptables-legacy",
                 .pods = {{legacy_pod->netns_name, InodeOf(legacy_pod->netns_name)}},
                 .trials = flags.legacy_trials,
                 .timeout = std::chrono::milliseconds(15000),
                 .jitter = std::chrono::milliseconds(5000),
                 .remove = iptables(tools.iptables_legacy, "-D", true),
                 .restore = iptables(tools.iptables_legacy, "-A", true)};

  std::printf("serve pid %d (the real binary, default flags), WatchFindings over %s\n", serve.pid(),
              serve.options().api_socket.c_str());
  std::fflush(stdout);
  const Latencies nft_result = RunTrials(nft_iptables, stream);
  const Latencies native_result = RunTrials(native, stream);
  const Latencies legacy_result = RunTrials(legacy, stream);
  const ProcSample after = ReadProcSample(serve.pid());
  const double trials_s = MillisecondsBetween(trials_start, Clock::now()) / 1000;
  const std::string metrics = ScrapeMetrics(serve.options().metrics_port);

  std::printf(
      "\n== drift latency through gRPC: rule delete -> WatchFindings INCOMPLETE_RULESET for that "
      "pod (coalescing window 10 ms included; load %s)\n",
      LoadAverage().c_str());
  PrintLatencies(nft_iptables, nft_result, "[target p99 <= 100 ms]");
  PrintLatencies(native, native_result, "[target p99 <= 100 ms]");
  PrintLatencies(legacy, legacy_result,
                 "[no events: bounded by the legacy poll, --interval 5 s; trials start at a "
                 "random point of it]");
  std::printf(
      "daemon during the trials: %.1f millicores, RSS %ld KiB (peak %ld), fds %d; event-socket "
      "overflows %.0f\n",
      (after.cpu_seconds - before.cpu_seconds) / std::max(1e-9, trials_s) * 1000, after.rss_kib,
      after.hwm_kib, after.fds,
      MetricValue(metrics, "ambient_doctor_event_socket_overflows_total").value_or(-1));
  std::printf("baseline (watch_bench, ChangeMonitor in-process, no gRPC): p99 23-27 ms\n");
  return 0;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) { return ad::bench::Main(argc, argv); }
