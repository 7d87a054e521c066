// ZDS cross-check benchmark: on a lab node with N pods handed off to ztunnel-sim, the cost the
// ZDS sources (sock_diag, /proc fd inventory, ztunnel admin) add to a node scan, the peak RSS of
// `ambient-doctor report`, and detection latency from fault injection to finding:
//   - ztunnel-sim killed while scanning every second → ZDS_DISCONNECTED
//   - cni-sim deadlocked (never reads the hello) → ZDS_STALL after the stall threshold
// Measurements only, never assertions.
// Usage: zds_bench [--pods N] [--runs R] [--threshold-s S] [--prefix P]
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/history.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "scan/scanner.h"
#include "scan/zds_node_source.h"
#include "scan/ztunnel_node_source.h"
#include "scan/ztunnel_resource_node_source.h"

namespace ad {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// `with_resources`: also ztunnel's fds, limits and CLOSE_WAIT sockets, as ComposeScan
// adds them.
ScanOptions LabScan(const lab::LabNode& node, bool with_zds, bool with_resources = false) {
  ScanOptions scan;
  scan.discovery.proc_root.clear();
  scan.discovery.netns_dirs = {"/run/netns"};
  scan.discovery.name_glob = node.prefix + "-*";
  scan.discovery.host_netns_path = node.host_netns_path;
  scan.workers = 2;
  if (with_zds) {
    ZdsSourceOptions zds;
    zds.socket_path = node.zds.socket_path;
    auto zds_source = std::make_shared<ZdsNodeSource>(zds);
    scan.node_sources.push_back(zds_source);
    if (with_resources) {
      scan.node_sources.push_back(std::make_shared<ZtunnelResourceNodeSource>(
          ZtunnelResourceOptions{}, [zds_source](int pid) -> const std::vector<uint64_t>* {
            return zds_source->ZtunnelSocketInodes(pid);
          }));
    }
    ZtunnelAdminOptions admin;
    admin.extra_netns_paths = {node.zds.ztunnel_netns_path};
    scan.node_sources.push_back(std::make_shared<ZtunnelAdminNodeSource>(admin));
  }
  return scan;
}

double MedianScanMs(const ScanOptions& scan, int runs) {
  auto inspector = MakeKernelInspector(ReadLimits{});
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    NodeSnapshot snapshot = ScanNode(scan, *inspector);
    NodeAnalysis analysis = Analyze(snapshot);
    times.push_back(Ms(start, Clock::now()));
  }
  return Median(times);
}

bool HasCode(const NodeAnalysis& analysis, const std::string& code) {
  return std::any_of(analysis.findings.begin(), analysis.findings.end(),
                     [&](const Finding& f) { return f.code_name() == code; });
}

// Scans every `interval` with one History until `code` opens; returns ms since `since`.
double WaitForFinding(const ScanOptions& scan, const std::string& code, Clock::time_point since,
                      std::chrono::milliseconds interval, AnalysisOptions options,
                      std::chrono::seconds give_up) {
  auto inspector = MakeKernelInspector(ReadLimits{});
  History history;
  while (Clock::now() - since < give_up) {
    const auto tick = Clock::now();
    NodeSnapshot snapshot = ScanNode(scan, *inspector);
    NodeAnalysis analysis = Analyze(snapshot, options, &history);
    if (HasCode(analysis, code)) return Ms(since, Clock::now());
    std::this_thread::sleep_until(tick + interval);
  }
  return -1;
}

std::string ProbeRss(const std::string& doctor, const std::string& prefix) {
  const std::string probe =
      std::filesystem::path(doctor).parent_path().parent_path() / "bench" / "scan_bench";
  auto out = lab::RunCommand(
      {{probe, "--rss-probe", doctor, "report", "--lab-prefix", prefix, "--no-cri", "-o", "json"},
       "",
       ""});
  if (!out.ok() || out->exit_code != 0) return "n/a";
  long rss_kb = 0;
  double wall_ms = 0;
  int rc = 0;
  if (std::sscanf(out->out.c_str(), "%ld %lf %d", &rss_kb, &wall_ms, &rc) != 3) return "n/a";
  char text[96];
  std::snprintf(text, sizeof(text), "%.1f MB peak RSS, %.0f ms wall, exit %d", rss_kb / 1024.0,
                wall_ms, rc);
  return text;
}

int Main(int argc, char** argv) {
  int pods = 250;
  int runs = 9;
  int threshold_s = 5;
  std::string prefix = "adz";  // lab prefixes: <prefix>b, <prefix>d
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--pods") pods = std::atoi(argv[i + 1]);
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
    if (flag == "--threshold-s") threshold_s = std::atoi(argv[i + 1]);
    if (flag == "--prefix") prefix = argv[i + 1];
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "zds_bench: run as root (it creates network namespaces)\n");
    return 2;
  }
  const std::string doctor =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "agent" /
       "ambient-doctor")
          .string();
  std::printf("zds_bench: %d pods, %d runs per figure, 2 workers\n", pods, runs);

  {
    lab::LabOptions options;
    options.prefix = prefix + "b";
    options.pods = pods;
    options.zds = true;
    lab::ScopedLab lab(options);
    if (!lab.ok()) {
      std::fprintf(stderr, "lab up failed: %s\n", lab.error().message.c_str());
      return 1;
    }
    const double rules_only = MedianScanMs(LabScan(lab.node(), false), runs);
    const double with_zds = MedianScanMs(LabScan(lab.node(), true), runs);
    const double with_resources = MedianScanMs(LabScan(lab.node(), true, true), runs);
    std::printf("\nwhole-node scan + analysis, median of %d:\n", runs);
    std::printf("  rules only              %8.2f ms\n", rules_only);
    std::printf("  rules + ZDS + ztunnel   %8.2f ms   (ZDS cross-check adds %.2f ms)\n", with_zds,
                with_zds - rules_only);
    std::printf(
        "  + ztunnel resources     %8.2f ms   (fds, limits, CLOSE_WAIT add %.2f ms, %.1f %%)\n",
        with_resources, with_resources - with_zds, 100.0 * (with_resources - with_zds) / with_zds);
    std::printf("  report binary: %s\n", ProbeRss(doctor, lab.node().prefix).c_str());

    // The resource source alone on one ZDS snapshot: scan-to-scan noise on a shared
    // machine is larger than its cost, so it is timed on its own (steady state: the first
    // collection of a process counts no CLOSE_WAIT and is left out).
    {
      ScanOptions zds_only = LabScan(lab.node(), true);
      auto inspector = MakeKernelInspector(ReadLimits{});
      NodeSnapshot snapshot = ScanNode(zds_only, *inspector);
      auto zds_source = std::static_pointer_cast<ZdsNodeSource>(zds_only.node_sources[0]);
      ZtunnelResourceNodeSource resources(ZtunnelResourceOptions{},
                                          [zds_source](int pid) -> const std::vector<uint64_t>* {
                                            return zds_source->ZtunnelSocketInodes(pid);
                                          });
      resources.Collect(snapshot);
      std::vector<double> times;
      for (int i = 0; i < runs; ++i) {
        const auto start = Clock::now();
        resources.Collect(snapshot);
        times.push_back(Ms(start, Clock::now()));
      }
      std::printf(
          "  ztunnel resource source alone: %.2f ms median (%.1f %% of the ZDS scan), "
          "%llu CLOSE_WAIT dumps in %d collections\n",
          Median(times), 100.0 * Median(times) / with_zds,
          static_cast<unsigned long long>(resources.close_wait_dumps()), runs + 1);
    }

    // Runtime fault injection: kill ztunnel-sim, scan every second until ZDS_DISCONNECTED.
    const auto killed = Clock::now();
    ::kill(lab.node().zds.ztunnel_sim_pid, SIGKILL);
    const double disconnected =
        WaitForFinding(LabScan(lab.node(), true), "ZDS_DISCONNECTED", killed,
                       std::chrono::milliseconds(1000), {}, std::chrono::seconds(30));
    std::printf("\ndetection latency (scan interval 1 s):\n");
    std::printf("  ztunnel killed → ZDS_DISCONNECTED   %8.0f ms\n", disconnected);
  }
  {
    lab::LabOptions options;
    options.prefix = prefix + "d";
    options.pods = pods;
    options.faults = {{lab::FaultKind::kZdsDeadlock, std::nullopt}};
    const auto injected = Clock::now();
    lab::ScopedLab lab(options);
    if (!lab.ok()) {
      std::fprintf(stderr, "lab up failed: %s\n", lab.error().message.c_str());
      return 1;
    }
    AnalysisOptions analysis;
    analysis.zds_stall_threshold_ms = threshold_s * 1000;
    const double stall =
        WaitForFinding(LabScan(lab.node(), true), "ZDS_STALL", injected,
                       std::chrono::milliseconds(1000), analysis, std::chrono::seconds(120));
    std::printf(
        "  cni-sim deadlock → ZDS_STALL        %8.0f ms (threshold %d s; lab up included)\n", stall,
        threshold_s);
  }
  return 0;
}

}  // namespace
}  // namespace ad

int main(int argc, char** argv) { return ad::Main(argc, argv); }
