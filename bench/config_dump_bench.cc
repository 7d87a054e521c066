// Peak RSS and CPU of parsing ztunnel's /config_dump: the agent's RapidJSON SAX reader
// (ztunnel::ParseConfigDump) against the hand-written tree parser it replaced (the baseline in
// legacy_config_dump.cc, kept in bench/ only for this comparison), in one run, on the dumps of a
// node with 250 pods in a mesh of 250 and of 5,000 workloads, written by ztunnel-sim's
// /config_dump writer. The new parser runs as the daemon runs it: keeping this node's HBONE
// workloads only (ConfigDumpFilter); the old one kept every workload.
//
//   config_dump_bench [--runs 20] [--sizes 250,5000] [--local 250]
//
// No root needed. Each (dump, parser) pair runs in a fresh child process with the daemon's malloc
// settings (two arenas, 64 KiB mmap threshold, 128 KiB trim threshold). The child holds the dump
// text as the daemon holds the HTTP body, resets its peak RSS (/proc/self/clear_refs "5"),
// parses once and reads VmHWM: the RSS that parse added on top of the text, its result included
// ("peak"); VmRSS while the result is still held ("result"). Then it parses --runs more times
// for the CPU figures: thread CPU time per parse, median and min. "floor" is RapidJSON's reader
// alone with every event dropped: what no handler can go below.
#include <malloc.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "bench/legacy_config_dump.h"
#include "model/json_reader.h"
#include "sources/ztunnel/admin_parse.h"
#include "ztunnel_sim/ztunnel_sim.h"

namespace ad::bench {
namespace {

struct Options {
  int runs = 20;
  std::vector<int> sizes = {250, 5000};  // workloads in the mesh
  int local = 250;                       // of them on this node
};

// The dump of a node with `local` pods (all Up, spread over 50 namespaces with one service account
// each, so 50 certificates, one IPv4 address per pod) in a mesh of `workloads` pods: "workloads"
// (XDS, cluster-wide) lists all of them, the others on 100 other nodes; "workloadState" and
// "certificates" only this node's, as ztunnel serves them.
sim::ZtunnelSimStatus Proxies(int count) {
  sim::ZtunnelSimStatus status;
  for (int i = 0; i < count; ++i) {
    char uid[40];
    std::snprintf(uid, sizeof(uid), "%08x-1f0a-4c55-9a3e-%012x", 0x5b0c0000 + i, i);
    const std::string ns = "ns-" + std::to_string(i % 50);
    status.proxies.push_back({uid,
                              "pod-" + std::to_string(i) + "-6d5f8b7c9-x2kqp",
                              ns,
                              "sa-" + ns,
                              "Up",
                              {"10." + std::to_string(1 + i / 65536) + "." +
                               std::to_string(i / 256 % 256) + "." + std::to_string(i % 256)},
                              4026532000u + static_cast<uint64_t>(i),
                              7});
  }
  return status;
}

// The value of the first "workloads" member of a dump ztunnel-sim wrote: its array, brackets
// included (strings skipped while matching them).
std::string_view WorkloadsMember(std::string_view dump) {
  const size_t begin = dump.find('[', dump.find("\"workloads\""));
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < dump.size(); ++i) {
    const char c = dump[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && --depth == 0) {
      return dump.substr(begin, i + 1 - begin);
    }
  }
  return {};
}

std::string MakeDump(int workloads, int local) {
  sim::ZtunnelSimOptions options;
  options.zds_socket_path = "/var/run/ztunnel/ztunnel.sock";
  options.node_name = "node-1";
  const auto now = std::chrono::system_clock::now();
  std::string dump = sim::ConfigDumpJsonFor(Proxies(local), options, now);
  if (workloads <= local) return dump;
  std::string all(WorkloadsMember(sim::ConfigDumpJsonFor(Proxies(workloads), options, now)));
  const std::string here = "\"node-1\"";  // each workload's "node" value, the only such string
  size_t at = 0;
  for (int i = 0; (at = all.find(here, at)) != std::string::npos; ++i, at += here.size()) {
    if (i >= local) all.replace(at, here.size(), "\"node-" + std::to_string(2 + i % 100) + "\"");
  }
  const std::string_view mine = WorkloadsMember(dump);
  dump.replace(static_cast<size_t>(mine.data() - dump.data()), mine.size(), all);
  return dump;
}

long StatusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  const std::string prefix = std::string(field) + ":";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return std::atol(line.c_str() + prefix.size());
  }
  return -1;
}

double ThreadCpuMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

using Parse = std::function<Result<ztunnel::ConfigDump>(std::string_view)>;

struct Figures {
  long peak_kb = 0;    // VmHWM after the first parse minus VmRSS before it
  long result_kb = 0;  // VmRSS with the result held minus VmRSS before
  double cpu_median_ms = 0;
  double cpu_min_ms = 0;
  size_t workloads = 0;  // kept
  size_t seen = 0;       // read (the new parser keeps this node's only): both must read the same
  size_t states = 0;
  size_t certificates = 0;
};

// In the child: the measurements, written to `fd` as one line.
void Measure(const std::string& dump, const Parse& parse, int runs, int fd) {
  Figures f;
  {
    std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
    const long before = StatusKb("VmRSS");
    auto result = parse(dump);
    f.peak_kb = StatusKb("VmHWM") - before;
    f.result_kb = StatusKb("VmRSS") - before;
    if (result.ok()) {
      f.workloads = result->workloads.size();
      f.seen = std::max(result->workloads_seen, result->workloads.size());
      f.states = result->workload_state.size();
      f.certificates = result->certificates.size();
    }
  }
  std::vector<double> cpu;
  for (int i = 0; i < runs; ++i) {
    const double start = ThreadCpuMs();
    auto result = parse(dump);
    cpu.push_back(ThreadCpuMs() - start);
  }
  f.cpu_median_ms = Median(cpu);
  f.cpu_min_ms = *std::min_element(cpu.begin(), cpu.end());
  char line[256];
  const int n = std::snprintf(line, sizeof(line), "%ld %ld %.3f %.3f %zu %zu %zu %zu\n", f.peak_kb,
                              f.result_kb, f.cpu_median_ms, f.cpu_min_ms, f.workloads, f.seen,
                              f.states, f.certificates);
  (void)!::write(fd, line, static_cast<size_t>(n));
}

// Forks a fresh child for one (dump, parser) pair; nullopt when it failed.
std::optional<Figures> InChild(const std::string& dump, const Parse& parse, int runs) {
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    Measure(dump, parse, runs, fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
    text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Figures f;
  std::istringstream in(text);
  if (!(in >> f.peak_kb >> f.result_kb >> f.cpu_median_ms >> f.cpu_min_ms >> f.workloads >>
        f.seen >> f.states >> f.certificates)) {
    return std::nullopt;
  }
  return f;
}

bool ParseArgs(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--runs" && i + 1 < argc) {
      options.runs = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--sizes" && i + 1 < argc) {
      options.sizes.clear();
      std::istringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');)
        options.sizes.push_back(std::stoi(item));
    } else if (arg == "--local" && i + 1 < argc) {
      options.local = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: config_dump_bench [--runs 20] [--sizes 250,5000] [--local 250]\n");
      return false;
    }
  }
  return true;
}

int Run(const Options& options) {
  // The daemon's malloc settings (Daemon's constructor); a fork keeps them.
  (void)::mallopt(M_ARENA_MAX, 2);
  (void)::mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  (void)::mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  const Parse old_parse = [](std::string_view text) { return legacy::ParseConfigDump(text); };
  // As the daemon parses it: this node's HBONE workloads kept.
  const Parse new_parse = [](std::string_view text) {
    return ztunnel::ParseConfigDump(text, {.node = "node-1"});
  };
  // RapidJSON's reader alone, every event dropped: the floor under "new".
  const Parse floor_parse = [](std::string_view text) -> Result<ztunnel::ConfigDump> {
    rapidjson::BaseReaderHandler<> ignore;
    if (!ReadJson(text, ignore).ok()) return SourceError{SourceKind::kZtunnelConfigDump, "", 0};
    return ztunnel::ConfigDump{};
  };
  std::printf(
      "/config_dump parse: hand-written tree parser (old) vs RapidJSON SAX (new); %d runs\n",
      options.runs);
  std::printf("%-10s %9s  %-5s %9s %9s %9s %9s  %s\n", "workloads", "dump KiB", "", "peak KiB",
              "result", "cpu ms", "min ms", "kept/read workloads, states, certificates");
  int failures = 0;
  for (int size : options.sizes) {
    const std::string dump = MakeDump(size, std::min(size, options.local));
    std::optional<Figures> figures[3];
    const char* labels[3] = {"old", "new", "floor"};
    const Parse* parsers[3] = {&old_parse, &new_parse, &floor_parse};
    for (int p = 0; p < 3; ++p) {
      figures[p] = InChild(dump, *parsers[p], options.runs);
      if (!figures[p]) {
        std::printf("%-10d %s: the child failed\n", size, labels[p]);
        ++failures;
        continue;
      }
      const Figures& f = *figures[p];
      std::printf("%-10d %9zu  %-5s %9ld %9ld %9.2f %9.2f  %zu/%zu, %zu, %zu\n", size,
                  dump.size() / 1024, labels[p], f.peak_kb, f.result_kb, f.cpu_median_ms,
                  f.cpu_min_ms, f.workloads, f.seen, f.states, f.certificates);
    }
    if (figures[0] && figures[1]) {
      const Figures& o = *figures[0];
      const Figures& n = *figures[1];
      const bool same =
          o.seen == n.seen && o.states == n.states && o.certificates == n.certificates;
      std::printf(
          "%-10d new/old: peak %.2fx, cpu %.2fx (%.1fx faster); same entries: %s\n", size,
          o.peak_kb > 0 ? static_cast<double>(n.peak_kb) / static_cast<double>(o.peak_kb) : 0.0,
          n.cpu_median_ms / o.cpu_median_ms, o.cpu_median_ms / n.cpu_median_ms,
          same ? "yes" : "NO");
      failures += same ? 0 : 1;
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) {
  ad::bench::Options options;
  if (!ad::bench::ParseArgs(argc, argv, options)) return 2;
  return ad::bench::Run(options);
}
