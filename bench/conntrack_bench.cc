// The probe path's cost: the ctnetlink dump of unreplied probe connections.
//   1. dump cost in a test netns: an idle table, then 100 000 unrelated entries, with the kernel
//      filter (CTA_FILTER on the reply tuple + CTA_STATUS) vs without (the whole table parsed in
//      user space, what a kernel refusing the filter gets);
//   2. a 250-pod lab scan without and with the conntrack node source (--pods N).
// Medians of --runs runs, wall and CPU (process user+sys, so the kernel's walk counts), with the
// load average beside them. Needs root; creates and removes its own netns/lab (prefix adctb).
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "scan/conntrack_node_source.h"
#include "scan/inspector.h"
#include "scan/scanner.h"
#include "sources/conntrack/conntrack_reader.h"
#include "sources/netns/netns_guard.h"

namespace ad {
namespace {

constexpr char kPrefix[] = "adctb";

struct Cost {
  double wall_ms = 0;
  double cpu_ms = 0;
};

double CpuMs() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000.0 +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000.0;
}

Cost Median(const std::function<void()>& run, int runs) {
  std::vector<double> wall;
  std::vector<double> cpu;
  for (int i = 0; i < runs; ++i) {
    const double cpu_before = CpuMs();
    const auto start = std::chrono::steady_clock::now();
    run();
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    cpu.push_back(CpuMs() - cpu_before);
  }
  return {bench::Median(wall), bench::Median(cpu)};
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

bool Sh(const std::vector<std::string>& argv, const std::string& netns = "",
        const std::string& input = "") {
  Result<lab::CommandOutput> out = lab::RunCommand({argv, input, netns});
  return out.ok() && out->exit_code == 0;
}

void FillUnrelated(const std::string& netns_path, int count) {
  std::thread([&] {
    Result<NetnsGuard> guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) return;
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    for (int i = 0; i < count; ++i) {
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(9);
      to.sin_addr.s_addr = htonl((127u << 24) | static_cast<uint32_t>(i + 1));
      (void)::sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    }
    ::close(fd);
  }).join();
}

void DumpCost(int runs) {
  const std::string name = std::string(kPrefix) + "-ct";
  const std::string path = "/run/netns/" + name;
  Sh({"ip", "netns", "del", name});
  if (!Sh({"ip", "netns", "add", name})) {
    std::printf("cannot create netns %s\n", name.c_str());
    return;
  }
  Sh({"ip", "link", "set", "lo", "up"}, path);
  Sh({"nft", "-f", "-"}, path,
     "table inet b {\n chain out {\n  type filter hook output priority 0;\n  ct state new "
     "counter\n }\n}\n");
  Sh({"sysctl", "-q", "-w", "net.netfilter.nf_conntrack_udp_timeout=600"}, path);

  ProbeConntrackOptions kernel;
  ProbeConntrackOptions user;
  user.force_user_space = true;
  auto report = [&](const char* table) {
    ProbeConntrackState check_k = ReadProbeConntrackIn(path, kernel);
    ProbeConntrackState check_u = ReadProbeConntrackIn(path, user);
    const Cost k = Median([&] { (void)ReadProbeConntrackIn(path, kernel); }, runs);
    const Cost u = Median([&] { (void)ReadProbeConntrackIn(path, user); }, runs);
    std::printf("%-34s kernel filter: %8.3f ms wall %8.3f ms cpu (%s, %lu examined)\n", table,
                k.wall_ms, k.cpu_ms, check_k.errors.empty() ? "ok" : "ERROR",
                static_cast<unsigned long>(check_k.examined));
    std::printf("%-34s user space:    %8.3f ms wall %8.3f ms cpu (%s, %lu examined)\n", "",
                u.wall_ms, u.cpu_ms, check_u.errors.empty() ? "ok" : "ERROR",
                static_cast<unsigned long>(check_u.examined));
  };
  std::printf("\n== dump cost, median of %d, load %s ==\n", runs, LoadAverage().c_str());
  report("idle table (0 entries in the netns)");
  FillUnrelated(path, 100000);
  report("100000 unrelated entries");
  std::printf("load after: %s\n", LoadAverage().c_str());
  Sh({"ip", "netns", "del", name});
}

void ScanCost(int pods, int runs) {
  lab::LabOptions options;
  options.prefix = kPrefix;
  options.pods = pods;
  options.backend = lab::LabBackend::kIptablesNft;
  options.kubelet_prober = true;  // answered probes: the healthy steady state
  std::printf("\n== %d-pod lab scan (iptables-nft, kubelet-prober on), median of %d ==\n", pods,
              runs);
  lab::ScopedLab lab(options);
  if (!lab.ok()) {
    std::printf("lab up failed: %s\n", lab.error().message.c_str());
    return;
  }
  ScanOptions without;
  without.discovery.proc_root.clear();
  without.discovery.netns_dirs = {"/run/netns"};
  without.discovery.name_glob = std::string(kPrefix) + "-*";
  without.discovery.host_netns_path = lab.node().host_netns_path;
  without.workers = 2;
  ScanOptions with = without;
  with.node_sources.push_back(std::make_shared<ConntrackNodeSource>(ProbeConntrackOptions{}));
  std::unique_ptr<NetnsInspector> inspector =
      MakeKernelInspector(ReadLimits{}, {.ipsets_in_host_only = true});
  (void)ScanNode(with, *inspector);  // warm up
  std::vector<double> a;
  std::vector<double> b;
  std::vector<double> dumps;
  for (int i = 0; i < runs; ++i) {  // interleaved, so load drifts hit both alike
    auto start = std::chrono::steady_clock::now();
    (void)ScanNode(without, *inspector);
    a.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count());
    start = std::chrono::steady_clock::now();
    NodeSnapshot snapshot = ScanNode(with, *inspector);
    b.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count());
    dumps.push_back(snapshot.probe_conntrack.dump_ms);
  }
  const double ma = bench::Median(a);
  const double mb = bench::Median(b);
  std::printf("without conntrack source: %8.2f ms\n", ma);
  std::printf("with conntrack source:    %8.2f ms (%+.1f %%; dump itself %.3f ms)\n", mb,
              100.0 * (mb - ma) / ma, bench::Median(dumps));
  std::printf("load: %s\n", LoadAverage().c_str());
}

}  // namespace
}  // namespace ad

int main(int argc, char** argv) {
  int pods = 250;
  int runs = 21;
  bool scan = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--pods" && i + 1 < argc) {
      pods = std::atoi(argv[++i]);
    } else if (arg == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--no-scan") {
      scan = false;
    } else {
      std::fprintf(stderr, "usage: conntrack_bench [--pods N] [--runs N] [--no-scan]\n");
      return 2;
    }
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "conntrack_bench: needs root\n");
    return 2;
  }
  ad::DumpCost(runs);
  if (scan) ad::ScanCost(pods, runs);
  return 0;
}
