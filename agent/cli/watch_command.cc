#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <thread>

#include "api/report_proto.h"
#include "cli/command_common.h"
#include "cli/report_render.h"
#include "report/report_policy.h"

namespace ad::cli {

namespace {

// The flags of `watch`.
struct WatchConfig {
  ScanConfig scan;
  ClientConfig client;
  std::string interval = "5s";
  int count = 0;  // 0: until interrupted
};

// A finding's identity on the wire: code + netns inode + subject (as FindingIdentity).
std::string WireIdentity(const pb::Finding& f) {
  return f.code() + "|" + std::to_string(f.netns().inode()) + "|" + f.subject();
}

pb::SeverityCounts CountOpen(const std::map<std::string, pb::Finding>& open) {
  pb::SeverityCounts counts;
  for (const auto& [id, f] : open) {
    if (f.severity() == "critical") counts.set_critical(counts.critical() + 1);
    if (f.severity() == "warning") counts.set_warning(counts.warning() + 1);
    if (f.severity() == "info") counts.set_info(counts.info() + 1);
  }
  return counts;
}

// watch through the daemon: its current findings are the first change set (each as opened, like
// a local watch's first scan), then one change set per published result that opened or resolved
// something. Events of one result arrive back to back; a new sequence or a short quiet ends a set.
int WatchViaDaemon(client::ApiClient& api, client::FindingStream& stream, int count, bool json,
                   bool color) {
  constexpr std::chrono::milliseconds kSetQuiet{100};
  std::string node;
  if (Result<pb::Status> status = api.GetStatus(); status.ok()) node = status->node();
  std::map<std::string, pb::Finding> open;  // by WireIdentity
  ChangeSet pending;
  pending.node = node;
  bool have_pending = false;
  uint64_t pending_sequence = 0;
  bool initial = true;
  int sets = 0;
  auto flush = [&] {
    pending.open_findings = CountOpen(open);
    if (initial || !pending.changes.empty()) {
      if (!pending.changes.empty()) {
        const std::string text =
            json ? RenderChangesJson(pending) : RenderChangeLines(pending, color);
        std::fputs(text.c_str(), stdout);
        std::fflush(stdout);
      }
      ++sets;
    }
    pending.changes.clear();
    have_pending = false;
    initial = false;
  };
  while (count == 0 || sets < count) {
    pb::FindingEvent event;
    const auto read = stream.Next(&event, kSetQuiet);
    if (read == client::FindingStream::Read::kEnded) {
      if (have_pending && !initial) flush();
      if (count > 0 && sets >= count) break;
      std::fprintf(stderr, "ambient-doctor watch: the daemon at unix:%s went away (%s)\n",
                   api.socket_path().c_str(), stream.end_error().message.c_str());
      return kExitScanFailed;
    }
    if (read == client::FindingStream::Read::kIdle) {
      if (have_pending && !initial) flush();
      continue;
    }
    if (have_pending && !initial && event.sequence() != pending_sequence) flush();
    pending_sequence = event.sequence();
    pending.taken_at_unix_ms = event.taken_at_unix_ms();
    have_pending = true;
    const std::string id = WireIdentity(event.finding());
    switch (event.kind()) {
      case pb::FindingEvent::KIND_CURRENT:
        if (event.has_finding()) {
          open[id] = event.finding();
          pending.changes.push_back({true, event.finding()});
        }
        if (event.end_of_current()) flush();
        break;
      case pb::FindingEvent::KIND_OPENED:
        open[id] = event.finding();
        pending.changes.push_back({true, event.finding()});
        break;
      case pb::FindingEvent::KIND_UPDATED:  // not a change for watch: same identity
        open[id] = event.finding();
        break;
      case pb::FindingEvent::KIND_RESOLVED:
        open.erase(id);
        pending.changes.push_back({false, event.finding()});
        break;
      default:
        break;
    }
  }
  return ReportExitCode(CountOpen(open));
}

}  // namespace

int RunWatch(const std::vector<std::string>& args) {
  FlagSet flags("watch", "[--interval 5s] [--count N] [report flags]",
                "Prints one line per finding opened or resolved; with -o json, one JSON document "
                "(one line, schema ambient-doctor.changes/v1) per set of changes. Follows the "
                "daemon's WatchFindings stream when it answers on --api-socket (its current "
                "findings first, then every change it publishes, with its history); else rescans "
                "the node every --interval with one history of ZDS signals (so a hand-off pending "
                "past --zds-stall-threshold becomes ZDS_STALL).");
  WatchConfig config;
  AddScanFlags(flags, config.scan);
  AddClientFlags(flags, config.client);
  flags.Add({.name = "interval",
             .value_name = "DURATION",
             .help = "Time between the start of two local scans (the daemon has its own)."},
            &config.interval);
  flags.Add({.name = "count",
             .value_name = "N",
             .default_text = "0 (until interrupted)",
             .help = "Stop after N scans (with the daemon: N change sets, the first being its "
                     "current findings); the exit code then follows the open findings like "
                     "report."},
            &config.count);
  if (auto rc = ParseScanCommand(flags, args, config.scan)) return *rc;
  const auto interval = PositiveDuration("interval", config.interval, "5s");
  if (!interval) return kExitScanFailed;
  const int count = config.count;
  if (count < 0) {
    std::fprintf(stderr, "ambient-doctor: --count needs a number\n");
    return kExitScanFailed;
  }
  const bool json = config.scan.common.output == "json";
  const bool color = UseColor(config.scan.color);

  DaemonChoice daemon = ChooseDaemon(flags, config.client, "watch");
  if (daemon.refused) return kExitScanFailed;
  if (daemon.client) {
    Result<std::unique_ptr<client::FindingStream>> stream = daemon.client->WatchFindings();
    if (stream.ok()) {
      spdlog::info("following the daemon at unix:{}", daemon.socket);
      return WatchViaDaemon(*daemon.client, **stream, count, json, color);
    }
    daemon.fallback_reason = stream.error().message;
    daemon.daemon_failed = true;
  }
  LogFallback(daemon, "scanning every " + config.interval);
  if (::geteuid() != 0) {
    spdlog::warn("not running as root: entering other network namespaces will likely fail");
  }

  // The API source follows the cluster while the loop runs; each step judges its latest view.
  const std::unique_ptr<KubeLink> kube = KubeLink::Start(config.scan.kube);
  (void)kube->WaitSynced(kKubeSyncWait);
  Engine engine(std::move(config.scan.engine));
  engine.set_kube_view([&kube] { return kube->View(); });
  int exit_code = kExitScanFailed;
  bool explained = false;  // a failing scan is explained once, until it recovers
  auto next_scan = std::chrono::steady_clock::now();
  for (int scans = 0; count == 0 || scans < count; ++scans) {
    if (scans > 0) std::this_thread::sleep_until(next_scan);
    next_scan = std::chrono::steady_clock::now() + std::chrono::milliseconds(*interval);
    const EngineStep step = engine.Step();
    LogSourceChanges(step.source_changes);
    if (!step.usable) {
      if (!explained) ExplainUnusableScan(step.snapshot);
      explained = true;
      exit_code = kExitScanFailed;
      continue;
    }
    if (step.scan_recovered) spdlog::info("scan recovered");
    explained = false;
    if (!step.changes.empty()) {
      const ChangeSet set = LocalChangeSet(step.snapshot, step.analysis, step.changes);
      const std::string text = json ? RenderChangesJson(set) : RenderChangeLines(set, color);
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    }
    exit_code = ReportExitCode(engine.open_findings());
  }
  return exit_code;
}

}  // namespace ad::cli
