// Whole-node scan cost on lab nodes, side by side in one run: the in-process scan (ScanNode,
// ScanNode + Analyze) against shelling out per netns to the netfilter dump tools the way a
// tool-based checker would, plus the real `ambient-doctor report` binary's peak RSS and wall time.
//
//   scan_bench [--sizes 10,100,250,1000] [--sample K] [--no-ipv6] [--benchmark_* flags]
//
// Needs root: every size brings up a lab node (prefix "adbench", iptables-nft backend, default
// variant with DNS capture, IPv6 on unless --no-ipv6) and removes it again. Benchmarks measure and
// print; they never assert. Targets are reported as information.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "bench/bench_support.h"
#include "lab/lab.h"
#include "scan/inspector.h"
#include "scan/scanner.h"

extern char** environ;

namespace ad::bench {
namespace {

namespace fs = std::filesystem;

constexpr char kLabPrefix[] = "adbench";
constexpr std::string_view kRssProbeFlag = "--rss-probe";
constexpr int kAllNetnsUpToPods = 100;  // larger labs use a fixed random sample for the baseline
constexpr int kReportRuns = 3;          // `ambient-doctor report` runs per size (median wall)
constexpr int kRepetitions = 3;         // Google Benchmark repetitions (median reported)
constexpr double kMinSecondsPerRepetition = 0.5;

volatile std::sig_atomic_t g_interrupted = 0;

void OnTerminationSignal(int /*signal_number*/) { g_interrupted = 1; }
bool Interrupted() { return g_interrupted != 0; }

void InstallTerminationHandlers() {
  struct sigaction action {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal_number, &action, nullptr);
}

// The hidden probe mode: `scan_bench --rss-probe CMD...` runs CMD with output to /dev/null and
// prints "<ru_maxrss KB> <wall ms> <exit code>". A child's ru_maxrss starts from its spawner's
// RSS high-water mark (the kernel carries the old mm's peak across exec, also for vfork), so the
// large bench process would inflate it; this small, freshly exec'd probe does the spawning.
int RunRssProbe(int argc, char** argv) {
  std::vector<std::string> command(argv + 2, argv + argc);
  if (command.empty()) {
    std::fprintf(stderr, "%s needs a command\n", kRssProbeFlag.data());
    return 2;
  }
  ChildResult result = RunChild(command, OutputHandling::kDevNull);
  if (!result.ran()) {
    std::fprintf(stderr, "%s\n", result.spawn_error.c_str());
    return 2;
  }
  std::printf("%ld %.3f %d\n", result.max_rss_kb, result.wall_ms, result.exit_code);
  return 0;
}

struct ProbeResult {
  bool ok = false;
  std::string error;
  long max_rss_kb = 0;
  double wall_ms = 0;
  int exit_code = -1;
};

ProbeResult ProbeRss(const std::string& self_path, const std::vector<std::string>& command) {
  std::vector<std::string> argv = {self_path, std::string(kRssProbeFlag)};
  argv.insert(argv.end(), command.begin(), command.end());
  ChildResult child = RunChild(argv, OutputHandling::kKeepStdout);
  ProbeResult probe;
  if (!child.ran() || child.exit_code != 0 ||
      std::sscanf(child.stdout_text.c_str(), "%ld %lf %d", &probe.max_rss_kb, &probe.wall_ms,
                  &probe.exit_code) != 3) {
    probe.error =
        child.ran() ? "probe exited " + std::to_string(child.exit_code) : child.spawn_error;
    return probe;
  }
  probe.ok = true;
  return probe;
}

// ---------------------------------------------------------------------------------------------
// Flags (ours are removed from argv before benchmark::Initialize sees it).

struct BenchFlags {
  std::vector<int> sizes = {10, 100, 250, 1000};
  int sample = 50;  // baseline netns sampled for N > kAllNetnsUpToPods
  bool ipv6 = true;
};

std::optional<std::vector<int>> ParseSizes(std::string_view text) {
  std::vector<int> sizes;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string item(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    char* end = nullptr;
    const long value = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value < 1 || value > 60000) return std::nullopt;
    sizes.push_back(static_cast<int>(value));
  }
  if (sizes.empty()) return std::nullopt;
  return sizes;
}

void PrintUsage() {
  std::printf(
      "scan_bench [--sizes N,N,...] [--sample K] [--no-ipv6] [--benchmark_* flags]\n"
      "  --sizes      lab pod counts (default 10,100,250,1000)\n"
      "  --sample K   shell-out baseline: netns sampled when N > %d (default 50; 0 = all)\n"
      "  --no-ipv6    lab without IPv6 (ip6tables-*-save then dump empty tables)\n"
      "Needs root. Creates and removes lab netns with prefix %s.\n\n",
      kAllNetnsUpToPods, kLabPrefix);
}

// Returns an error message, or nullopt. `argv` keeps everything that is not ours.
std::optional<std::string> TakeBenchFlags(std::vector<char*>& argv, BenchFlags& flags) {
  std::vector<char*> rest;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string_view argument = argv[i];
    auto value_of = [&](std::string_view name) -> std::optional<std::string_view> {
      if (argument.starts_with(std::string(name) + "=")) return argument.substr(name.size() + 1);
      if (argument == name && i + 1 < argv.size()) return std::string_view(argv[++i]);
      return std::nullopt;
    };
    if (argument.starts_with("--sizes")) {
      std::optional<std::string_view> value = value_of("--sizes");
      std::optional<std::vector<int>> sizes = value ? ParseSizes(*value) : std::nullopt;
      if (!sizes) return "--sizes wants positive integers separated by commas";
      flags.sizes = *sizes;
    } else if (argument.starts_with("--sample")) {
      std::optional<std::string_view> value = value_of("--sample");
      const std::string text = value ? std::string(*value) : "";
      char* end = nullptr;
      const long sample = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || sample < 0) return "--sample wants an integer >= 0";
      flags.sample = static_cast<int>(sample);
    } else if (argument == "--no-ipv6") {
      flags.ipv6 = false;
    } else {
      if (argument == "--help" || argument == "-h") PrintUsage();
      rest.push_back(argv[i]);
    }
  }
  argv = rest;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// In-process benchmarks.

struct Measured {
  double real_ms = 0;  // median of the repetitions, per iteration
  double cpu_ms = 0;   // CPU time of the whole process (all threads), per iteration
  double netns = 0;
};

// Console output as usual; keeps the median (or the single run) of each benchmark by name.
class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      const bool wanted =
          run.run_type == Run::RT_Aggregate ? run.aggregate_name == "median" : run.repetitions <= 1;
      if (!wanted) continue;
      Measured& measured = measured_[run.run_name.function_name];
      measured.real_ms = run.GetAdjustedRealTime() * TimeUnitToMilliseconds(run.time_unit);
      measured.cpu_ms = run.GetAdjustedCPUTime() * TimeUnitToMilliseconds(run.time_unit);
      if (auto netns = run.counters.find("netns"); netns != run.counters.end()) {
        measured.netns = netns->second.value;
      }
    }
  }

  std::optional<Measured> Find(const std::string& name) const {
    auto found = measured_.find(name);
    if (found == measured_.end()) return std::nullopt;
    return found->second;
  }

 private:
  static double TimeUnitToMilliseconds(benchmark::TimeUnit unit) {
    switch (unit) {
      case benchmark::kNanosecond:
        return 1e-6;
      case benchmark::kMicrosecond:
        return 1e-3;
      case benchmark::kMillisecond:
        return 1;
      case benchmark::kSecond:
        return 1e3;
    }
    return 1;
  }

  std::map<std::string, Measured> measured_;
};

void BenchmarkScan(benchmark::State& state, const ScanOptions& options, NetnsInspector& inspector,
                   bool with_analysis) {
  size_t netns_count = 0;
  for (auto _ : state) {
    if (Interrupted()) {
      state.SkipWithError("interrupted");
      break;
    }
    NodeSnapshot snapshot = ScanNode(options, inspector);
    netns_count = snapshot.netns.size();
    benchmark::DoNotOptimize(snapshot);
    if (with_analysis) {
      NodeAnalysis analysis = Analyze(snapshot);
      benchmark::DoNotOptimize(analysis);
    }
  }
  state.counters["netns"] = static_cast<double>(netns_count);
  state.counters["per_netns"] = benchmark::Counter(
      static_cast<double>(netns_count),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void ConfigureBenchmark(benchmark::internal::Benchmark* benchmark) {
  benchmark->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MeasureProcessCPUTime()
      ->MinTime(kMinSecondsPerRepetition)
      ->Repetitions(kRepetitions)
      ->ReportAggregatesOnly(true);
}

std::string ScanBenchmarkName(int pods, int workers) {
  return "inprocess_scan/pods:" + std::to_string(pods) + "/workers:" + std::to_string(workers);
}
std::string ReportBenchmarkName(int pods, int workers) {
  return "inprocess_scan+analyze/pods:" + std::to_string(pods) +
         "/workers:" + std::to_string(workers);
}

ScanOptions LabScanOptions(int workers) {
  ScanOptions options;
  options.discovery.proc_root.clear();
  options.discovery.netns_dirs = {"/run/netns"};
  options.discovery.name_glob = std::string(kLabPrefix) + "-*";
  options.discovery.host_netns_path = std::string("/run/netns/") + kLabPrefix + "-host";
  options.workers = workers;
  options.node_name = kLabPrefix;
  return options;
}

// ---------------------------------------------------------------------------------------------
// Shell-out baseline.

// ---------------------------------------------------------------------------------------------
// One size, then the table.

struct SizeRow {
  int pods = 0;
  std::string error;  // non-empty: the size could not be measured
  int netns = 0;      // scanned by the validation scan (pods + host)
  std::optional<Measured> scan_w1;
  std::optional<Measured> scan_w2;
  std::optional<Measured> report_w1;
  std::optional<Measured> report_w2;
  ShellOutResult shell_out;
  std::optional<ProbeResult> report_process;
  std::vector<double> report_wall_ms;
  long bench_max_rss_kb = 0;
};

double PerNetnsMicroseconds(const std::optional<Measured>& measured) {
  if (!measured || measured->netns <= 0) return 0;
  return measured->real_ms * 1000 / measured->netns;
}

long SelfMaxRssKb() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

struct Environment {
  std::string self_path;
  std::string doctor_path;  // empty: not built
  ShellOutTools shell_out;
  BenchFlags flags;
};

SizeRow MeasureSize(int pods, const Environment& env, CapturingReporter& reporter) {
  SizeRow row;
  row.pods = pods;
  lab::LabOptions options;
  options.prefix = kLabPrefix;
  options.pods = pods;
  options.backend = lab::LabBackend::kIptablesNft;
  options.ipv6 = env.flags.ipv6;
  options.dns_capture = true;

  std::printf("\n===== N = %d pods: lab up (%s, iptables-nft, %s, DNS capture) =====\n", pods,
              kLabPrefix, env.flags.ipv6 ? "IPv4+IPv6" : "IPv4 only");
  std::fflush(stdout);
  lab::ScopedLab lab(options);
  if (!lab.ok()) {
    row.error = "lab up failed: " + lab.error().message;
    std::printf("%s\n", row.error.c_str());
    return row;
  }
  std::printf("lab up in %.2f s\n", lab.node().timings.total_seconds);

  std::unique_ptr<NetnsInspector> inspector =
      MakeKernelInspector(ReadLimits{}, {.ipsets_in_host_only = true});
  const ScanOptions scan_w1 = LabScanOptions(1);
  const ScanOptions scan_w2 = LabScanOptions(2);

  // One scan up front to check what the benchmarks will measure.
  {
    NodeSnapshot snapshot = ScanNode(scan_w2, *inspector);
    NodeAnalysis analysis = Analyze(snapshot);
    size_t netns_errors = 0;
    size_t rules = 0;
    for (const NetnsSnapshot& netns : snapshot.netns) {
      netns_errors += netns.errors.size();
      for (const Table& table : netns.netfilter.tables) {
        for (const Chain& chain : table.chains) rules += chain.rules.size();
      }
    }
    const auto ambient = std::count_if(
        analysis.netns.begin(), analysis.netns.end(),
        [](const NetnsClassification& c) { return c.mode == DataplaneMode::kAmbient; });
    row.netns = static_cast<int>(snapshot.netns.size());
    std::printf(
        "validation scan: %zu netns (expected %d), %zu rules, %zu netns errors, %zu node errors, "
        "%ld classified ambient, %zu findings\n",
        snapshot.netns.size(), pods + 1, rules, netns_errors, snapshot.errors.size(),
        static_cast<long>(ambient), analysis.findings.size());
  }

  for (int workers : {1, 2}) {
    const ScanOptions& options = workers == 1 ? scan_w1 : scan_w2;
    NetnsInspector& inspector_ref = *inspector;
    ConfigureBenchmark(benchmark::RegisterBenchmark(
        ScanBenchmarkName(pods, workers).c_str(),
        [&options, &inspector_ref](benchmark::State& state) {
          BenchmarkScan(state, options, inspector_ref, /*with_analysis=*/false);
        }));
    ConfigureBenchmark(benchmark::RegisterBenchmark(
        ReportBenchmarkName(pods, workers).c_str(),
        [&options, &inspector_ref](benchmark::State& state) {
          BenchmarkScan(state, options, inspector_ref, /*with_analysis=*/true);
        }));
  }
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();
  row.scan_w1 = reporter.Find(ScanBenchmarkName(pods, 1));
  row.scan_w2 = reporter.Find(ScanBenchmarkName(pods, 2));
  row.report_w1 = reporter.Find(ReportBenchmarkName(pods, 1));
  row.report_w2 = reporter.Find(ReportBenchmarkName(pods, 2));
  if (Interrupted()) return row;

  std::printf("\nshell-out baseline: ip netns exec <ns> {");
  for (size_t t = 0; t < env.shell_out.tools.size(); ++t) {
    std::printf("%s%s", t == 0 ? "" : ", ", env.shell_out.tools[t].label.c_str());
  }
  std::printf("}, sequential\n");
  std::fflush(stdout);
  std::vector<std::string> population = {lab.node().host_netns_name};
  for (const lab::LabPod& pod : lab.node().pods) population.push_back(pod.netns_name);
  const int sample = pods > kAllNetnsUpToPods ? env.flags.sample : 0;
  row.shell_out = MeasureShellOut(population, env.shell_out, sample, Interrupted);
  const ShellOutResult& shell = row.shell_out;
  std::printf("  %s: %d of %d netns -> per netns mean %.2f ms, median %.2f ms\n",
              shell.sampled ? "SAMPLED (fixed random sample, extrapolated)" : "all netns",
              shell.netns_measured, shell.netns_total, shell.mean_netns_ms, shell.median_netns_ms);
  for (size_t t = 0; t < env.shell_out.tools.size() && t < shell.tool_mean_ms.size(); ++t) {
    std::printf("    %-24s %7.2f ms\n", env.shell_out.tools[t].label.c_str(),
                shell.tool_mean_ms[t]);
  }
  if (shell.failed_commands > 0) {
    std::printf("  %d commands failed (first: %s)\n", shell.failed_commands,
                shell.first_failure.c_str());
  }
  if (Interrupted()) return row;

  if (!env.doctor_path.empty()) {
    long max_rss_kb = 0;
    int exit_code = 0;
    std::string error;
    for (int run = 0; run < kReportRuns && !Interrupted(); ++run) {
      ProbeResult probe = ProbeRss(
          env.self_path, {env.doctor_path, "report", "--lab-prefix", kLabPrefix, "-o", "json"});
      if (!probe.ok) {
        error = probe.error;
        break;
      }
      max_rss_kb = std::max(max_rss_kb, probe.max_rss_kb);
      exit_code = probe.exit_code;
      row.report_wall_ms.push_back(probe.wall_ms);
    }
    if (error.empty() && !row.report_wall_ms.empty()) {
      row.report_process =
          ProbeResult{.ok = true, .max_rss_kb = max_rss_kb, .exit_code = exit_code};
      std::printf(
          "\nambient-doctor report --lab-prefix %s -o json (x%zu): peak RSS %.1f MB, wall "
          "median %.1f ms, exit %d\n",
          kLabPrefix, row.report_wall_ms.size(), max_rss_kb / 1024.0, Median(row.report_wall_ms),
          exit_code);
    } else {
      std::printf("\nambient-doctor report: %s\n", error.c_str());
    }
  }
  row.bench_max_rss_kb = SelfMaxRssKb();
  std::printf("bench process ru_maxrss so far: %.1f MB\nlab down\n", row.bench_max_rss_kb / 1024.0);
  return row;
}

std::string Cell(double value, const char* format, bool present = true) {
  if (!present) return "n/a";
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

double PerNetnsCpuMicroseconds(const std::optional<Measured>& measured) {
  if (!measured || measured->netns <= 0) return 0;
  return measured->cpu_ms * 1000 / measured->netns;
}

struct RowFigures {
  double w1_us = 0;
  double w2_us = 0;
  double w1_cpu_us = 0;
  double tools_node_ms = 0;
  double ratio_netns = 0;  // baseline per netns / in-process w1 per netns
  double ratio_node = 0;   // baseline whole node (sequential) / in-process w2 whole node
};

RowFigures FiguresOf(const SizeRow& row) {
  RowFigures figures;
  figures.w1_us = PerNetnsMicroseconds(row.scan_w1);
  figures.w2_us = PerNetnsMicroseconds(row.scan_w2);
  figures.w1_cpu_us = PerNetnsCpuMicroseconds(row.scan_w1);
  const ShellOutResult& shell = row.shell_out;
  if (shell.netns_measured > 0) {
    figures.tools_node_ms = shell.mean_netns_ms * shell.netns_total;
    if (figures.w1_us > 0) figures.ratio_netns = shell.mean_netns_ms * 1000 / figures.w1_us;
    if (row.scan_w2 && row.scan_w2->real_ms > 0) {
      figures.ratio_node = figures.tools_node_ms / row.scan_w2->real_ms;
    }
  }
  return figures;
}

std::string Flatness(double value, double reference) {
  return Cell((value / reference - 1) * 100, "%+.0f%%", value > 0 && reference > 0);
}

void PrintTable(const std::vector<SizeRow>& rows, const Environment& env, long probe_floor_kb,
                const std::string& load_at_start) {
  std::printf(
      "\n===================================== scan_bench summary "
      "=====================================\n");
  std::printf(
      "lab %s: iptables-nft backend, default ambient variant with DNS capture, %s; netns = N pods "
      "+ 1 host\n"
      "in-process: ScanNode over exactly the lab netns; Google Benchmark real time, median of %d "
      "repetitions (>= %.1f s each)\n"
      "baseline: `ip netns exec <ns> TOOL` for %zu tools per netns, sequential, stdin /dev/null, "
      "output drained and discarded;\n"
      "          '*' = fixed random sample of %d netns, extrapolated to all netns\n"
      "load average: %s at start, %s at end (2 CPUs; other work on the machine inflates "
      "wall times)\n\n",
      kLabPrefix, env.flags.ipv6 ? "IPv4+IPv6 rules (ip6tables dumps have content)" : "IPv4 only",
      kRepetitions, kMinSecondsPerRepetition, env.shell_out.tools.size(), env.flags.sample,
      load_at_start.c_str(), LoadAverage().c_str());

  const SizeRow* reference = nullptr;
  for (const SizeRow& row : rows) {
    if (row.error.empty() && row.scan_w1) {
      reference = &row;
      break;
    }
  }
  const RowFigures reference_figures = reference ? FiguresOf(*reference) : RowFigures{};

  std::printf("%5s %5s | %8s %8s | %7s %7s | %9s | %7s %7s | %7s %7s | %7s %7s\n", "N", "netns",
              "node ms", "node ms", "us/ns", "us/ns", "tools", "ratio", "ratio", "report", "report",
              "flat", "flat");
  std::printf("%5s %5s | %8s %8s | %7s %7s | %9s | %7s %7s | %7s %7s | %7s %7s\n", "", "", "w1",
              "w2", "w1", "w2", "ms/netns", "/netns", "node", "RSS MB", "wall ms", "w1", "w2");
  std::printf(
      "------------+-------------------+-----------------+-----------+-----------------+-----"
      "------------+----------------\n");
  for (const SizeRow& row : rows) {
    if (!row.error.empty()) {
      std::printf("%5d  %s\n", row.pods, row.error.c_str());
      continue;
    }
    const RowFigures figures = FiguresOf(row);
    const ShellOutResult& shell = row.shell_out;
    std::printf(
        "%5d %5d | %8s %8s | %7s %7s | %8s%s | %7s %7s | %7s %7s | %7s %7s\n", row.pods, row.netns,
        Cell(row.scan_w1 ? row.scan_w1->real_ms : 0, "%.2f", row.scan_w1.has_value()).c_str(),
        Cell(row.scan_w2 ? row.scan_w2->real_ms : 0, "%.2f", row.scan_w2.has_value()).c_str(),
        Cell(figures.w1_us, "%.0f", figures.w1_us > 0).c_str(),
        Cell(figures.w2_us, "%.0f", figures.w2_us > 0).c_str(),
        Cell(shell.mean_netns_ms, "%.2f", shell.netns_measured > 0).c_str(),
        shell.sampled ? "*" : " ",
        Cell(figures.ratio_netns, "%.0fx", figures.ratio_netns > 0).c_str(),
        Cell(figures.ratio_node, "%.0fx", figures.ratio_node > 0).c_str(),
        Cell(row.report_process ? row.report_process->max_rss_kb / 1024.0 : 0, "%.1f",
             row.report_process.has_value())
            .c_str(),
        Cell(Median(row.report_wall_ms), "%.1f", !row.report_wall_ms.empty()).c_str(),
        Flatness(figures.w1_us, reference_figures.w1_us).c_str(),
        Flatness(figures.w2_us, reference_figures.w2_us).c_str());
  }

  std::printf("\ndetails\n%5s | %9s %9s | %8s | %10s %9s | %9s %9s\n", "N", "+Analyze", "+Analyze",
              "CPU us/ns", "tools node", "measured", "bench RSS", "flat CPU");
  std::printf("%5s | %9s %9s | %8s | %10s %9s | %9s %9s\n", "", "w1 ms", "w2 ms", "w1", "ms",
              "netns", "MB", "w1");
  for (const SizeRow& row : rows) {
    if (!row.error.empty()) continue;
    const RowFigures figures = FiguresOf(row);
    std::printf(
        "%5d | %9s %9s | %8s | %10s %9s | %9s %9s\n", row.pods,
        Cell(row.report_w1 ? row.report_w1->real_ms : 0, "%.2f", row.report_w1.has_value()).c_str(),
        Cell(row.report_w2 ? row.report_w2->real_ms : 0, "%.2f", row.report_w2.has_value()).c_str(),
        Cell(figures.w1_cpu_us, "%.0f", figures.w1_cpu_us > 0).c_str(),
        Cell(figures.tools_node_ms, "%.0f", figures.tools_node_ms > 0).c_str(),
        (std::to_string(row.shell_out.netns_measured) + "/" +
         std::to_string(row.shell_out.netns_total))
            .c_str(),
        Cell(row.bench_max_rss_kb / 1024.0, "%.1f", row.bench_max_rss_kb > 0).c_str(),
        Flatness(figures.w1_cpu_us, reference_figures.w1_cpu_us).c_str());
  }
  std::printf(
      "\nnode ms = whole-node ScanNode (1 / 2 workers); us/ns = node ms / netns; tools ms/netns = "
      "mean per netns for all %zu tools;\n"
      "ratio /netns = tools per netns / in-process w1 per netns; ratio node = tools x netns "
      "(sequential) / in-process w2 node;\n"
      "report = `ambient-doctor report --lab-prefix %s -o json` as a child (%d runs: max "
      "ru_maxrss from wait4, median wall;\n"
      "         spawned through a small probe process, floor %.1f MB); flat = per-netns cost vs "
      "N=%s; +Analyze = ScanNode + Analyze;\n"
      "CPU us/ns = process CPU (all threads) per netns; bench RSS = this process's ru_maxrss "
      "after that size.\n",
      env.shell_out.tools.size(), kLabPrefix, kReportRuns, probe_floor_kb / 1024.0,
      reference ? std::to_string(reference->pods).c_str() : "n/a");

  std::printf("\ntargets (information, not assertions):\n");
  for (const SizeRow& row : rows) {
    if (!row.error.empty()) continue;
    const RowFigures figures = FiguresOf(row);
    std::printf(
        "  N=%-5d per-netns ratio %s (target >= 300x); per-netns w1 %s vs N=%s (target "
        "within +-30%%)",
        row.pods, Cell(figures.ratio_netns, "%.0fx", figures.ratio_netns > 0).c_str(),
        Flatness(figures.w1_us, reference_figures.w1_us).c_str(),
        reference ? std::to_string(reference->pods).c_str() : "n/a");
    if (row.pods == 250 && row.scan_w2) {
      std::printf("; whole-node w2 %.2f ms (target < 50 ms)", row.scan_w2->real_ms);
    }
    std::printf("\n");
  }
}

int Main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == kRssProbeFlag) return RunRssProbe(argc, argv);

  std::vector<char*> arguments(argv, argv + argc);
  Environment env;
  if (std::optional<std::string> error = TakeBenchFlags(arguments, env.flags)) {
    std::fprintf(stderr, "scan_bench: %s\n", error->c_str());
    PrintUsage();
    return 2;
  }
  int benchmark_argc = static_cast<int>(arguments.size());
  arguments.push_back(nullptr);
  benchmark::Initialize(&benchmark_argc, arguments.data());
  if (benchmark::ReportUnrecognizedArguments(benchmark_argc, arguments.data())) return 2;

  if (::geteuid() != 0) {
    std::fprintf(stderr, "scan_bench: needs root (creates lab network namespaces)\n");
    return 2;
  }
  env.self_path = SelfPath();
  const fs::path doctor =
      fs::path(env.self_path).parent_path().parent_path() / "agent" / "ambient-doctor";
  if (::access(doctor.c_str(), X_OK) == 0) {
    env.doctor_path = doctor.string();
  } else {
    std::printf("note: %s not built; report RSS/wall columns will be n/a\n", doctor.c_str());
  }
  Result<ShellOutTools> shell_out = FindShellOutTools();
  if (!shell_out.ok()) {
    std::fprintf(stderr, "scan_bench: %s\n", shell_out.error().message.c_str());
    return 2;
  }
  env.shell_out = *std::move(shell_out);

  InstallTerminationHandlers();

  long probe_floor_kb = 0;
  if (std::optional<std::string> true_path = FindExecutable("true")) {
    ProbeResult floor = ProbeRss(env.self_path, {*true_path});
    if (floor.ok) probe_floor_kb = floor.max_rss_kb;
  }

  const std::string load_at_start = LoadAverage();
  CapturingReporter reporter;
  std::vector<SizeRow> rows;
  for (int pods : env.flags.sizes) {
    if (Interrupted()) break;
    rows.push_back(MeasureSize(pods, env, reporter));
  }
  if (Interrupted()) {
    std::printf("\ninterrupted: lab %s removed; partial results follow\n", kLabPrefix);
  }
  PrintTable(rows, env, probe_floor_kb, load_at_start);
  benchmark::Shutdown();
  return Interrupted() ? 130 : 0;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) { return ad::bench::Main(argc, argv); }
