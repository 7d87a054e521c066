// Helpers the whole-node benches share: running a child the way a checker would, medians, and
// finding tools on PATH. Benchmarks measure and print; they never assert.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/result.h"

namespace ad::bench {

using Clock = std::chrono::steady_clock;

double MillisecondsBetween(Clock::time_point start, Clock::time_point end);
double Median(std::vector<double> values);
double Mean(const std::vector<double>& values);

struct ChildResult {
  std::string spawn_error;  // non-empty: the child never ran
  int exit_code = -1;       // 128 + signal when killed
  std::string stdout_text;  // only with OutputHandling::kKeepStdout
  long max_rss_kb = 0;      // ru_maxrss from wait4
  double wall_ms = 0;       // spawn to reaped
  double cpu_ms = 0;        // user + system time of the child (all threads), from wait4

  bool ran() const { return spawn_error.empty(); }
};

enum class OutputHandling : uint8_t {
  kDrainAndDiscard,  // stdout+stderr into one pipe, read to EOF and dropped (a checker's view)
  kDevNull,          // stdout+stderr to /dev/null (the child writes, nobody reads)
  kKeepStdout,       // stdout captured, stderr inherited
};

// posix_spawn (clone(CLONE_VM|CLONE_VFORK) in glibc, the way Go's os/exec and Python's subprocess
// start children), stdin from /dev/null, then wait4. `argv[0]` must be an absolute path.
ChildResult RunChild(const std::vector<std::string>& argv, OutputHandling output);

std::optional<std::string> FindExecutable(const std::string& name);

// The shell-out baseline: what a tool-based checker runs per netns, each under
// `ip netns exec <netns>`.
struct Tool {
  std::string label;
  std::vector<std::string> argv;  // absolute path first
};

struct ShellOutTools {
  std::string ip_path;
  std::vector<Tool> tools;  // iptables-legacy-save, iptables-nft-save, ip6tables-legacy-save,
                            // ip6tables-nft-save, nft -j list ruleset
};

// The five tools from PATH (and the sbin directories); the error names the first one missing.
Result<ShellOutTools> FindShellOutTools();

struct ShellOutResult {
  int netns_total = 0;
  int netns_measured = 0;
  bool sampled = false;
  double mean_netns_ms = 0;
  double median_netns_ms = 0;
  std::vector<double> tool_mean_ms;  // same order as the tools
  int failed_commands = 0;
  std::string first_failure;
};

// Runs every tool once per netns, sequentially. With 0 < sample < population size, a fixed
// random sample (the same netns every run) is measured instead. Stops early when `interrupted`.
ShellOutResult MeasureShellOut(const std::vector<std::string>& netns_names,
                               const ShellOutTools& tools, int sample,
                               const std::function<bool()>& interrupted);

// "0.52 0.58 0.59" from /proc/loadavg.
std::string LoadAverage();

// User + system time of this process so far (all threads).
double ProcessCpuMilliseconds();

// /proc/self/exe.
std::string SelfPath();

}  // namespace ad::bench
