// What the commands share: their common configuration structs and flag groups, the flags-file
// layering (--config, --lab), the engine's configuration from the scan flags, the daemon-or-local
// choice and a few output helpers.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "cli/flags.h"
#include "client/api_client.h"
#include "engine/engine.h"
#include "engine/kube_link.h"

namespace ad::cli {

// -o and --log-level.
struct CommonConfig {
  std::string output = "table";
  std::string log_level = "warn";
};

// --config and --lab: a flags file parsed under the command line.
struct LayerConfig {
  std::string config;
  bool lab = false;
  std::string lab_prefix = "adlab";
  // --kubeconfig given on the command line itself: it overrides a --no-kube-api from the flags
  // file (a lab without an API server writes one) instead of being silently ignored.
  bool kubeconfig_on_command_line = false;
  // --from FILE: a capture judged instead of this node; its scan flags are the lower layer.
  std::string from;
  std::shared_ptr<const capture::Capture> capture;  // decoded by ParseOrExit
  // The flags of the scan as finally layered (flags file, then command line): what a capture
  // records so that its replay judges with the same settings.
  std::vector<std::string> layered_args;
};

// What report, watch and serve scan, and how they judge it. The flags bound to `engine`'s fields
// take their defaults from EngineConfig; FinishScanConfig applies the rest to it.
struct ScanConfig {
  EngineConfig engine;
  LayerConfig layers;
  CommonConfig common;
  bool no_proc = false;
  bool no_cri = false;
  bool no_probe_path = false;
  bool no_nft_probe = false;
  bool no_zds = false;
  int ztunnel_admin_port = EngineConfig{}.ztunnel_admin_port;
  std::string cni_conf_dir = "auto";  // a host path, "auto" (runtime's, else default) or "off"
  std::string probe_path_threshold = "10s";
  std::string zds_stall_threshold = "30s";
  std::string cert_expiry_warning = "1h";
  std::string color = "auto";
  // The Kubernetes API source (desired state): --kubeconfig, --node-name, --no-kube-api,
  // --enrollment-grace, --exclude-namespaces.
  KubeSourceConfig kube;
  bool no_kube_api = false;
  std::string enrollment_grace = "30s";
};

// --local and --api-socket: whether and where to ask the daemon.
struct ClientConfig {
  bool local = false;
  std::string api_socket = client::kDefaultApiSocket;
};

// How long a one-shot command waits for the Kubernetes API source's first lists.
inline constexpr std::chrono::milliseconds kKubeSyncWait{10000};

// Port numbers as flag values (a repeatable port flag's default).
std::vector<std::string> PortTexts(const std::vector<uint16_t>& ports);

// Where `scripts/lab up` writes the flags that scan its node.
std::string LabFlagsPath(const std::string& prefix);
void SetupLogging(const std::string& level);

// Flag groups.
void AddCommonFlags(FlagSet& flags, CommonConfig& config);  // -o, --log-level
// Discovery, node sources, --config/--lab, common, --workers, --color.
// Without `output_format` (capture: -o is its file), only --log-level of the common flags.
void AddScanFlags(FlagSet& flags, ScanConfig& config, bool output_format = true);
// --from FILE (report, explain): judge a capture instead of this node.
void AddFromFlag(FlagSet& flags, LayerConfig& layers);
// Of a command's layered flags, those `report --from` takes again to judge a capture with the
// same settings: report's scan flags, without output, logging, flags files or lab selection.
std::vector<std::string> ReplayableScanFlags(const std::vector<std::string>& layered_args);
// Writes `bytes` next to `path` and renames it there, so a reader never sees half a file.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);
// The capture at `path`, decoded; errors name the file.
Result<capture::Capture> ReadCaptureFile(const std::string& path);
void AddClientFlags(FlagSet& flags, ClientConfig& config);  // --local, --api-socket

// "30s", "500ms", "2m", "1h"; a bare number is seconds.
std::optional<int64_t> ParseDurationMs(const std::string& text);
// A positive duration flag's value; nullopt after explaining on stderr.
std::optional<int64_t> PositiveDuration(const std::string& name, const std::string& text,
                                        const std::string& example);
// Applies the scan flags to config.engine; an error message on bad values.
std::optional<std::string> FinishScanConfig(ScanConfig& config);

// Parses `args` (over a --config or --lab flags file when `layers` has one). Returns the exit code
// when the command should end now (help printed, or an error explained on stderr), else nullopt.
std::optional<int> ParseOrExit(FlagSet& flags, const std::vector<std::string>& args,
                               LayerConfig* layers, const std::string& output,
                               const std::vector<std::string>& formats = {"table", "json"});

// ParseOrExit for a command that scans (report, watch), then its logging and FinishScanConfig.
std::optional<int> ParseScanCommand(FlagSet& flags, const std::vector<std::string>& args,
                                    ScanConfig& config);

void ExplainUnusableScan(const NodeSnapshot& snapshot);

// One local engine step (report, explain), judged against the Kubernetes API source after
// waiting for its first lists (kKubeSyncWait); the link stays open for a pod lookup. Warns when
// not root. With --from, the capture's replay instead (kube null: nothing is asked of an API).
struct LocalScan {
  std::unique_ptr<KubeLink> kube;
  EngineStep step;
};
LocalScan ScanLocally(ScanConfig& scan);
// --from a daemon's capture: it carries the daemon's history (first-seen times, aged signals).
bool ReplaysDaemonHistory(const ScanConfig& scan);
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

// The origin of a result: a local scan (why not the daemon), or the capture it replays.
void SetLocalOrigin(const ScanConfig& scan, const DaemonChoice& daemon,
                    ::ambientdoctor::v1::ReportOrigin& origin);
// Says why the command works without the daemon (a warning when a socket was there but failed).
void LogFallback(const DaemonChoice& choice, const std::string& what);
// `scoped`: the command scans a node (report, watch); rules reads one netns by path. Scope flags
// count only on the command line (FlagSet::Given), not in a --config file.
DaemonChoice ChooseDaemon(const FlagSet& flags, const ClientConfig& config,
                          const std::string& command, bool scoped = true);

// One pod by namespace and name (`report --pod`, `explain pod`).
struct PodQuery {
  std::string namespace_name;
  std::string name;
};
// "NAMESPACE/NAME", or NAME with `namespace_name` (-n); nullopt when neither form fits (or -n
// contradicts the namespace in the name).
std::optional<PodQuery> ParsePodQuery(const std::string& pod, const std::string& namespace_name);
// The pod's story: the daemon's GetPod when it answers, else a local scan with the API source.
int RunPodStory(ScanConfig& scan, const ClientConfig& client, const FlagSet& flags,
                const PodQuery& query, const std::string& command);
// `report` with --pod preset (explain pod NAMESPACE/NAME [flags]).
int RunReportForPod(const std::string& pod, const std::vector<std::string>& args,
                    const std::string& command);

// The commands (one file each).
int RunExplain(const std::vector<std::string>& args);
int RunReport(const std::vector<std::string>& args);
int RunWatch(const std::vector<std::string>& args);
int RunServe(const std::vector<std::string>& args, const std::string& version);
int RunRules(const std::vector<std::string>& args);
int RunFindings(const std::vector<std::string>& args);
int RunCapture(const std::vector<std::string>& args);

}  // namespace ad::cli
