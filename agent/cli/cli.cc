#include "cli/cli.h"

#include <cstdio>
#include <string>
#include <vector>

#include "base/agent_version.h"
#include "cli/command_common.h"
#include "cli/flows_command.h"
#include "cli/plugin_command.h"
#include "report/report_policy.h"

namespace ad::cli {
namespace {

const char* const kVersion = AgentVersion();  // CMake PROJECT_VERSION (base/agent_version.h)

constexpr const char* kTopUsage =
    R"(ambient-doctor: is every pod on this node really in the Istio ambient mesh?

Usage: ambient-doctor <command> [flags]

Commands:
  report     Print the node's report: the daemon's (with history) when it answers on
             --api-socket, else a local scan of every network namespace (exit 0 healthy,
             1 findings at warning or above, 2 scan failed).
  explain    explain pod NAMESPACE/NAME: one pod's whole story on this node (should it be in
             the mesh and why, its netns, rules, ZDS hand-off, listeners, flows, findings).
  watch      Print one line per finding opened or resolved: the daemon's stream, else
             periodic local rescans.
  serve      Run as the node daemon: scan at start and on an interval, keep finding history,
             log one line per change (the gRPC API and metrics attach to it).
  rules      Print the normalized netfilter rules and policy routes of one netns (read by the
             daemon when it answers, else locally; the same output).
  capture    Write this node's scan to one file (capture -o FILE) that report --from FILE and
             explain pod --from FILE judge anywhere, without root.
  findings   List every finding code with its severity and meaning.
  version    Print the version.
  flows      Trace HBONE (:15008) connections with eBPF for a while; print open and recent flows.
  kubectl    The kubectl plugin (status, explain pod) across the cluster's nodes, through kubectl;
             also run as `kubectl ambient-doctor` (this binary named kubectl-ambient_doctor).

Run "ambient-doctor <command> --help" for the flags of a command.
)";

}  // namespace

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string_view program = argc > 0 ? argv[0] : "";
  if (program.substr(program.rfind('/') + 1).starts_with(kKubectlPluginName)) {
    return RunKubectlPlugin(args);
  }
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kTopUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitScanFailed : 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  if (command == "report") return RunReport(args);
  if (command == "explain") return RunExplain(args);
  if (command == "watch") return RunWatch(args);
  if (command == "serve") return RunServe(args, kVersion);
  if (command == "rules") return RunRules(args);
  if (command == "findings") return RunFindings(args);
  if (command == "capture") return RunCapture(args);
  if (command == "flows") return RunFlows(args);
  if (command == "kubectl") return RunKubectlPlugin(args);
  if (command == "version" || command == "--version") {
    std::printf("ambient-doctor %s\n", AgentVersionText().c_str());
    return 0;
  }
  std::fprintf(stderr, "ambient-doctor: unknown command \"%s\"\n\n%s", command.c_str(), kTopUsage);
  return kExitScanFailed;
}

}  // namespace ad::cli
