#include "daemon/daemon.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "model/json.h"

namespace ad {
namespace {

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

}  // namespace

std::vector<std::string> StepLogLines(const EngineStep& step, LogFormat format) {
  std::vector<std::string> lines;
  for (const SourceChange& change : step.source_changes)
    lines.push_back(SourceLine(change, format));
  for (const FindingChange& change : step.changes) lines.push_back(FindingLine(change, format));
  return lines;
}

Daemon::Daemon(DaemonOptions options)
    : Daemon(std::move(options), MakeKernelInspector(ReadLimits{}, {.ipsets_in_host_only = true}),
             Engine::SystemClockMs) {}

Daemon::Daemon(DaemonOptions options, std::unique_ptr<NetnsInspector> inspector,
               Engine::Clock clock)
    : options_(std::move(options)),
      engine_(options_.engine, std::move(inspector), std::move(clock), options_.resolved_ring),
      hub_(options_.hub_ring),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void Daemon::Stop() {
  const uint64_t one = 1;
  if (wake_.valid()) (void)!::write(wake_.get(), &one, sizeof(one));
}

void Daemon::Run(LogFormat format) {
  StepTrigger trigger = StepTrigger::kStartup;
  bool failing = false;
  for (;;) {
    EngineStep step = engine_.Step();
    ++steps_;
    for (const std::string& line : StepLogLines(step, format)) spdlog::info("{}", line);
    if (!step.usable && !failing) spdlog::warn("scan unusable: no netns readable");
    if (step.scan_recovered) spdlog::info("scan recovered");
    failing = !step.usable;
    hub_.Publish(trigger, std::move(step));
    trigger = StepTrigger::kPoll;

    pollfd wait{wake_.get(), POLLIN, 0};
    const int ready = ::poll(&wait, 1, static_cast<int>(options_.poll_interval.count()));
    if (ready > 0) break;  // Stop()
    if (ready < 0 && errno != EINTR) {
      spdlog::error("daemon wait failed: {}", std::strerror(errno));
      break;
    }
  }
  hub_.Stop();  // streams get their final status
}

}  // namespace ad
