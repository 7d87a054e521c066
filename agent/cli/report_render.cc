#include "cli/report_render.h"

#include <algorithm>
#include <map>
#include <string_view>

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

}  // namespace

std::string NetnsStatus(const NodeAnalysis& analysis, uint64_t inode) {
  int worst = -1;
  for (const auto& f : analysis.findings) {
    if (f.netns_inode == inode) worst = std::max(worst, static_cast<int>(f.severity));
  }
  return worst < 0 ? "ok" : std::string(SeverityName(static_cast<Severity>(worst)));
}

int ReportExitCode(const NodeAnalysis& analysis) {
  bool serious = std::any_of(analysis.findings.begin(), analysis.findings.end(),
                             [](const Finding& f) { return f.severity >= Severity::kWarning; });
  return serious ? 1 : 0;
}

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
    out += Paint(color, kYellow, "source degraded: ") + e.source + ": " + e.message + "\n";
  }

  // Netns table.
  struct Row {
    std::string netns, inode, mode, backends, families, variant, status;
  };
  std::vector<Row> rows;
  rows.push_back({"NETNS", "INODE", "MODE", "BACKENDS", "FAMILIES", "VARIANT", "STATUS"});
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
    rows.push_back({path, std::to_string(ns.netns.inode), ModeText(c), BackendsText(c),
                    JoinFamilies(c.families), c.variant ? c.variant->Describe() : "-", status});
  }
  size_t w[6] = {0, 0, 0, 0, 0, 0};
  for (const auto& r : rows) {
    const std::string* cols[6] = {&r.netns,    &r.inode,    &r.mode,
                                  &r.backends, &r.families, &r.variant};
    for (int k = 0; k < 6; ++k) w[k] = std::max(w[k], cols[k]->size());
  }
  out += "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    std::string line = Pad(row.netns, w[0]) + "  " + Pad(row.inode, w[1]) + "  " +
                       Pad(row.mode, w[2]) + "  " + Pad(row.backends, w[3]) + "  " +
                       Pad(row.families, w[4]) + "  " + Pad(row.variant, w[5]) + "  ";
    if (r == 0) {
      out += Paint(color, kBold, line + row.status) + "\n";
    } else {
      out += line + Paint(color, SeverityColor(row.status), row.status) + "\n";
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
    out += Paint(color, SeverityColor(sev), Pad(upper, 8)) + " " + Paint(color, kBold, f.code) +
           "  " + f.netns_path + " (inode " + std::to_string(f.netns_inode) + ")";
    if (!f.pod.empty()) out += "  pod " + f.pod;
    out += "\n    " + f.summary + "\n";
    for (const auto& e : f.evidence) out += Paint(color, kDim, "    | ") + e + "\n";
    if (!f.hint.empty()) out += "    hint: " + f.hint + "\n";
  }
  return out;
}

std::string RenderReportJson(const NodeSnapshot& snapshot, const NodeAnalysis& analysis) {
  Counts counts = Count(analysis);
  JsonWriter j;
  j.BeginObject();
  j.Field("schema", kReportSchema);
  j.Key("node").BeginObject();
  j.Field("name", snapshot.node_name);
  j.Field("taken_at_unix_ms", snapshot.taken_at_unix_ms);
  j.Field("scan_ms", snapshot.scan_ms);
  j.Key("errors").BeginArray();
  for (const auto& e : snapshot.errors) {
    j.BeginObject().Field("source", e.source).Field("message", e.message).EndObject();
  }
  j.EndArray();
  j.EndObject();

  j.Key("summary").BeginObject();
  j.Field("netns_scanned", static_cast<uint64_t>(snapshot.netns.size()));
  j.Key("by_mode").BeginObject();
  for (const char* mode : {"ambient", "sidecar", "conflict", "none"}) {
    j.Field(mode, counts.by_mode[mode]);
  }
  j.EndObject();
  j.Key("findings").BeginObject();
  j.Field("critical", counts.critical).Field("warning", counts.warning).Field("info", counts.info);
  j.EndObject();
  j.EndObject();

  j.Key("netns").BeginArray();
  for (size_t i = 0; i < snapshot.netns.size() && i < analysis.netns.size(); ++i) {
    const auto& ns = snapshot.netns[i];
    const auto& c = analysis.netns[i];
    j.BeginObject();
    j.Field("path", ns.netns.PrimaryPath());
    j.StringArray("paths", ns.netns.paths);
    j.Field("inode", ns.netns.inode);
    j.Field("host", ns.netns.is_host);
    j.Key("pids").BeginArray();
    for (int pid : ns.netns.pids) j.Int(pid);
    j.EndArray();
    j.Field("mode", DataplaneModeName(c.mode));
    std::vector<std::string> names;
    for (Backend b : c.ambient_backends) names.emplace_back(BackendName(b));
    j.StringArray("ambient_backends", names);
    names.clear();
    for (Backend b : c.sidecar_backends) names.emplace_back(BackendName(b));
    j.StringArray("sidecar_backends", names);
    names.clear();
    for (Family f : c.families) names.emplace_back(FamilyName(f));
    j.StringArray("families", names);
    if (c.variant) {
      j.Key("variant").BeginObject();
      j.Field("dns_capture", c.variant->dns_capture);
      j.Field("ingress_mode", c.variant->ingress_mode);
      j.StringArray("virtual_interfaces", c.variant->virtual_interfaces);
      j.Field("ipv6", c.variant->ipv6);
      j.EndObject();
    } else {
      j.Key("variant").Null();
    }
    j.Field("host_rules", c.host_rules_present);
    names.clear();
    for (Backend b : c.host_backends) names.emplace_back(BackendName(b));
    j.StringArray("host_backends", names);
    j.Field("status", NetnsStatus(analysis, ns.netns.inode));
    j.Field("unreadable", ns.unreadable);
    j.Key("errors").BeginArray();
    for (const auto& e : ns.errors) {
      j.BeginObject().Field("source", e.source).Field("message", e.message).EndObject();
    }
    j.EndArray();
    j.Field("scan_ms", ns.scan_ms);
    j.EndObject();
  }
  j.EndArray();

  j.Key("findings").BeginArray();
  for (const auto& f : analysis.findings) {
    j.BeginObject();
    j.Field("code", f.code);
    j.Field("severity", SeverityName(f.severity));
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
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.str();
}

}  // namespace ad::cli
