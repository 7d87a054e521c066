// Capture and replay, side by side with the one-shot report in one run on one lab node: the real
// binary's `report --local -o json` (the baseline), `capture --local -o FILE`, and `report --from
// FILE -o json`, interleaved round by round so they share the machine's load; the capture's size
// (and with --redact-ips). Targets: capture <= 5 MiB and <= 2x the report's time; replay <= the
// report's time.
//
//   capture_bench [--pods 250] [--runs 11] [--prefix adcap] [--zds] [--kube]
//
// Needs root (the lab); the replays run as root too (what they cost does not depend on it).
// Prints; never asserts.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "lab/lab.h"

namespace ad::bench {
namespace {

struct Flags {
  int pods = 250;
  int runs = 11;
  std::string prefix = "adcap";
  bool zds = false;
  bool kube = false;
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (arg == "--pods") flags.pods = std::atoi(value().c_str());
    if (arg == "--runs") flags.runs = std::atoi(value().c_str());
    if (arg == "--prefix") flags.prefix = value();
    if (arg == "--zds") flags.zds = true;
    if (arg == "--kube") flags.kube = true;
  }
  return flags;
}

struct Arm {
  std::string name;
  std::vector<std::string> argv;
  std::vector<double> wall_ms, cpu_ms, rss_kb;
  int failures = 0;
};

void Print(const Arm& arm, const Arm& baseline) {
  const double wall = Median(arm.wall_ms);
  std::printf("%-34s wall %8.1f ms (%.2fx the report)  cpu %8.1f ms  max RSS %6.1f MiB%s\n",
              arm.name.c_str(), wall, wall / Median(baseline.wall_ms), Median(arm.cpu_ms),
              Median(arm.rss_kb) / 1024.0,
              arm.failures ? ("  [" + std::to_string(arm.failures) + " failed]").c_str() : "");
}

long FileBytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long>(st.st_size) : -1;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) {
  using namespace ad::bench;
  const Flags flags = ParseFlags(argc, argv);
  if (::geteuid() != 0) {
    std::fprintf(stderr, "capture_bench: needs root (lab netns)\n");
    return 2;
  }
  ad::lab::LabOptions options;
  options.prefix = flags.prefix;
  options.pods = flags.pods;
  options.zds = flags.zds;
  options.kube = flags.kube;
  ad::lab::ScopedLab lab(options);
  if (!lab.ok()) {
    std::fprintf(stderr, "capture_bench: lab: %s\n", lab.error().message.c_str());
    return 1;
  }
  const std::string doctor =
      SelfPath().substr(0, SelfPath().rfind("/bench/")) + "/agent/ambient-doctor";
  const std::string file = "/tmp/" + flags.prefix + ".capture";
  const std::string redacted = "/tmp/" + flags.prefix + "-redacted.capture";
  const std::vector<std::string> scope = {"--lab-prefix", flags.prefix};
  auto with = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.begin(), doctor);
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  std::vector<Arm> arms = {
      {"report --local -o json (baseline)", with({"report", "--local", "-o", "json"}, scope)},
      {"capture --local -o FILE", with({"capture", "--local", "-o", file}, scope)},
      {"report --from FILE -o json", with({"report", "--from", file, "-o", "json"}, {})},
      {"capture --local --redact-ips",
       with({"capture", "--local", "--redact-ips", "-o", redacted}, scope)}};
  std::printf("capture_bench: %d pods%s%s, %d rounds, load %s\n", flags.pods,
              flags.zds ? " + ZDS" : "", flags.kube ? " + Kubernetes API" : "", flags.runs,
              LoadAverage().c_str());
  (void)RunChild(arms[1].argv, OutputHandling::kDevNull);  // the file the replays read
  for (int round = 0; round < flags.runs; ++round) {
    for (size_t k = 0; k < arms.size(); ++k) {
      Arm& arm = arms[(k + static_cast<size_t>(round)) % arms.size()];  // rotate the order
      const ChildResult r = RunChild(arm.argv, OutputHandling::kDrainAndDiscard);
      if (!r.ran() || r.exit_code == 2) ++arm.failures;
      arm.wall_ms.push_back(r.wall_ms);
      arm.cpu_ms.push_back(r.cpu_ms);
      arm.rss_kb.push_back(static_cast<double>(r.max_rss_kb));
    }
  }
  for (const Arm& arm : arms) Print(arm, arms[0]);
  std::printf(
      "capture file: %.2f MiB (%ld bytes); with --redact-ips: %.2f MiB  [target <= 5 MiB]\n",
      FileBytes(file) / 1048576.0, FileBytes(file), FileBytes(redacted) / 1048576.0);
  std::printf("load after: %s\n", LoadAverage().c_str());
  std::remove(file.c_str());
  std::remove(redacted.c_str());
  return 0;
}
