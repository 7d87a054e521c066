#include <cstdio>
#include <filesystem>

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
};

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
