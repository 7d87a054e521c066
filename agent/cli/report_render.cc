#include "cli/report_render.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <string_view>

#include "api/report_proto.h"
#include "model/json.h"

namespace ad::cli {
namespace {

constexpr std::string_view kReset = "\033[0m";
constexpr std::string_view kBold = "\033[1m";
constexpr std::string_view kRed = "\033[31m";
constexpr std::string_view kYellow = "\033[33m";
constexpr std::string_view kGreen = "\033[32m";
constexpr std::string_view kDim = "\033[2m";

std::string Paint(bool color, std::string_view code, std::string_view text) {
  if (!color) return std::string(text);
  return std::string(code) + std::string(text) + std::string(kReset);
}

std::string_view SeverityColor(std::string_view status) {
  if (status == "critical") return kRed;
  if (status == "warning") return kYellow;
  if (status == "ok") return kGreen;
  return kDim;
}

std::string JoinBackends(const std::set<Backend>& backends) {
  std::string out;
  for (Backend b : backends) {
    if (!out.empty()) out += ",";
    out += BackendName(b);
  }
  return out.empty() ? "-" : out;
}

std::string JoinFamilies(const std::set<Family>& families) {
  std::string out;
  for (Family f : families) {
    if (!out.empty()) out += ",";
    out += FamilyName(f);
  }
  return out.empty() ? "-" : out;
}

std::string ModeText(const NetnsClassification& c) {
  if (c.is_host) {
    return c.mode == DataplaneMode::kNone ? "host"
                                          : "host+" + std::string(DataplaneModeName(c.mode));
  }
  return std::string(DataplaneModeName(c.mode));
}

std::string BackendsText(const NetnsClassification& c) {
  std::set<Backend> all = c.ambient_backends;
  all.insert(c.sidecar_backends.begin(), c.sidecar_backends.end());
  all.insert(c.host_backends.begin(), c.host_backends.end());
  return JoinBackends(all);
}

bool HasIstioState(const NetnsClassification& c) {
  return c.mode != DataplaneMode::kNone || c.host_rules_present;
}

struct Counts {
  std::map<std::string, int> by_mode;
  int critical = 0, warning = 0, info = 0;
};

Counts Count(const NodeAnalysis& analysis) {
  Counts counts;
  for (const auto& c : analysis.netns) counts.by_mode[std::string(DataplaneModeName(c.mode))]++;
  for (const auto& f : analysis.findings) {
    if (f.severity == Severity::kCritical) counts.critical++;
    if (f.severity == Severity::kWarning) counts.warning++;
    if (f.severity == Severity::kInfo) counts.info++;
  }
  return counts;
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string FormatUnixMs(int64_t unix_ms, bool with_millis = false) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  if (gmtime_r(&seconds, &utc) == nullptr) return std::to_string(unix_ms);
  char text[40];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  std::string out = text;
  if (with_millis) {
    char millis[8];
    std::snprintf(millis, sizeof(millis), ".%03d", static_cast<int>(unix_ms % 1000));
    out += millis;
  }
  return out + "Z";
}

std::string ListenersText(const NetnsClassification& c) {
  std::string out;
  for (uint16_t port : c.ztunnel_listeners) out += (out.empty() ? "" : ",") + std::to_string(port);
  return out.empty() ? "-" : out;
}

std::string ProcessLabel(const NodeSnapshot& snapshot, const std::vector<int>& pids) {
  if (pids.empty()) return "owner unknown";
  std::string out;
  for (int pid : pids) {
    std::string role = "pid";
    for (const auto& p : snapshot.processes) {
      if (p.pid == pid && p.role != ProcessRole::kOther)
        role = std::string(ProcessRoleName(p.role)) + " pid";
    }
    out += (out.empty() ? "" : ", ") + role + " " + std::to_string(pid);
  }
  return out;
}

// The node's hand-off plumbing: ZDS socket, istio-cni and ztunnel processes, CRI.
std::string RenderNodeSection(const NodeSnapshot& snapshot, bool color) {
  std::string out;
  const ZdsSocketState& zds = snapshot.zds;
  out += Paint(color, kBold, "ZDS socket") + " " + (zds.path.empty() ? "-" : zds.path) + ": ";
  if (zds.listener_found) {
    const size_t backlog =
        std::max<size_t>(zds.listener.receive_queue, zds.listener.pending_client_inodes.size());
    out += "listener " + ProcessLabel(snapshot, zds.listener.owner_pids) + ", " +
           std::to_string(zds.accepted.size()) + " connection(s), accept backlog " +
           std::to_string(backlog) + "\n";
  } else {
    out += zds.errors.empty() ? "no listener\n" : "not readable\n";
  }
  for (const UnixSocket& accepted : zds.accepted) {
    std::vector<int> peer_owners;
    for (const UnixSocket& client : zds.clients) {
      if (client.inode == accepted.peer_inode) peer_owners = client.owner_pids;
    }
    out += "  connection " + std::to_string(accepted.inode) + " <-> " +
           std::to_string(accepted.peer_inode) + ": " +
           ProcessLabel(snapshot, accepted.owner_pids) + " <-> " +
           ProcessLabel(snapshot, peer_owners) + ", recv-q " +
           std::to_string(accepted.receive_queue) + ", send-q " +
           std::to_string(accepted.send_queue) + "\n";
  }
  for (const auto& e : zds.errors) {
    out += Paint(color, kYellow, "  source degraded: ") + std::string(e.source()) + ": " +
           e.message + "\n";
  }
  for (const ProcessNetnsFds& p : snapshot.processes) {
    if (p.role != ProcessRole::kIstioCni) continue;
    out += "istio-cni pid " + std::to_string(p.pid) + ": holds " +
           std::to_string(p.netns_fd_inodes.size()) + " netns";
    if (p.start_time_unix_ms > 0) out += ", started " + FormatUnixMs(p.start_time_unix_ms);
    out += "\n";
  }
  std::vector<int> listed;
  for (const ZtunnelAdminState& z : snapshot.ztunnels) {
    listed.push_back(z.pid);
    std::string line = (z.pid > 0 ? "ztunnel pid " + std::to_string(z.pid)
                                  : std::string("ztunnel (pid unknown)")) +
                       ": ";
    if (!z.ready.has_value()) {
      line += "readiness unknown";
    } else if (*z.ready) {
      line += Paint(color, kGreen, "ready");
    } else {
      std::string pending;
      for (const auto& t : z.pending_tasks) pending += (pending.empty() ? "" : ", ") + t;
      line +=
          Paint(color, kRed, "not ready") + (pending.empty() ? "" : " (pending: " + pending + ")");
    }
    for (const ProcessNetnsFds& p : snapshot.processes) {
      if (p.pid != z.pid) continue;
      line += ", holds " + std::to_string(p.netns_fd_inodes.size()) + " netns";
      if (p.start_time_unix_ms > 0) line += ", started " + FormatUnixMs(p.start_time_unix_ms);
    }
    if (z.active_proxy_count) {
      line += ", " + std::to_string(static_cast<int64_t>(*z.active_proxy_count)) + " active";
      if (z.pending_proxy_count) {
        line += " / " + std::to_string(static_cast<int64_t>(*z.pending_proxy_count)) + " pending";
      }
      line += " proxies";
    }
    line += ", " + std::to_string(z.workload_state.size()) + " workloadState entries";
    if (!z.admin_reachable) line += ", admin not reachable";
    out += line + "\n";
    for (const auto& e : z.errors) {
      out += Paint(color, kYellow, "  source degraded: ") + std::string(e.source()) + ": " +
             e.message + "\n";
    }
  }
  for (const ProcessNetnsFds& p : snapshot.processes) {
    if (p.role != ProcessRole::kZtunnel ||
        std::find(listed.begin(), listed.end(), p.pid) != listed.end()) {
      continue;
    }
    out += "ztunnel pid " + std::to_string(p.pid) + ": admin not queried, holds " +
           std::to_string(p.netns_fd_inodes.size()) + " netns\n";
  }
  if (snapshot.processes.empty() && snapshot.ztunnels.empty()) {
    out += "no istio-cni or ztunnel process found\n";
  }
  const CriState& cri = snapshot.cri;
  if (cri.available) {
    out += "CRI " + (cri.runtime.empty() ? std::string("runtime") : cri.runtime) + " at " +
           cri.endpoint + ": " + std::to_string(cri.pods.size()) + " pod sandboxes\n";
  } else {
    out += "CRI: not available (pods are not named)\n";
  }
  for (const auto& e : cri.errors) {
    out += Paint(color, kYellow, "  source degraded: ") + std::string(e.source()) + ": " +
           e.message + "\n";
  }
  return out;
}

void WriteFinding(JsonWriter& j, const Finding& f) {
  j.BeginObject();
  j.Field("code", f.code_name());
  j.Field("severity", SeverityName(f.severity));
  j.Field("subject", f.subject);
  j.Key("netns")
      .BeginObject()
      .Field("path", f.netns_path)
      .Field("inode", f.netns_inode)
      .EndObject();
  if (f.pod.empty()) {
    j.Key("pod").Null();
  } else {
    j.Field("pod", f.pod);
  }
  j.Field("summary", f.summary);
  j.StringArray("evidence", f.evidence);
  j.Field("hint", f.hint);
  if (f.since_unix_ms > 0) {
    j.Field("since_unix_ms", f.since_unix_ms);
  } else {
    j.Key("since_unix_ms").Null();
  }
  j.EndObject();
}

}  // namespace

std::string RenderReportTable(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                              const RenderOptions& options) {
  const bool color = options.color;
  Counts counts = Count(analysis);
  std::string out;
  out += Paint(color, kBold, "ambient-doctor report") + "  node " + snapshot.node_name + "  ·  " +
         std::to_string(snapshot.netns.size()) + " netns scanned in " +
         std::to_string(static_cast<int>(snapshot.scan_ms + 0.5)) + " ms\n";
  out += "modes: ";
  bool first = true;
  for (const char* mode : {"ambient", "sidecar", "conflict", "none"}) {
    if (!first) out += ", ";
    first = false;
    out += std::string(mode) + " " + std::to_string(counts.by_mode[mode]);
  }
  out += "  ·  findings: " +
         Paint(color && counts.critical, kRed, std::to_string(counts.critical) + " critical") +
         ", " +
         Paint(color && counts.warning, kYellow, std::to_string(counts.warning) + " warning") +
         ", " + std::to_string(counts.info) + " info\n";
  for (const auto& e : snapshot.errors) {
    out += Paint(color, kYellow, "source degraded: ") + std::string(e.source()) + ": " + e.message +
           "\n";
  }

  if (snapshot.zds_collected) out += "\n" + RenderNodeSection(snapshot, color);

  // Netns table. The pod and ZDS columns appear only when their sources ran.
  const bool show_pod = std::any_of(analysis.netns.begin(), analysis.netns.end(),
                                    [](const NetnsClassification& c) { return !c.pod.empty(); });
  const bool show_zds = snapshot.zds_collected;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"NETNS", "INODE"};
  if (show_pod) header.push_back("POD");
  header.insert(header.end(), {"MODE", "BACKENDS", "FAMILIES", "VARIANT"});
  if (show_zds) header.insert(header.end(), {"ZDS", "ZTUNNEL LISTENERS"});
  header.push_back("STATUS");
  rows.push_back(header);
  size_t hidden = 0;
  for (size_t i = 0; i < snapshot.netns.size() && i < analysis.netns.size(); ++i) {
    const auto& ns = snapshot.netns[i];
    const auto& c = analysis.netns[i];
    std::string status = NetnsStatus(analysis, ns.netns.inode);
    if (!options.show_all_netns && !HasIstioState(c) && status == "ok") {
      ++hidden;
      continue;
    }
    std::string path = ns.netns.PrimaryPath();
    if (ns.netns.is_host) path += " (host)";
    std::vector<std::string> row = {path, std::to_string(ns.netns.inode)};
    if (show_pod) row.push_back(c.pod.empty() ? "-" : c.pod);
    row.insert(row.end(), {ModeText(c), BackendsText(c), JoinFamilies(c.families),
                           c.variant ? c.variant->Describe() : "-"});
    if (show_zds) {
      row.push_back(std::string(ZdsStateName(c.zds_state)));
      row.push_back(ListenersText(c));
    }
    row.push_back(status);
    rows.push_back(std::move(row));
  }
  std::vector<size_t> widths(header.size(), 0);
  for (const auto& row : rows) {
    for (size_t k = 0; k + 1 < row.size(); ++k) widths[k] = std::max(widths[k], row[k].size());
  }
  out += "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto& row = rows[r];
    std::string line;
    for (size_t k = 0; k + 1 < row.size(); ++k) line += Pad(row[k], widths[k]) + "  ";
    if (r == 0) {
      out += Paint(color, kBold, line + row.back()) + "\n";
    } else {
      out += line + Paint(color, SeverityColor(row.back()), row.back()) + "\n";
    }
  }
  if (hidden > 0) {
    out += Paint(color, kDim, "(" + std::to_string(hidden) + " netns without Istio state hidden)") +
           "\n";
  }

  // Findings.
  out += "\n";
  if (analysis.findings.empty()) {
    out += Paint(color, kGreen, "No findings: every scanned netns looks healthy.") + "\n";
    return out;
  }
  out += Paint(color, kBold, "FINDINGS") + "\n";
  for (const auto& f : analysis.findings) {
    std::string sev(SeverityName(f.severity));
    std::string upper = sev;
    std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
    out += Paint(color, SeverityColor(sev), Pad(upper, 8)) + " " +
           Paint(color, kBold, std::string(f.code_name()));
    if (!f.netns_path.empty()) {
      out += "  " + f.netns_path + " (inode " + std::to_string(f.netns_inode) + ")";
    } else if (f.netns_inode != 0) {
      out += "  netns inode " + std::to_string(f.netns_inode);
    }
    if (!f.pod.empty()) out += "  pod " + f.pod;
    out += "\n    " + f.summary + "\n";
    if (f.since_unix_ms > 0) {
      out += Paint(color, kDim, "    | ") + "first seen " + FormatUnixMs(f.since_unix_ms) + "\n";
    }
    for (const auto& e : f.evidence) out += Paint(color, kDim, "    | ") + e + "\n";
    if (!f.hint.empty()) out += "    hint: " + f.hint + "\n";
  }
  return out;
}

std::string RenderReportJson(const NodeSnapshot& snapshot, const NodeAnalysis& analysis) {
  return api::ToJson(api::BuildReport(snapshot, analysis));
}

}  // namespace ad::cli

namespace ad::cli {

std::string RenderChangeLines(const std::vector<FindingChange>& changes, int64_t taken_at_unix_ms,
                              bool color) {
  std::string out;
  const std::string stamp = FormatUnixMs(taken_at_unix_ms, true);
  for (const FindingChange& change : changes) {
    const Finding& f = change.finding;
    const bool opened = change.kind == FindingChange::Kind::kOpened;
    const std::string severity(SeverityName(f.severity));
    out += stamp + " " + Paint(color, SeverityColor(opened ? severity : "ok"), severity) +
           (opened ? " opened " : " resolved ") + Paint(color, kBold, std::string(f.code_name()));
    if (!f.netns_path.empty() || f.netns_inode != 0) {
      out += " " + (f.netns_path.empty() ? std::string("netns") : f.netns_path) + " (inode " +
             std::to_string(f.netns_inode) + ")";
    }
    if (!f.pod.empty()) out += " pod " + f.pod;
    out += ": " + f.summary + "\n";
  }
  return out;
}

std::string RenderChangesJson(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                              const std::vector<FindingChange>& changes) {
  Counts counts = Count(analysis);
  JsonWriter j(/*pretty=*/false);
  j.BeginObject();
  j.Field("schema", kChangesSchema);
  j.Field("node", snapshot.node_name);
  j.Field("taken_at_unix_ms", snapshot.taken_at_unix_ms);
  j.Key("opened").BeginArray();
  for (const auto& change : changes) {
    if (change.kind == FindingChange::Kind::kOpened) WriteFinding(j, change.finding);
  }
  j.EndArray();
  j.Key("resolved").BeginArray();
  for (const auto& change : changes) {
    if (change.kind == FindingChange::Kind::kResolved) WriteFinding(j, change.finding);
  }
  j.EndArray();
  j.Key("findings").BeginObject();
  j.Field("critical", counts.critical).Field("warning", counts.warning).Field("info", counts.info);
  j.EndObject();
  j.EndObject();
  return j.str() + "\n";
}

}  // namespace ad::cli
