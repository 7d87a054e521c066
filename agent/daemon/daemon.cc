#include "daemon/daemon.h"

#include <malloc.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "model/istio_facts.h"
#include "model/json.h"
#include "sources/watch/change_monitor.h"
#include "sources/watch/config_dir_watcher.h"

namespace ad {
namespace {

// The only routing table the inspector reads (Istio's in-pod policy routes).
constexpr uint32_t kIstioRouteTable = istio::kRouteTableInbound;
// An event step that re-read this many netns (the re-read after watching) is worth a trim.
constexpr size_t kTrimAfterRereads = 64;

std::string FindingLine(const FindingChange& change, LogFormat format) {
  const Finding& f = change.finding;
  const bool opened = change.kind == FindingChange::Kind::kOpened;
  if (format == LogFormat::kJson) {
    JsonWriter j(/*pretty=*/false);
    j.BeginObject()
        .Field("event", opened ? "finding_opened" : "finding_resolved")
        .Field("code", f.code_name())
        .Field("severity", SeverityName(f.severity))
        .Field("netns", f.netns_path)
        .Key("inode")
        .Uint(f.netns_inode)
        .Field("pod", f.pod)
        .Field("subject", f.subject)
        .Field("summary", f.summary)
        .EndObject();
    return j.str();
  }
  std::string line = std::string(opened ? "finding opened " : "finding resolved ") +
                     std::string(f.code_name()) + " " + std::string(SeverityName(f.severity));
  if (!f.netns_path.empty() || f.netns_inode != 0) {
    line += " " + (f.netns_path.empty() ? std::string("netns") : f.netns_path) + " (inode " +
            std::to_string(f.netns_inode) + ")";
  }
  if (!f.pod.empty()) line += " pod " + f.pod;
  if (!f.subject.empty()) line += " [" + f.subject + "]";
  return line + ": " + f.summary;
}

std::string SourceLine(const SourceChange& change, LogFormat format) {
  const bool degraded = change.kind == SourceChange::Kind::kDegraded;
  if (format == LogFormat::kJson) {
    JsonWriter j(/*pretty=*/false);
    j.BeginObject()
        .Field("event", degraded ? "source_degraded" : "source_recovered")
        .Field("source", SourceKindName(change.source));
    if (degraded) j.Field("message", change.message);
    j.EndObject();
    return j.str();
  }
  std::string line = std::string(degraded ? "source degraded " : "source recovered ") +
                     std::string(SourceKindName(change.source));
  if (degraded) line += ": " + change.message;
  return line;
}

// Equal as outputs would show them (identity, pod, summary, evidence).
bool SameFindings(const std::vector<Finding>& a, const std::vector<Finding>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Finding& x, const Finding& y) {
    return x.code == y.code && x.netns_inode == y.netns_inode && x.subject == y.subject &&
           x.pod == y.pod && x.summary == y.summary && x.evidence == y.evidence;
  });
}

}  // namespace

std::vector<std::string> StepLogLines(const EngineStep& step, LogFormat format) {
  std::vector<std::string> lines;
  for (const SourceChange& change : step.source_changes)
    lines.push_back(SourceLine(change, format));
  for (const FindingChange& change : step.changes) lines.push_back(FindingLine(change, format));
  return lines;
}

std::string NoteLine(std::string_view message, LogFormat format) {
  if (format == LogFormat::kText) return std::string(message);
  JsonWriter j(/*pretty=*/false);
  j.BeginObject().Field("event", "note").Field("message", message).EndObject();
  return j.str();
}

Daemon::Daemon(DaemonOptions options)
    : Daemon(std::move(options), MakeKernelInspector(ReadLimits{}, {.ipsets_in_host_only = true}),
             Engine::SystemClockMs) {}

Daemon::Daemon(DaemonOptions options, std::unique_ptr<NetnsInspector> inspector,
               Engine::Clock clock)
    : options_(std::move(options)),
      engine_(options_.engine, std::move(inspector), std::move(clock), options_.resolved_ring),
      hub_(std::make_shared<ResultHub>(options_.hub_ring)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  // glibc gives each thread that meets a locked arena a new one (up to 8 per core), and every
  // arena keeps its freed pages: with scan workers, the ZDS sweep thread, HTTP and gRPC threads
  // that was ~3 MiB of the idle daemon's RSS. Two arenas match the scan's two workers.
  // MALLOC_ARENA_MAX still overrides.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) (void)::mallopt(M_ARENA_MAX, 2);
  // glibc raises its mmap threshold each time a large block is freed (up to 32 MiB), after which
  // the scan's netlink dump buffers come from the heap and their pages stay after free. A fixed
  // threshold keeps them mmapped (given back at free); freed heap tops are given back from 128 KiB.
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) {
    (void)::mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  }
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) {
    (void)::mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  }
  if (options_.kube_view) engine_.set_kube_view(options_.kube_view);
  if (options_.extra_findings) {
    engine_.set_extra_findings([this](const NodeSnapshot& snapshot, const NodeAnalysis& analysis) {
      last_extra_ = options_.extra_findings(snapshot, analysis);
      return last_extra_;
    });
  }
}

void Daemon::Stop() {
  stop_requested_.store(true);
  const uint64_t one = 1;
  if (wake_.valid()) (void)!::write(wake_.get(), &one, sizeof(one));
}

void Daemon::KubeChanged() {
  kube_changed_.store(true);
  const uint64_t one = 1;
  if (wake_.valid()) (void)!::write(wake_.get(), &one, sizeof(one));
}

bool Daemon::Stopping() const { return stop_requested_.load() || !wake_.valid(); }

void Daemon::StepAndPublish(StepTrigger trigger, const StepPlan& plan, LogFormat format) {
  const auto started = std::chrono::steady_clock::now();
  StepPlan planned = plan;
  planned.skip_if_unchanged = !plan.full && options_.max_unpublished.count() > 0 &&
                              started - last_published_ < options_.max_unpublished;
  // The scan may be unchanged while the flow findings are not: judge them on the last result.
  if (planned.skip_if_unchanged && options_.extra_findings) {
    const auto latest = hub_->Latest();
    if (latest && latest->step.usable &&
        !SameFindings(options_.extra_findings(latest->step.snapshot, latest->step.analysis),
                      last_extra_)) {
      planned.skip_if_unchanged = false;
    }
  }
  EngineStep step = engine_.Step(planned);
  ++steps_;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (step.unchanged) {
    ++unchanged_steps_;
    if (options_.on_step) options_.on_step(trigger, seconds, plan.dirty_netns.size());
    // A resync read listeners everywhere and some netns in full even when nothing changed.
    // A skipped poll still built the node sources' data and a snapshot and let them go.
    if (trigger != StepTrigger::kEvent || plan.dirty_netns.size() >= kTrimAfterRereads) {
      ReleaseFreedMemory();
    }
    return;  // same findings, same sources: outputs keep the last result
  }
  last_published_ = started;
  // A degraded source is a warning; everything else that changed is information.
  const std::vector<std::string> lines = StepLogLines(step, format);
  for (size_t i = 0; i < lines.size(); ++i) {
    const bool degraded = i < step.source_changes.size() &&
                          step.source_changes[i].kind == SourceChange::Kind::kDegraded;
    spdlog::log(degraded ? spdlog::level::warn : spdlog::level::info, "{}", lines[i]);
  }
  if (!step.usable && !failing_) {
    spdlog::warn("{}", NoteLine("scan unusable: no netns readable", format));
  }
  if (step.scan_recovered) spdlog::info("{}", NoteLine("scan recovered", format));
  failing_ = !step.usable;
  std::set<uint64_t> inodes;
  last_records_.clear();
  for (const NetnsSnapshot& netns : step.snapshot.netns) {
    inodes.insert(netns.netns.inode);
    last_records_.push_back(netns.netns);
  }
  const bool netns_removed =
      !std::includes(inodes.begin(), inodes.end(), last_inodes_.begin(), last_inodes_.end());
  last_inodes_ = std::move(inodes);
  const size_t netns_read = plan.full ? step.snapshot.netns.size() : plan.dirty_netns.size();
  if (options_.on_step) options_.on_step(trigger, seconds, netns_read);
  hub_->Publish(trigger, std::move(step));
  // A published step that was not a small event step, or one that forgot a netns.
  if (trigger != StepTrigger::kEvent || netns_read >= kTrimAfterRereads || netns_removed) {
    ReleaseFreedMemory();
  }
}

// glibc keeps freed pages in its arenas: a published step builds a snapshot, its analysis and the
// hub's copy next to the previous ones (+1-2 MiB of idle RSS otherwise), and under pod churn the
// removed netns' share of the old snapshot is never reused in full, so RSS ratchets up (soak:
// 5.9 MiB given back by one trim). At most once a second: churn brings many steps a second.
void Daemon::ReleaseFreedMemory() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_trim_ < std::chrono::seconds(1)) return;
  last_trim_ = now;
  (void)::malloc_trim(0);
}

// With change events the resync need not read everything: it reads what the gates flag (a
// changed nf_tables generation or iptables-legacy content hash, events still queued), the host
// netns (its ipsets have no events), and in full a rolling 1/kResyncSlices of the other netns,
// so every netns is read in full at least every kResyncSlices periods whatever the gates say.
// Listeners have no events either, but the ones that matter are followed between resyncs: every
// poll re-reads those of netns whose ztunnel listener lost its owner (Engine: orphaned) and of
// netns a ztunnel holds without listening there yet (Engine: awaiting). Any other listener
// (another process binding in a pod) is seen when its netns's slice comes round. Re-reading every
// netns's listeners at each resync was the idle daemon's largest single cost (two sock_diag walks
// of the node-wide socket hashes per netns).
StepPlan Daemon::GatedResync(watch::ChangeMonitor& monitor, const std::set<uint64_t>& dirty) {
  StepPlan plan{.full = false, .dirty_netns = dirty, .node_sources = true};
  for (const watch::DirtyNetns& netns : monitor.Verify()) plan.dirty_netns.insert(netns.inode);
  std::vector<uint64_t> others;
  for (const NetnsRecord& record : last_records_) {
    if (record.is_host) {
      plan.dirty_netns.insert(record.inode);
    } else {
      others.push_back(record.inode);
    }
  }
  std::sort(others.begin(), others.end());
  const size_t slice = (others.size() + kResyncSlices - 1) / kResyncSlices;
  auto it = std::upper_bound(others.begin(), others.end(), resync_cursor_);
  for (size_t taken = 0; taken < slice; ++taken, ++it) {
    if (it == others.end()) it = others.begin();
    plan.dirty_netns.insert(*it);
    resync_cursor_ = *it;
  }
  return plan;
}

namespace {

// The CNI config directory: a chain change is re-read at once (CNI_CHAIN_BROKEN's gaps start
// when the chain broke, not at the next poll). nullopt (and a warning) when it cannot be watched.
std::optional<watch::ConfigDirWatcher> OpenCniWatcher(const EngineConfig& engine,
                                                      LogFormat format) {
  if (engine.cni_conf_dir.empty()) return std::nullopt;
  auto opened = watch::ConfigDirWatcher::Open(engine.host_root + engine.cni_conf_dir);
  if (opened.ok()) return std::move(opened).value();
  spdlog::warn("{}", NoteLine("CNI config directory not watched, read every interval: " +
                                  opened.error().message,
                              format));
  return std::nullopt;
}

// What the daemon says about the CNI config directory in use: which one and where it came from,
// or why the chain is not judged. Empty when the check is off.
std::string CniDirNote(const CniConfigState& cni) {
  if (!cni.collected) return {};
  if (!cni.not_judged.empty()) return "CNI chain not judged: " + cni.not_judged;
  std::string note =
      "CNI config directory " + cni.dir + " (" + std::string(CniDirOriginName(cni.dir_origin));
  if (cni.dir_origin == CniDirOrigin::kRuntime && !cni.runtime.empty()) {
    note += ": " + cni.runtime + " reports it";
  }
  return note + ")";
}

// Keeps the watcher on the directory the latest scan read (the runtime's may be known only after
// the first scan), or on the fallback while none is judged (its creation is then an event), and
// logs each change of directory or verdict once.
void FollowCniDir(std::optional<watch::ConfigDirWatcher>& watcher, const CniConfigState& cni,
                  const EngineConfig& engine, std::string& last_note, LogFormat format) {
  if (std::string note = CniDirNote(cni); note != last_note) {
    spdlog::info("{}", NoteLine(note, format));
    last_note = std::move(note);
  }
  if (!watcher || !cni.collected) return;
  watcher->Retarget(cni.dir.empty() ? engine.host_root + engine.cni_conf_dir : cni.dir);
}

// The event-driven change monitor, or null (and a warning: the daemon then polls every
// interval). `external_fd` is the CNI watcher's; `wake_fd` ends a wait at Stop().
std::unique_ptr<watch::ChangeMonitor> CreateChangeMonitor(const DaemonOptions& options,
                                                          int external_fd, int wake_fd,
                                                          LogFormat format) {
  watch::ChangeMonitorConfig config;
  config.external_fd = external_fd;
  config.wake_fd = wake_fd;
  config.coalesce_window = options.coalesce_window;
  config.legacy_interval = options.poll_interval;
  config.netns_dirs = options.engine.discovery.netns_dirs;
  config.name_glob = options.engine.discovery.name_glob;
  config.route_tables = {kIstioRouteTable};
  auto created = watch::ChangeMonitor::Create(config);
  if (created.ok()) return std::move(*created);
  spdlog::warn("{}", NoteLine("event-driven re-reads off, polling every interval: " +
                                  created.error().message,
                              format));
  return nullptr;
}

}  // namespace

void Daemon::Run(LogFormat format) {
  using Clock = std::chrono::steady_clock;
  std::optional<watch::ConfigDirWatcher> cni_watcher = OpenCniWatcher(options_.engine, format);
  std::unique_ptr<watch::ChangeMonitor> monitor;
  if (options_.event_driven) {
    monitor =
        CreateChangeMonitor(options_, cni_watcher ? cni_watcher->fd() : -1, wake_.get(), format);
  }
  event_driven_active_ = monitor != nullptr;
  StepAndPublish(StepTrigger::kStartup, StepPlan{}, format);

  std::string cni_note;  // the last CNI directory line logged
  std::set<uint64_t> dirty;
  // Keeps the monitor's watch set equal to the netns of the last step (/proc-only netns come and
  // go with processes, which inotify does not see). A netns starts being watched after it was
  // read, so a change in between would be missed: each newly watched netns is read once more.
  auto sync_watches = [&] {
    if (!monitor) return;
    for (uint64_t inode : monitor->WatchedInodes()) {
      if (!last_inodes_.contains(inode)) monitor->Unwatch(inode);
    }
    for (const NetnsRecord& record : last_records_) {
      if (monitor->IsWatched(record.inode)) continue;
      if (Status watched = monitor->Watch(record); !watched.ok()) {
        spdlog::debug(
            "{}", NoteLine("not watching " + record.PrimaryPath() + ": " + watched.error().message,
                           format));
        continue;
      }
      dirty.insert(record.inode);
    }
  };
  // One step of `trigger` with `plan`, then the watch set follows what it found.
  auto step = [&](StepTrigger trigger, StepPlan plan) {
    dirty.clear();
    // The legacy gates compare against what this step is about to read.
    if (monitor && (plan.full || !plan.dirty_netns.empty())) {
      monitor->RefreshLegacyBaselines(plan.full ? std::set<uint64_t>{} : plan.dirty_netns);
    }
    StepAndPublish(trigger, plan, format);
    sync_watches();
    if (const auto latest = hub_->Latest()) {
      FollowCniDir(cni_watcher, latest->step.snapshot.cni, options_.engine, cni_note, format);
    }
  };
  sync_watches();
  if (const auto latest = hub_->Latest()) {
    FollowCniDir(cni_watcher, latest->step.snapshot.cni, options_.engine, cni_note, format);
  }

  auto next_poll = Clock::now() + options_.poll_interval;
  auto next_resync = Clock::now() + options_.full_resync;
  uint64_t overflows_seen = monitor ? monitor->counters().overflows : 0;
  // Every wait below ends at the next deadline, at an event, or at Stop() (the wake eventfd is
  // among the fds waited on): an idle daemon wakes only when something is due.
  while (!Stopping()) {
    // Whatever woke the last wait has its flag set (Stop, KubeChanged): the eventfd is emptied
    // before the flags are read, so a write after this still ends the next wait.
    uint64_t woken = 0;
    (void)!::read(wake_.get(), &woken, sizeof(woken));
    const auto now = Clock::now();
    if (now >= next_resync) {
      step(StepTrigger::kResync, monitor ? GatedResync(*monitor, dirty) : StepPlan{});
      next_resync = now + options_.full_resync;
      next_poll = now + options_.poll_interval;
      continue;
    }
    // The Kubernetes view changed: judge the last reads against it now (netns stay as read,
    // except those already dirty).
    if (kube_changed_.exchange(false)) {
      step(StepTrigger::kEvent,
           StepPlan{.full = false, .dirty_netns = dirty, .node_sources = false});
      continue;
    }
    if (now >= next_poll) {
      // Node sources are due; without events every netns is re-read.
      StepPlan plan;
      if (monitor) plan = StepPlan{.full = false, .dirty_netns = dirty, .node_sources = true};
      step(StepTrigger::kPoll, std::move(plan));
      next_poll = now + options_.poll_interval;
      continue;
    }
    // A CNI config change: the node sources again now (netns reads stay as planned).
    auto cni_changed = [&] {
      if (!cni_watcher || !cni_watcher->Drain()) return false;
      spdlog::debug("{}", NoteLine("CNI config directory changed: " + cni_watcher->dir(), format));
      step(StepTrigger::kEvent,
           StepPlan{.full = !monitor, .dirty_netns = dirty, .node_sources = true});
      return true;
    };
    // Until the next deadline, rounded up: a wait that ends before it would spin until it.
    const auto until_due =
        std::chrono::ceil<std::chrono::milliseconds>(std::min(next_poll, next_resync) - now);
    if (!monitor) {
      pollfd fds[2] = {{wake_.get(), POLLIN, 0}, {cni_watcher ? cni_watcher->fd() : -1, POLLIN, 0}};
      (void)::poll(fds, 2, static_cast<int>(std::max<int64_t>(until_due.count(), 1)));
      if (fds[1].revents & POLLIN) (void)cni_changed();
      continue;
    }
    // With netns already dirty (newly watched ones), only collect what is ready now.
    const auto wait = dirty.empty() ? until_due : std::chrono::milliseconds(0);
    for (const watch::DirtyNetns& netns : monitor->Poll(wait)) {
      dirty.insert(netns.inode);
      spdlog::debug(
          "{}",
          NoteLine("dirty " + netns.path + ": " + watch::DescribeReasons(netns.reasons), format));
    }
    for (; overflows_seen < monitor->counters().overflows; ++overflows_seen) {
      if (options_.on_event_overflow) options_.on_event_overflow();
    }
    if (monitor->external_ready() && cni_changed()) continue;
    if (!dirty.empty()) {
      step(StepTrigger::kEvent,
           StepPlan{.full = false, .dirty_netns = dirty, .node_sources = false});
    }
  }
  hub_->Stop();  // streams get their final status
}

}  // namespace ad
