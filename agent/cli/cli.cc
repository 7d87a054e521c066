#include "cli/cli.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "cli/flags.h"
#include "cli/report_render.h"
#include "cli/rules_render.h"
#include "model/json.h"
#include "scan/scanner.h"

namespace ad::cli {
namespace {

constexpr const char* kVersion = "0.1.0";
constexpr int kExitScanFailed = 2;

constexpr const char* kTopUsage =
    R"(ambient-doctor: is every pod on this node really in the Istio ambient mesh?

Usage: ambient-doctor <command> [flags]

Commands:
  report     Scan every network namespace of the node and print the report (exit 0 healthy,
             1 findings at warning or above, 2 scan failed).
  rules      Print the normalized netfilter rules and policy routes of one netns.
  findings   List every finding code with its severity and meaning.
  version    Print the version.

Run "ambient-doctor <command> --help" for the flags of a command.
)";

void SetupLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("ambient-doctor");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

void AddCommonFlags(FlagSet& flags) {
  flags.Add({.name = "output",
             .short_name = 'o',
             .value_name = "FORMAT",
             .default_text = "table",
             .help = "Output format: table or json."});
  flags.Add({.name = "log-level",
             .value_name = "LEVEL",
             .default_text = "warn",
             .help = "Log level on stderr: trace, debug, info, warn, error, off."});
}

void AddDiscoveryFlags(FlagSet& flags) {
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .default_text = "/proc",
             .help = "procfs to scan for process netns (use /host/proc in a pod)."});
  flags.Add({.name = "no-proc",
             .takes_value = false,
             .help = "Do not scan processes; only netns bind mounts."});
  flags.Add({.name = "netns-dir",
             .repeatable = true,
             .value_name = "DIR",
             .default_text = "/var/run/netns and /run/containerd/io.containerd.grpc.v1.cri/netns",
             .help = "Directory of netns bind mounts."});
  flags.Add({.name = "host-netns",
             .value_name = "PATH",
             .default_text = "<proc-root>/1/ns/net",
             .help = "The node's host network namespace."});
  flags.Add({.name = "netns-match",
             .value_name = "GLOB",
             .help = "Only bind mounts whose file name matches this glob."});
  flags.Add({.name = "lab",
             .takes_value = false,
             .help = "Scan the embedded lab node (scripts/lab up): shorthand for --no-proc "
                     "--netns-dir /run/netns --netns-match 'adlab-*' --host-netns "
                     "/run/netns/adlab-host."});
  flags.Add({.name = "lab-prefix",
             .value_name = "NAME",
             .default_text = "adlab",
             .help = "Name prefix of the lab node to scan (implies --lab)."});
}

DiscoveryOptions DiscoveryFromFlags(const FlagSet& flags) {
  DiscoveryOptions d;
  if (flags.Has("lab") || flags.Has("lab-prefix")) {
    std::string prefix = flags.Get("lab-prefix", "adlab");
    d.proc_root.clear();
    d.netns_dirs = {"/run/netns"};
    d.name_glob = prefix + "-*";
    d.host_netns_path = "/run/netns/" + prefix + "-host";
  }
  if (flags.Has("proc-root")) d.proc_root = flags.Get("proc-root");
  if (flags.Has("no-proc")) d.proc_root.clear();
  if (flags.Has("netns-dir")) d.netns_dirs = flags.GetAll("netns-dir");
  if (flags.Has("host-netns")) d.host_netns_path = flags.Get("host-netns");
  if (flags.Has("netns-match")) d.name_glob = flags.Get("netns-match");
  return d;
}

bool UseColor(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  return ::isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
}

// Returns nullopt when the flag set asked for help or failed (after printing), else continues.
std::optional<int> ParseOrExit(FlagSet& flags, const std::vector<std::string>& args,
                               const std::vector<std::string>& formats = {"table", "json"}) {
  if (auto err = flags.Parse(args)) {
    std::fprintf(stderr, "ambient-doctor: %s\n", err->c_str());
    return kExitScanFailed;
  }
  if (flags.Has("help")) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  std::string out = flags.Get("output", "table");
  if (std::find(formats.begin(), formats.end(), out) == formats.end()) {
    std::string allowed;
    for (const auto& f : formats) allowed += (allowed.empty() ? "" : ", ") + f;
    std::fprintf(stderr, "ambient-doctor: unknown output format \"%s\" (one of: %s)\n", out.c_str(),
                 allowed.c_str());
    return kExitScanFailed;
  }
  return std::nullopt;
}

int RunReport(const std::vector<std::string>& args) {
  FlagSet flags("report", "[flags]",
                "Scans every network namespace of the node in-process (iptables-legacy, "
                "iptables-nft and nftables; IPv4 and IPv6; policy routes) and judges each against "
                "Istio's ambient rule sets.");
  AddDiscoveryFlags(flags);
  AddCommonFlags(flags);
  flags.Add({.name = "workers",
             .value_name = "N",
             .default_text = "2",
             .help = "Threads that inspect netns in parallel."});
  flags.Add({.name = "color",
             .value_name = "WHEN",
             .default_text = "auto",
             .help = "Colour: auto (only on a TTY), always, never."});
  flags.Add({.name = "istio-only",
             .takes_value = false,
             .help = "Hide netns without Istio state and without findings."});
  if (auto rc = ParseOrExit(flags, args)) return *rc;
  SetupLogging(flags.Get("log-level", "warn"));

  ScanOptions scan;
  scan.discovery = DiscoveryFromFlags(flags);
  try {
    scan.workers = std::max(1, std::stoi(flags.Get("workers", "2")));
  } catch (const std::exception&) {
    std::fprintf(stderr, "ambient-doctor: --workers needs a number\n");
    return kExitScanFailed;
  }
  if (::geteuid() != 0) {
    spdlog::warn("not running as root: entering other network namespaces will likely fail");
  }
  auto inspector = MakeKernelInspector(ReadLimits{});
  NodeSnapshot snapshot = ScanNode(scan, *inspector);
  size_t readable = 0;
  for (const auto& ns : snapshot.netns) readable += ns.unreadable ? 0 : 1;
  if (snapshot.netns.empty() || readable == 0) {
    std::fprintf(
        stderr, "ambient-doctor: scan could not run: %zu netns found, none readable%s\n",
        snapshot.netns.size(),
        ::geteuid() != 0 ? " (run as root: CAP_SYS_ADMIN and CAP_NET_ADMIN are needed)" : "");
    for (const auto& e : snapshot.errors) {
      std::fprintf(stderr, "  %s: %s\n", e.source.c_str(), e.message.c_str());
    }
    return kExitScanFailed;
  }
  NodeAnalysis analysis = Analyze(snapshot);
  if (flags.Get("output", "table") == "json") {
    std::fputs(RenderReportJson(snapshot, analysis).c_str(), stdout);
  } else {
    RenderOptions render;
    render.color = UseColor(flags.Get("color", "auto"));
    render.show_all_netns = !flags.Has("istio-only");
    std::fputs(RenderReportTable(snapshot, analysis, render).c_str(), stdout);
  }
  return ReportExitCode(analysis);
}

int RunRules(const std::vector<std::string>& args) {
  FlagSet flags("rules", "(--netns PATH | --pid PID) [flags]",
                "Prints the normalized rule set of one network namespace: every backend, family, "
                "table and chain, ipsets, policy rules and the routes of table 100.");
  flags.Add({.name = "netns",
             .value_name = "PATH",
             .help = "Netns bind mount or /proc/<pid>/ns/net to read."});
  flags.Add({.name = "pid", .value_name = "PID", .help = "Read the netns of this process."});
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .default_text = "/proc",
             .help = "procfs used to resolve --pid."});
  AddCommonFlags(flags);
  if (auto rc = ParseOrExit(flags, args)) return *rc;
  SetupLogging(flags.Get("log-level", "warn"));

  std::string path = flags.Get("netns");
  if (flags.Has("pid")) path = flags.Get("proc-root", "/proc") + "/" + flags.Get("pid") + "/ns/net";
  if (path.empty() || (flags.Has("pid") && flags.Has("netns"))) {
    std::fprintf(stderr, "ambient-doctor rules: give exactly one of --netns PATH or --pid PID\n");
    return kExitScanFailed;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "ambient-doctor rules: stat(%s): %s\n", path.c_str(),
                 std::strerror(errno));
    return kExitScanFailed;
  }
  NetnsRecord record;
  record.dev = st.st_dev;
  record.inode = st.st_ino;
  record.paths = {path};
  auto inspector = MakeKernelInspector(ReadLimits{});
  NetnsSnapshot ns = inspector->Inspect(record);
  NetnsClassification c = Classify(ns);
  if (flags.Get("output", "table") == "json") {
    std::fputs(RenderRulesJson(ns, c).c_str(), stdout);
  } else {
    std::fputs(RenderRulesText(ns, c).c_str(), stdout);
  }
  return ns.unreadable ? kExitScanFailed : 0;
}

int RunFindings(const std::vector<std::string>& args) {
  FlagSet flags("findings", "[-o table|json|markdown]",
                "Lists every finding code the agent can emit, with severity and meaning.");
  AddCommonFlags(flags);
  if (auto rc = ParseOrExit(flags, args, {"table", "json", "markdown"})) return *rc;
  std::string out = flags.Get("output", "table");
  if (out == "json") {
    JsonWriter j;
    j.BeginArray();
    for (const auto& c : AllFindingCodes()) {
      j.BeginObject().Field("code", c.code).Field("severity", SeverityName(c.severity));
      j.Field("meaning", c.meaning).EndObject();
    }
    j.EndArray();
    std::fputs((j.str() + "\n").c_str(), stdout);
  } else if (out == "markdown") {
    std::fputs("| code | severity | meaning |\n|---|---|---|\n", stdout);
    for (const auto& c : AllFindingCodes()) {
      std::printf("| `%.*s` | %.*s | %.*s |\n", static_cast<int>(c.code.size()), c.code.data(),
                  static_cast<int>(SeverityName(c.severity).size()),
                  SeverityName(c.severity).data(), static_cast<int>(c.meaning.size()),
                  c.meaning.data());
    }
  } else {
    for (const auto& c : AllFindingCodes()) {
      std::printf("%-22.*s %-9.*s %.*s\n", static_cast<int>(c.code.size()), c.code.data(),
                  static_cast<int>(SeverityName(c.severity).size()),
                  SeverityName(c.severity).data(), static_cast<int>(c.meaning.size()),
                  c.meaning.data());
    }
  }
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kTopUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitScanFailed : 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  if (command == "report") return RunReport(args);
  if (command == "rules") return RunRules(args);
  if (command == "findings") return RunFindings(args);
  if (command == "version" || command == "--version") {
    std::printf("ambient-doctor %s\n", kVersion);
    return 0;
  }
  std::fprintf(stderr, "ambient-doctor: unknown command \"%s\"\n\n%s", command.c_str(), kTopUsage);
  return kExitScanFailed;
}

}  // namespace ad::cli
