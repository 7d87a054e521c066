#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "analysis/analysis.h"
#include "api/report_proto.h"
#include "cli/command_common.h"
#include "cli/report_render.h"
#include "cli/rules_render.h"
#include "report/report_policy.h"
#include "scan/netns_read.h"

namespace ad::cli {
namespace {

// The flags of `rules`.
struct RulesConfig {
  std::string netns;
  std::string pid;
  std::string proc_root = "/proc";
  CommonConfig common;
  ClientConfig client;
  std::string from;  // a capture instead of the kernel
};

// The netns of a capture named by one of its paths or by its inode number.
const NetnsSnapshot* FindCapturedNetns(const NodeSnapshot& snapshot, const std::string& name) {
  for (const NetnsSnapshot& ns : snapshot.netns) {
    if (std::to_string(ns.netns.inode) == name) return &ns;
    for (const std::string& path : ns.netns.paths) {
      if (path == name) return &ns;
    }
  }
  return nullptr;
}

int RulesFromCapture(const RulesConfig& config, const std::string& path,
                     const std::function<int(const pb::NetnsRules&)>& print) {
  Result<capture::Capture> taken = ReadCaptureFile(config.from);
  if (!taken.ok()) {
    std::fprintf(stderr, "ambient-doctor rules: %s\n", taken.error().message.c_str());
    return kExitScanFailed;
  }
  const NetnsSnapshot* ns = FindCapturedNetns(taken->snapshot, path);
  if (ns == nullptr) {
    std::fprintf(stderr,
                 "ambient-doctor rules: %s holds no netns %s (give one of its paths or its inode "
                 "number, as `report --from` lists them)\n",
                 config.from.c_str(), path.c_str());
    return kExitScanFailed;
  }
  return print(api::BuildNetnsRules(*ns, Classify(*ns), NodeAnalysis{}));
}

}  // namespace

int RunRules(const std::vector<std::string>& args) {
  FlagSet flags("rules", "(--netns PATH | --pid PID) [flags]",
                "Prints the normalized rule set of one network namespace: every backend, family, "
                "table and chain, ipsets, policy rules and the routes of table 100. Asks the "
                "daemon (GetNetnsRules, read now by the daemon) when it answers on --api-socket, "
                "else reads the netns itself; the output is the same.");
  RulesConfig config;
  flags.Add({.name = "netns",
             .value_name = "PATH",
             .help = "Netns bind mount or /proc/<pid>/ns/net to read."},
            &config.netns);
  flags.Add({.name = "pid", .value_name = "PID", .help = "Read the netns of this process."},
            &config.pid);
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .help = "procfs used to resolve --pid (the path is sent to the daemon as is)."},
            &config.proc_root);
  AddCommonFlags(flags, config.common);
  AddClientFlags(flags, config.client);
  flags.Add({.name = "from",
             .value_name = "FILE",
             .help = "Print the netns as a capture (ambient-doctor capture -o FILE) holds it; "
                     "--netns then takes one of its paths or its inode number. No root needed."},
            &config.from);
  if (auto rc = ParseOrExit(flags, args, nullptr, config.common.output)) return *rc;
  SetupLogging(config.common.log_level);

  std::string path = config.netns;
  if (flags.Given("pid")) path = config.proc_root + "/" + config.pid + "/ns/net";
  if (path.empty() || (flags.Given("pid") && flags.Given("netns"))) {
    std::fprintf(stderr, "ambient-doctor rules: give exactly one of --netns PATH or --pid PID\n");
    return kExitScanFailed;
  }
  const bool json = config.common.output == "json";
  auto print = [json](const pb::NetnsRules& rules) {
    std::fputs((json ? RenderRulesJson(rules) : RenderRulesText(rules)).c_str(), stdout);
    return rules.netns().unreadable() ? kExitScanFailed : 0;
  };
  if (!config.from.empty()) {
    if (flags.Given("pid")) {
      std::fprintf(stderr, "ambient-doctor rules: --from takes --netns PATH|INODE, not --pid\n");
      return kExitScanFailed;
    }
    return RulesFromCapture(config, path, print);
  }
  DaemonChoice daemon = ChooseDaemon(flags, config.client, "rules", /*scoped=*/false);
  if (daemon.client) {
    // The daemon opens the path in its own mount namespace; a relative one means nothing there.
    std::string absolute = path;
    if (!absolute.empty() && absolute[0] != '/') {
      std::error_code error;
      absolute = std::filesystem::absolute(path, error).string();
    }
    Result<pb::NetnsRules> answer = daemon.client->GetNetnsRulesByPath(absolute);
    if (answer.ok()) return print(*answer);
    if (client::IsAnsweredNo(answer.error())) {
      std::fprintf(stderr, "ambient-doctor rules: the daemon at unix:%s: %s\n",
                   daemon.socket.c_str(), answer.error().message.c_str());
      return kExitScanFailed;
    }
    daemon.fallback_reason = answer.error().message;
    daemon.daemon_failed = true;
  }
  LogFallback(daemon, "reading the netns");
  Result<NetnsSnapshot> read = ReadNetnsAtPath(path);
  if (!read.ok()) {
    std::fprintf(stderr, "ambient-doctor rules: %s\n", read.error().message.c_str());
    return kExitScanFailed;
  }
  const NetnsSnapshot& ns = read.value();
  return print(api::BuildNetnsRules(ns, Classify(ns), NodeAnalysis{}));
}

}  // namespace ad::cli
