// One-shot speed, side by side in one run on one lab node: the real `ambient-doctor report`
// binary (json and table), its start-up, the in-process phases (scan, analysis, rendering), the
// kernel's bare nf_tables dump floor (nft_dump_floor) and the five-command shell-out baseline.
//
//   oneshot_bench [--pods 250] [--runs 15] [--sample 20] [--prefix adshot] [--compare BINARY]
//                 [--compare-args "FLAG ..."]
//   oneshot_bench --cause-check-runs N [--pods 250] [--prefix adshot] [--fault KIND[:POD]]...
//
// --compare times another ambient-doctor build (e.g. an older commit) the same way, interleaved
// with this one, so a before/after pair shares the machine's load. --compare-args adds report
// flags to the compared runs (space-separated), e.g. the same binary with a check turned off:
//   --compare build/agent/ambient-doctor --compare-args "--cni-conf-dir off --no-nft-probe"
//
// --cause-check-runs N measures instead what the cause checks add to one one-shot scan: a --zds lab
// with the kubelet prober (so every check has its inputs: in-pod listeners, ztunnel, conntrack
// entries, the lab host's CNI config and nft), then N rounds of a fresh in-process scan + analysis
// (sources composed anew each time, as a `report` does) per arm, arms interleaved and rotated:
// every cause check off, all on, all on but the conntrack read, all on but ztunnel's resources.
// Prints median, quartiles and range of wall and CPU time per arm, and the paired per-round
// difference. --fault adds a lab fault, e.g. probe-unreplied:0 (entries stay in the lab host's
// conntrack, so every scan walks the hash, as on a node whose host netns always has entries).
//
// Needs root: brings up a lab of N pods (Istio default v4 rules with DNS capture, iptables-nft)
// plus a one-netns lab for start-up, and removes both. Prints; never asserts. Targets are
// shown as information.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "bench/bench_support.h"
#include "cli/report_render.h"
#include "engine/engine.h"
#include "lab/lab.h"
#include "scan/inspector.h"
#include "scan/scanner.h"

namespace ad::bench {
namespace {

namespace fs = std::filesystem;

constexpr unsigned kSampleSeed = 20240611;  // the same netns are sampled every run
constexpr int kReportWorkers = 2;           // the report's default

volatile std::sig_atomic_t g_interrupted = 0;
void OnTerminationSignal(int /*signal_number*/) { g_interrupted = 1; }
bool Interrupted() { return g_interrupted != 0; }

struct Flags {
  int pods = 250;
  int runs = 15;
  int sample = 20;
  std::string prefix = "adshot";
  std::string compare;                    // another ambient-doctor binary, timed alongside
  std::vector<std::string> compare_args;  // extra report flags of the compared runs
  int cause_check_runs = 0;               // >0: the cause checks' on/off comparison only
  std::vector<lab::FaultSpec> faults;     // --fault KIND[:POD] (cause-check mode's lab)
};

std::optional<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (i + 1 >= argc) return std::nullopt;
    const char* value = argv[++i];
    if (argument == "--pods") {
      flags.pods = std::atoi(value);
    } else if (argument == "--runs") {
      flags.runs = std::max(1, std::atoi(value));
    } else if (argument == "--sample") {
      flags.sample = std::max(1, std::atoi(value));
    } else if (argument == "--prefix") {
      flags.prefix = value;
    } else if (argument == "--compare") {
      flags.compare = value;
    } else if (argument == "--cause-check-runs") {
      flags.cause_check_runs = std::max(1, std::atoi(value));
    } else if (argument == "--fault") {
      Result<lab::FaultSpec> fault = lab::ParseFault(value);
      if (!fault.ok()) return std::nullopt;
      flags.faults.push_back(*fault);
    } else if (argument == "--compare-args") {
      std::string_view rest = value;
      while (!rest.empty()) {
        const size_t space = rest.find(' ');
        if (space != 0) flags.compare_args.emplace_back(rest.substr(0, space));
        if (space == std::string_view::npos) break;
        rest.remove_prefix(space + 1);
      }
    } else {
      return std::nullopt;
    }
  }
  if (flags.pods < 1 || flags.prefix.empty()) return std::nullopt;
  return flags;
}

lab::LabOptions IstioDefaultLab(const std::string& prefix, int pods) {
  lab::LabOptions options;
  options.prefix = prefix;
  options.pods = pods;
  options.backend = lab::LabBackend::kIptablesNft;
  options.ipv6 = false;
  options.dns_capture = true;
  return options;
}

ScanOptions LabScanOptions(const std::string& prefix, int workers) {
  ScanOptions options;
  options.discovery.proc_root.clear();
  options.discovery.netns_dirs = {"/run/netns"};
  options.discovery.name_glob = prefix + "-*";
  options.discovery.host_netns_path = "/run/netns/" + prefix + "-host";
  options.workers = workers;
  options.node_name = prefix;
  return options;
}

// Medians over runs, in milliseconds: wall time and CPU time (all threads). CPU time is what a
// loaded machine distorts least; wall time is what a user waits.
struct Timing {
  double wall_ms = 0;
  double cpu_ms = 0;
};

template <typename Body>
Timing MedianTiming(int runs, Body body) {
  std::vector<double> wall;
  std::vector<double> cpu;
  for (int run = 0; run < runs && !Interrupted(); ++run) {
    const double cpu_start = ProcessCpuMilliseconds();
    const Clock::time_point start = Clock::now();
    body();
    wall.push_back(MillisecondsBetween(start, Clock::now()));
    cpu.push_back(ProcessCpuMilliseconds() - cpu_start);
  }
  return {Median(wall), Median(cpu)};
}

struct ChildTiming {
  Timing timing;
  int exit_code = -1;
  std::string error;
};

// fork+exec+wait of the real binary, output drained through a pipe like a checker reads it.
ChildTiming TimeChild(const std::vector<std::string>& argv, int runs) {
  ChildTiming result;
  std::vector<double> wall;
  std::vector<double> cpu;
  for (int run = 0; run < runs && !Interrupted(); ++run) {
    ChildResult child = RunChild(argv, OutputHandling::kDrainAndDiscard);
    if (!child.ran()) {
      result.error = child.spawn_error;
      return result;
    }
    result.exit_code = child.exit_code;
    wall.push_back(child.wall_ms);
    cpu.push_back(child.cpu_ms);
  }
  result.timing = {Median(wall), Median(cpu)};
  return result;
}

struct Floor {
  double per_netns_us = 0;
  Timing node;
  std::string error;
};

Floor MeasureFloor(const std::string& floor_path, const std::string& prefix, int runs) {
  Floor floor;
  ChildResult child =
      RunChild({floor_path, "--prefix", prefix, "--rounds", std::to_string(runs), "--threads", "1"},
               OutputHandling::kKeepStdout);
  const size_t line = child.stdout_text.find("netns=");
  size_t netns = 0;
  size_t bytes = 0;
  if (!child.ran() || child.exit_code != 0 || line == std::string::npos ||
      std::sscanf(child.stdout_text.c_str() + line,
                  "netns=%zu per_netns_us=%lf node_ms=%lf bytes=%zu cpu_ms=%lf", &netns,
                  &floor.per_netns_us, &floor.node.wall_ms, &bytes, &floor.node.cpu_ms) != 5) {
    floor.error = child.ran() ? "nft_dump_floor exited " + std::to_string(child.exit_code)
                              : child.spawn_error;
  }
  return floor;
}

std::string Verdict(bool met) { return met ? "met" : "MISSED"; }

// The engine config `report --lab-prefix` builds from the lab's flags file, with the cause checks'
// node sources switched by `arm`.
struct CauseCheckArm {
  const char* name;
  bool in_pod_dns = true;  // UDP 15053 lookups (DNS_CAPTURE_BROKEN); lo is read with routes
  bool conntrack = true;   // PROBE_PATH_BROKEN
  bool ztunnel_resources = true;
  bool cni = true;  // CNI_CHAIN_BROKEN
  bool nft = true;  // NFT_BACKEND_UNUSABLE
};

EngineConfig CauseCheckConfig(const lab::LabNode& node, const CauseCheckArm& arm) {
  EngineConfig config;
  config.discovery.proc_root.clear();
  config.discovery.netns_dirs = {"/run/netns"};
  config.discovery.name_glob = node.prefix + "-*";
  config.discovery.host_netns_path = node.host_netns_path;
  config.workers = kReportWorkers;
  config.node_name = node.prefix;
  config.host_root = node.host_root;
  config.zds_socket = node.zds.socket_path;
  config.ztunnel_netns = {node.zds.ztunnel_netns_path};
  config.cri_endpoints = {"unix://" + node.zds.cri_socket_path};
  config.probe_conntrack = arm.conntrack;
  config.ztunnel_resources = arm.ztunnel_resources;
  if (!arm.cni) config.cni_conf_dir.clear();
  config.nft_userspace = arm.nft;
  return config;
}

struct Spread {
  double median = 0, p25 = 0, p75 = 0, min = 0, max = 0;
};

Spread SpreadOf(std::vector<double> values) {
  Spread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const auto at = [&](double q) { return values[static_cast<size_t>(q * (values.size() - 1))]; };
  s.median = Median(values);
  s.p25 = at(0.25);
  s.p75 = at(0.75);
  s.min = values.front();
  s.max = values.back();
  return s;
}

int CauseCheckMain(const Flags& flags) {
  lab::LabOptions options = IstioDefaultLab(flags.prefix, flags.pods);
  options.zds = true;
  options.kubelet_prober = true;
  options.faults = flags.faults;
  std::printf("lab %s: %d pods, iptables-nft, ZDS emulators, kubelet prober, %zu fault(s)\n",
              flags.prefix.c_str(), flags.pods, flags.faults.size());
  std::fflush(stdout);
  lab::ScopedLab lab(options);
  if (!lab.ok()) {
    std::fprintf(stderr, "oneshot_bench: lab up failed: %s\n", lab.error().message.c_str());
    return 1;
  }
  const std::vector<CauseCheckArm> arms = {
      {.name = "every cause check off",
       .in_pod_dns = false,
       .conntrack = false,
       .ztunnel_resources = false,
       .cni = false,
       .nft = false},
      {.name = "every cause check on (report default)"},
      {.name = "on, but no conntrack read", .conntrack = false},
      {.name = "on, but no ztunnel resources", .ztunnel_resources = false},
  };
  struct Samples {
    std::vector<double> wall, cpu;
    size_t findings = 0;
    std::string codes;
    std::string conntrack;  // how the conntrack source read: "kernel" (a walk) or "empty"
  };
  std::vector<Samples> samples(arms.size());
  const std::string load_at_start = LoadAverage();
  const auto once = [&](size_t a, bool keep) {
    const EngineConfig config = CauseCheckConfig(lab.node(), arms[a]);
    const double cpu_start = ProcessCpuMilliseconds();
    const Clock::time_point start = Clock::now();
    const ScanOptions scan = ComposeScan(config);
    std::unique_ptr<NetnsInspector> inspector = MakeKernelInspector(
        ReadLimits{}, {.ipsets_in_host_only = true, .dns_udp_listeners = arms[a].in_pod_dns});
    const NodeSnapshot snapshot = ScanNode(scan, *inspector);
    const NodeAnalysis analysis = Analyze(snapshot, config.analysis);
    const double wall = MillisecondsBetween(start, Clock::now());
    const double cpu = ProcessCpuMilliseconds() - cpu_start;
    if (!keep) return;
    samples[a].wall.push_back(wall);
    samples[a].cpu.push_back(cpu);
    samples[a].findings = analysis.findings.size();
    if (snapshot.probe_conntrack.collected &&
        samples[a].conntrack.find(snapshot.probe_conntrack.filter) == std::string::npos) {
      samples[a].conntrack += " " + snapshot.probe_conntrack.filter;
    }
    samples[a].codes.clear();
    for (const Finding& f : analysis.findings) {
      if (samples[a].codes.find(f.code_name()) == std::string::npos) {
        samples[a].codes +=
            std::string(samples[a].codes.empty() ? "" : " ") + std::string(f.code_name());
      }
    }
  };
  for (size_t a = 0; a < arms.size(); ++a) once(a, false);  // warm-up: caches, lab settling
  for (int round = 0; round < flags.cause_check_runs && !Interrupted(); ++round) {
    for (size_t k = 0; k < arms.size(); ++k) once((k + round) % arms.size(), true);
  }
  std::printf(
      "\n=== oneshot_bench --cause-check-runs %d: %d pods + host, ZDS lab, "
      "scan + analysis in-process, 2 workers ===\n"
      "load average: %s at start, %s at end (2 CPUs)\n\n",
      flags.cause_check_runs, flags.pods, load_at_start.c_str(), LoadAverage().c_str());
  std::printf("%-44s %28s %28s  %s\n", "arm", "wall ms: median [p25-p75] min-max",
              "CPU ms: median [p25-p75] min-max", "findings");
  std::vector<Spread> wall(arms.size()), cpu(arms.size());
  for (size_t a = 0; a < arms.size(); ++a) {
    wall[a] = SpreadOf(samples[a].wall);
    cpu[a] = SpreadOf(samples[a].cpu);
    std::printf("%-44s %7.1f [%5.1f-%5.1f] %5.1f-%5.1f %7.1f [%5.1f-%5.1f] %5.1f-%5.1f  %zu %s\n",
                arms[a].name, wall[a].median, wall[a].p25, wall[a].p75, wall[a].min, wall[a].max,
                cpu[a].median, cpu[a].p25, cpu[a].p75, cpu[a].min, cpu[a].max, samples[a].findings,
                samples[a].codes.c_str());
  }
  const auto added = [&](size_t a, const std::vector<Spread>& s) {
    return s[a].median - s[0].median;
  };
  std::printf("\nadded by every cause check: wall %+.1f ms (%+.1f %%), CPU %+.1f ms (%+.1f %%)\n",
              added(1, wall), 100 * added(1, wall) / wall[0].median, added(1, cpu),
              100 * added(1, cpu) / cpu[0].median);
  // Per round, the arms ran back to back: the paired difference cancels the load's drift.
  const auto paired = [&](const std::vector<double> Samples::*series, size_t with = 1,
                          size_t without = 0) {
    std::vector<double> diffs;
    const std::vector<double>& on = samples[with].*series;
    const std::vector<double>& off = samples[without].*series;
    for (size_t i = 0; i < std::min(on.size(), off.size()); ++i) diffs.push_back(on[i] - off[i]);
    return SpreadOf(diffs);
  };
  const Spread paired_wall = paired(&Samples::wall);
  const Spread paired_cpu = paired(&Samples::cpu);
  std::printf(
      "paired per round (on - off): wall %+.1f ms [%+.1f..%+.1f], CPU %+.1f ms [%+.1f..%+.1f] "
      "(median [p25..p75]); CPU %+.1f %% of the checks-off scan\n",
      paired_wall.median, paired_wall.p25, paired_wall.p75, paired_cpu.median, paired_cpu.p25,
      paired_cpu.p75, 100 * paired_cpu.median / cpu[0].median);
  std::printf(
      "conntrack reads of the all-on arm:%s (kernel: a filtered walk of the hash; empty: "
      "nf_conntrack_count 0, no dump)\n",
      samples[1].conntrack.c_str());
  const Spread conntrack_cpu = paired(&Samples::cpu, 1, 2);
  const Spread resources_cpu = paired(&Samples::cpu, 1, 3);
  std::printf(
      "  of which, paired (all on - the arm without it), CPU median [p25..p75]: the conntrack "
      "read %+.1f ms [%+.1f..%+.1f], ztunnel resources %+.1f ms [%+.1f..%+.1f]\n",
      conntrack_cpu.median, conntrack_cpu.p25, conntrack_cpu.p75, resources_cpu.median,
      resources_cpu.p25, resources_cpu.p75);
  std::printf("target: <= 10 %% of the scan: %s (CPU), %s (wall)\n",
              Verdict(added(1, cpu) <= 0.10 * cpu[0].median).c_str(),
              Verdict(added(1, wall) <= 0.10 * wall[0].median).c_str());
  return Interrupted() ? 130 : 0;
}

int Main(int argc, char** argv) {
  std::optional<Flags> flags = ParseFlags(argc, argv);
  if (!flags) {
    std::fprintf(stderr,
                 "usage: oneshot_bench [--pods 250] [--runs 15] [--sample 20] [--prefix adshot] "
                 "[--compare BINARY] [--compare-args \"FLAG ...\"] [--cause-check-runs N [--fault "
                 "KIND[:POD]]...]\n");
    return 2;
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "oneshot_bench: needs root (creates lab network namespaces)\n");
    return 2;
  }
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP})
    std::signal(signal_number, OnTerminationSignal);
  if (flags->cause_check_runs > 0) return CauseCheckMain(*flags);
  const fs::path build_dir = fs::path(SelfPath()).parent_path().parent_path();
  const std::string doctor = (build_dir / "agent" / "ambient-doctor").string();
  const std::string floor_program = (build_dir / "bench" / "nft_dump_floor").string();
  for (const std::string& path : {doctor, floor_program}) {
    if (::access(path.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "oneshot_bench: %s not built\n", path.c_str());
      return 2;
    }
  }
  const std::string load_at_start = LoadAverage();
  const int runs = flags->runs;
  const std::string single_prefix = flags->prefix + "one";

  std::printf("lab %s: %d pods, iptables-nft, Istio default v4 rules with DNS capture\n",
              flags->prefix.c_str(), flags->pods);
  std::fflush(stdout);
  lab::ScopedLab lab(IstioDefaultLab(flags->prefix, flags->pods));
  lab::ScopedLab single(IstioDefaultLab(single_prefix, 0));  // the host netns only
  if (!lab.ok() || !single.ok()) {
    std::fprintf(stderr, "oneshot_bench: lab up failed: %s\n",
                 (lab.ok() ? single.error() : lab.error()).message.c_str());
    return 1;
  }
  const int netns_count = flags->pods + 1;

  // (c) the real binary: whole report, both formats, then start-up; with --compare, the other
  // binary's run of each figure directly follows this one's.
  struct BinaryFigures {
    ChildTiming json, table, single, version;
  };
  const auto measure = [&](const std::string& binary, const std::vector<std::string>& extra) {
    const auto report = [&](const std::string& prefix, const char* format) {
      std::vector<std::string> argv = {binary, "report", "--lab-prefix", prefix, "-o", format};
      argv.insert(argv.end(), extra.begin(), extra.end());
      return TimeChild(argv, runs);
    };
    return BinaryFigures{report(flags->prefix, "json"), report(flags->prefix, "table"),
                         report(single_prefix, "json"), TimeChild({binary, "version"}, runs)};
  };
  std::vector<BinaryFigures> measured;
  for (int half = 0; half < 2; ++half) {  // two halves, alternating, against drifting load
    measured.push_back(measure(doctor, {}));
    if (!flags->compare.empty()) measured.push_back(measure(flags->compare, flags->compare_args));
  }
  auto merged = [&](size_t first) {
    const size_t stride = flags->compare.empty() ? 1 : 2;
    BinaryFigures figures = measured[first];
    auto pick = [](const ChildTiming& a, const ChildTiming& b) {
      ChildTiming result = a.exit_code < 0 || !a.error.empty() ? a : b;
      result.timing = {(a.timing.wall_ms + b.timing.wall_ms) / 2,
                       (a.timing.cpu_ms + b.timing.cpu_ms) / 2};
      return result;
    };
    const BinaryFigures& second = measured[first + stride];
    figures.json = pick(figures.json, second.json);
    figures.table = pick(figures.table, second.table);
    figures.single = pick(figures.single, second.single);
    figures.version = pick(figures.version, second.version);
    return figures;
  };
  const BinaryFigures ours = merged(0);
  const std::optional<BinaryFigures> other =
      flags->compare.empty() ? std::nullopt : std::optional(merged(1));
  for (const BinaryFigures* figures : {&ours, other ? &*other : &ours}) {
    for (const ChildTiming* timing :
         {&figures->json, &figures->table, &figures->single, &figures->version}) {
      if (!timing->error.empty() || timing->exit_code < 0 || timing->exit_code > 1) {
        std::fprintf(stderr, "oneshot_bench: ambient-doctor failed: exit %d %s\n",
                     timing->exit_code, timing->error.c_str());
        return 1;
      }
    }
  }
  const ChildTiming& report_json = ours.json;
  const ChildTiming& report_table = ours.table;
  const ChildTiming& report_single = ours.single;
  const ChildTiming& version = ours.version;

  // The same work in-process, phase by phase.
  std::unique_ptr<NetnsInspector> inspector =
      MakeKernelInspector(ReadLimits{}, {.ipsets_in_host_only = true});
  const ScanOptions scan_w1 = LabScanOptions(flags->prefix, 1);
  const ScanOptions scan_w2 = LabScanOptions(flags->prefix, kReportWorkers);
  NodeSnapshot snapshot = ScanNode(scan_w2, *inspector);
  NodeAnalysis analysis = Analyze(snapshot);
  const Timing scan_1 = MedianTiming(runs, [&] { ScanNode(scan_w1, *inspector); });
  const Timing scan_2 = MedianTiming(runs, [&] { ScanNode(scan_w2, *inspector); });
  const Timing analyze = MedianTiming(runs, [&] { analysis = Analyze(snapshot); });
  // Both renderers take the report model, as the CLI does: BuildReport is part of the cost.
  const Timing json =
      MedianTiming(runs, [&] { cli::RenderReportJson(api::BuildReport(snapshot, analysis)); });
  const Timing table = MedianTiming(runs, [&] {
    cli::RenderReportTable(api::BuildReport(snapshot, analysis), cli::RenderOptions{});
  });

  // (b) the floor and (a) the shell-out baseline.
  const Floor floor = MeasureFloor(floor_program, flags->prefix, runs);
  if (!floor.error.empty()) {
    std::fprintf(stderr, "oneshot_bench: %s\n", floor.error.c_str());
    return 1;
  }
  Result<ShellOutTools> tools = FindShellOutTools();
  if (!tools.ok()) {
    std::fprintf(stderr, "oneshot_bench: %s\n", tools.error().message.c_str());
    return 1;
  }
  std::vector<std::string> population = {lab.node().host_netns_name};
  for (const lab::LabPod& pod : lab.node().pods) population.push_back(pod.netns_name);
  const ShellOutResult shell = MeasureShellOut(population, *tools, flags->sample, Interrupted);

  const double scan_per_netns_us = scan_1.wall_ms * 1000 / netns_count;
  const double scan_cpu_per_netns_us = scan_1.cpu_ms * 1000 / netns_count;
  const double floor_cpu_per_netns_us = floor.node.cpu_ms * 1000 / netns_count;
  std::printf(
      "\n=== oneshot_bench: %d netns (%d pods + host), %d runs each, medians ===\n"
      "load average: %s at start, %s at end (2 CPUs)\n\n",
      netns_count, flags->pods, runs, load_at_start.c_str(), LoadAverage().c_str());
  std::printf("%-52s %9s %9s\n", "figure", "wall ms", "CPU ms");
  auto row = [](const char* label, const Timing& timing) {
    std::printf("%-52s %9.2f %9.2f\n", label, timing.wall_ms, timing.cpu_ms);
  };
  row("report -o json (fork+exec+wait, output drained)", report_json.timing);
  row("report -o table", report_table.timing);
  row("start-up: report on a 1-netns lab", report_single.timing);
  row("start-up: version", version.timing);
  if (other) {
    row("  --compare binary: report -o json", other->json.timing);
    row("  --compare binary: report -o table", other->table.timing);
    row("  --compare binary: report on a 1-netns lab", other->single.timing);
    row("  --compare binary: version", other->version.timing);
  }
  row("in-process ScanNode, 2 workers (report default)", scan_2);
  row("in-process ScanNode, 1 worker", scan_1);
  row("in-process Analyze", analyze);
  row("in-process RenderReportJson", json);
  row("in-process RenderReportTable", table);
  row("floor: bare nft dump of every netns, 1 thread", floor.node);
  std::printf("%-52s %9.2f\n", "shell-out: 5 commands, mean per netns", shell.mean_netns_ms);
  std::printf("  (%d of %d netns%s)\n", shell.netns_measured, shell.netns_total,
              shell.failed_commands > 0 ? ("; FAILED: " + shell.first_failure).c_str() : "");
  std::printf(
      "\nper netns (us): floor %.1f (median of single reads; CPU %.1f), scan 1 worker %.1f "
      "(CPU %.1f), shell-out %.0f\n",
      floor.per_netns_us, floor_cpu_per_netns_us, scan_per_netns_us, scan_cpu_per_netns_us,
      shell.mean_netns_ms * 1000);
  std::printf("\nratios\n");
  std::printf("%-52s %8.2fx (CPU %.2fx)\n", "scan per netns / floor per netns",
              scan_per_netns_us / floor.per_netns_us,
              scan_cpu_per_netns_us / floor_cpu_per_netns_us);
  std::printf("%-52s %8.2fx\n", "report json wall / floor whole node",
              report_json.timing.wall_ms / floor.node.wall_ms);
  std::printf("%-52s %8.0fx\n", "shell-out per netns / floor per netns",
              shell.mean_netns_ms * 1000 / floor.per_netns_us);
  std::printf("%-52s %8.0fx\n", "shell-out per netns / scan per netns",
              shell.mean_netns_ms * 1000 / scan_per_netns_us);
  std::printf("\ntargets (information, not assertions)\n");
  std::printf(
      "  report json <= 40 ms: %s; report table <= 40 ms: %s; start-up (1-netns report) <= 5 ms: "
      "%s; scan per netns within 1.5x of the floor: %s\n",
      Verdict(report_json.timing.wall_ms <= 40).c_str(),
      Verdict(report_table.timing.wall_ms <= 40).c_str(),
      Verdict(report_single.timing.wall_ms <= 5).c_str(),
      Verdict(scan_per_netns_us <= 1.5 * floor.per_netns_us).c_str());
  return Interrupted() ? 130 : 0;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) { return ad::bench::Main(argc, argv); }
