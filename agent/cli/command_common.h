// What the commands share: the flag groups, the flags-file layering (--config, --lab), the
// engine's configuration from flags, the daemon-or-local choice and a few output helpers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "client/api_client.h"
#include "engine/engine.h"

namespace ad::cli {

// Where `scripts/lab up` writes the flags that scan its node.
std::string LabFlagsPath(const std::string& prefix);
void SetupLogging(const std::string& level);

// Flag groups.
void AddCommonFlags(FlagSet& flags);  // -o, --log-level
void AddScanFlags(FlagSet& flags);    // discovery, node sources, common, --workers, --color
void AddClientFlags(FlagSet& flags);  // --local, --api-socket

// "30s", "500ms", "2m", "1h"; a bare number is seconds.
std::optional<int64_t> ParseDurationMs(const std::string& text);
// A positive duration flag (its default when absent); nullopt after explaining on stderr.
std::optional<int64_t> PositiveDurationFlag(const FlagSet& flags, const std::string& name,
                                            const std::string& fallback);
// The engine's configuration from the flags of report/watch/serve; an error message on bad values.
std::optional<std::string> ConfigFromFlags(const FlagSet& flags, EngineConfig& config);

// Parses `args` (over a --config or --lab flags file). Returns the exit code when the command
// should end now (help printed, or an error explained on stderr), else nullopt.
std::optional<int> ParseOrExit(FlagSet& flags, const std::vector<std::string>& args,
                               const std::vector<std::string>& formats = {"table", "json"});

void ExplainUnusableScan(const NodeSnapshot& snapshot);
void LogSourceChanges(const std::vector<SourceChange>& changes);
bool UseColor(const std::string& mode);
int64_t NowUnixMs();

// Whether to ask the daemon: a connected client, or why not (the local scan's note).
struct DaemonChoice {
  std::unique_ptr<client::ApiClient> client;
  std::string socket;           // the socket tried, "" when none was
  std::string fallback_reason;  // why the command scans locally
  bool daemon_failed = false;   // a socket was there but no usable daemon behind it
  bool refused = false;         // contradictory flags: explained on stderr, exit 2
};
// Says why the command works without the daemon (a warning when a socket was there but failed).
void LogFallback(const DaemonChoice& choice, const std::string& what);
// `scoped`: the command scans a node (report, watch); rules reads one netns by path. `args` is
// the command line (scope flags count only there, not in a --config file).
DaemonChoice ChooseDaemon(const FlagSet& flags, const std::vector<std::string>& args,
                          const std::string& command, bool scoped = true);

// The commands (one file each).
int RunReport(const std::vector<std::string>& args);
int RunWatch(const std::vector<std::string>& args);
int RunServe(const std::vector<std::string>& args, const std::string& version);
int RunRules(const std::vector<std::string>& args);
int RunFindings(const std::vector<std::string>& args);

}  // namespace ad::cli
