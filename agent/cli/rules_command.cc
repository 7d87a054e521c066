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

int RunRules(const std::vector<std::string>& args) {
  FlagSet flags("rules", "(--netns PATH | --pid PID) [flags]",
                "Prints the normalized rule set of one network namespace: every backend, family, "
                "table and chain, ipsets, policy rules and the routes of table 100. Asks the "
                "daemon (GetNetnsRules, read now by the daemon) when it answers on --api-socket, "
                "else reads the netns itself; the output is the same.");
  flags.Add({.name = "netns",
             .value_name = "PATH",
             .help = "Netns bind mount or /proc/<pid>/ns/net to read."});
  flags.Add({.name = "pid", .value_name = "PID", .help = "Read the netns of this process."});
  flags.Add({.name = "proc-root",
             .value_name = "PATH",
             .default_text = "/proc",
             .help = "procfs used to resolve --pid (the path is sent to the daemon as is)."});
  AddCommonFlags(flags);
  AddClientFlags(flags);
  if (auto rc = ParseOrExit(flags, args)) return *rc;
  SetupLogging(flags.Get("log-level", "warn"));

  std::string path = flags.Get("netns");
  if (flags.Has("pid")) path = flags.Get("proc-root", "/proc") + "/" + flags.Get("pid") + "/ns/net";
  if (path.empty() || (flags.Has("pid") && flags.Has("netns"))) {
    std::fprintf(stderr, "ambient-doctor rules: give exactly one of --netns PATH or --pid PID\n");
    return kExitScanFailed;
  }
  const bool json = flags.Get("output", "table") == "json";
  auto print = [json](const pb::NetnsRules& rules) {
    std::fputs((json ? RenderRulesJson(rules) : RenderRulesText(rules)).c_str(), stdout);
    return rules.netns().unreadable() ? kExitScanFailed : 0;
  };
  DaemonChoice daemon = ChooseDaemon(flags, args, "rules", /*scoped=*/false);
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
