#include "cli/report_render.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <string_view>

#include "ambientdoctor/v1/documents.pb.h"
#include "api/report_proto.h"

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

template <typename Strings>
std::string JoinOrDash(const Strings& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ",") + std::string(w);
  return out.empty() ? "-" : out;
}

std::string ModeText(const pb::NetnsEntry& e) {
  if (e.host()) return e.mode() == "none" ? "host" : "host+" + e.mode();
  return e.mode();
}

// Backend names sort like the Backend enum (iptables-legacy, iptables-nft, nft).
std::string BackendsText(const pb::NetnsEntry& e) {
  std::set<std::string> all(e.ambient_backends().begin(), e.ambient_backends().end());
  all.insert(e.sidecar_backends().begin(), e.sidecar_backends().end());
  all.insert(e.host_backends().begin(), e.host_backends().end());
  return JoinOrDash(all);
}

std::string VariantText(const pb::NetnsEntry& e) {
  if (!e.has_variant()) return "-";
  const pb::AmbientVariant& v = e.variant();
  AmbientVariant variant{
      .dns_capture = v.dns_capture(),
      .ingress_mode = v.ingress_mode(),
      .virtual_interfaces = {v.virtual_interfaces().begin(), v.virtual_interfaces().end()},
      .ipv6 = v.ipv6()};
  return variant.Describe();
}

bool HasIstioState(const pb::NetnsEntry& e) { return e.mode() != "none" || e.host_rules(); }

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

int64_t Ms(double unix_ms) { return static_cast<int64_t>(unix_ms); }

std::string ListenersText(const pb::NetnsEntry& e) {
  std::string out;
  for (uint32_t port : e.ztunnel_listeners())
    out += (out.empty() ? "" : ",") + std::to_string(port);
  return out.empty() ? "-" : out;
}

template <typename Pids>
std::string ProcessLabel(const pb::Node& node, const Pids& pids) {
  if (pids.empty()) return "owner unknown";
  std::string out;
  for (int pid : pids) {
    std::string role = "pid";
    for (const pb::Process& p : node.processes()) {
      if (p.pid() == pid && p.role() != "other") role = p.role() + " pid";
    }
    out += (out.empty() ? "" : ", ") + role + " " + std::to_string(pid);
  }
  return out;
}

template <typename Errors>
std::string DegradedLines(bool color, const Errors& errors, std::string_view indent) {
  std::string out;
  for (const pb::SourceError& e : errors) {
    out += Paint(color, kYellow, std::string(indent) + "source degraded: ") + e.source() + ": " +
           e.message() + "\n";
  }
  return out;
}

// The node's hand-off plumbing: ZDS socket, istio-cni and ztunnel processes, CRI.
std::string RenderNodeSection(const pb::Node& node, bool color) {
  std::string out;
  const pb::ZdsSocket& zds = node.zds();
  out += Paint(color, kBold, "ZDS socket") + " " + (zds.path().empty() ? "-" : zds.path()) + ": ";
  if (zds.listener_found()) {
    out += "listener " + ProcessLabel(node, zds.listener().owner_pids()) + ", " +
           std::to_string(zds.accepted_size()) + " connection(s), accept backlog " +
           std::to_string(zds.listener().backlog()) + "\n";
  } else {
    out += zds.errors().empty() ? "no listener\n" : "not readable\n";
  }
  for (const pb::UnixSocket& accepted : zds.accepted()) {
    google::protobuf::RepeatedField<int32_t> peer_owners;
    for (const pb::UnixSocket& client : zds.clients()) {
      if (client.inode() == accepted.peer_inode()) peer_owners = client.owner_pids();
    }
    out += "  connection " + std::to_string(accepted.inode()) + " <-> " +
           std::to_string(accepted.peer_inode()) + ": " +
           ProcessLabel(node, accepted.owner_pids()) + " <-> " + ProcessLabel(node, peer_owners) +
           ", recv-q " + std::to_string(accepted.receive_queue()) + ", send-q " +
           std::to_string(accepted.send_queue()) + "\n";
  }
  out += DegradedLines(color, zds.errors(), "  ");
  for (const pb::Process& p : node.processes()) {
    if (p.role() != "istio-cni") continue;
    out += "istio-cni pid " + std::to_string(p.pid()) + ": holds " +
           std::to_string(p.netns_fd_inodes_size()) + " netns";
    if (p.start_time_unix_ms() > 0) out += ", started " + FormatUnixMs(Ms(p.start_time_unix_ms()));
    out += "\n";
  }
  std::vector<int> listed;
  for (const pb::Ztunnel& z : node.ztunnels()) {
    listed.push_back(z.pid());
    std::string line = (z.pid() > 0 ? "ztunnel pid " + std::to_string(z.pid())
                                    : std::string("ztunnel (pid unknown)")) +
                       ": ";
    if (!z.has_ready()) {
      line += "readiness unknown";
    } else if (z.ready()) {
      line += Paint(color, kGreen, "ready");
    } else {
      std::string pending;
      for (const auto& t : z.pending_tasks()) pending += (pending.empty() ? "" : ", ") + t;
      line +=
          Paint(color, kRed, "not ready") + (pending.empty() ? "" : " (pending: " + pending + ")");
    }
    for (const pb::Process& p : node.processes()) {
      if (p.pid() != z.pid()) continue;
      line += ", holds " + std::to_string(p.netns_fd_inodes_size()) + " netns";
      if (p.start_time_unix_ms() > 0) {
        line += ", started " + FormatUnixMs(Ms(p.start_time_unix_ms()));
      }
    }
    if (z.has_active_proxy_count()) {
      line += ", " + std::to_string(static_cast<int64_t>(z.active_proxy_count())) + " active";
      if (z.has_pending_proxy_count()) {
        line += " / " + std::to_string(static_cast<int64_t>(z.pending_proxy_count())) + " pending";
      }
      line += " proxies";
    }
    line += ", " + std::to_string(z.workload_state_size()) + " workloadState entries";
    if (!z.admin_reachable()) line += ", admin not reachable";
    out += line + "\n";
    out += DegradedLines(color, z.errors(), "  ");
  }
  for (const pb::Process& p : node.processes()) {
    if (p.role() != "ztunnel" || std::find(listed.begin(), listed.end(), p.pid()) != listed.end()) {
      continue;
    }
    out += "ztunnel pid " + std::to_string(p.pid()) + ": admin not queried, holds " +
           std::to_string(p.netns_fd_inodes_size()) + " netns\n";
  }
  if (node.processes().empty() && node.ztunnels().empty()) {
    out += "no istio-cni or ztunnel process found\n";
  }
  const pb::Cri& cri = node.cri();
  if (cri.available()) {
    out += "CRI " + (cri.runtime().empty() ? std::string("runtime") : cri.runtime()) + " at " +
           cri.endpoint() + ": " + std::to_string(cri.pods()) + " pod sandboxes\n";
  } else {
    out += "CRI: not available (pods are not named)\n";
  }
  out += DegradedLines(color, cri.errors(), "  ");
  return out;
}

// The origin line under the header: which path produced the report, and why.
std::string OriginLine(const pb::ReportOrigin& origin, bool color) {
  std::string out = Paint(color, kBold, "source") + " ";
  if (origin.source() == "daemon") {
    out += "daemon unix:" + origin.api_socket() + "  ·  result #" +
           std::to_string(static_cast<uint64_t>(origin.sequence()));
    if (!origin.trigger().empty()) out += " (" + origin.trigger() + " scan)";
    out += ", " + FormatDuration(Ms(origin.age_ms())) + " old  ·  with history";
  } else if (origin.source() == "capture") {
    out += "capture " + origin.capture_file() + " (taken by ambient-doctor " +
           origin.captured_by() + (origin.captured_from() == "daemon" ? " from its daemon" : "") +
           ", " + FormatDuration(Ms(origin.age_ms())) + " ago)  ·  " +
           (origin.history() ? "with daemon history" : "no daemon history");
  } else {
    out += "local scan";
    if (!origin.fallback_reason().empty()) out += " (" + origin.fallback_reason() + ")";
    out += "  ·  no daemon history";
  }
  return out + "\n";
}

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::toupper);
  return s;
}

std::string NetnsText(const pb::NetnsRef& netns) {
  if (!netns.path().empty()) {
    return netns.path() + " (inode " + std::to_string(netns.inode()) + ")";
  }
  if (netns.inode() != 0) return "netns inode " + std::to_string(netns.inode());
  return "";
}

// History lines of one open finding (daemon only): how long it has been open.
std::string HistoryLine(const pb::Finding& f, int64_t taken_at, bool color) {
  if (!f.has_first_seen_unix_ms()) return "";
  const int64_t first = Ms(f.first_seen_unix_ms());
  std::string out = Paint(color, kDim, "    | ") + "open for " +
                    FormatDuration(std::max<int64_t>(0, taken_at - first)) + ": first seen " +
                    FormatUnixMs(first);
  if (f.has_last_seen_unix_ms()) out += ", last seen " + FormatUnixMs(Ms(f.last_seen_unix_ms()));
  return out + "\n";
}

std::string RecentlyResolvedSection(const pb::Report& report, const RenderOptions& options) {
  const bool color = options.color;
  std::vector<const pb::Finding*> resolved;
  for (const pb::Finding& f : report.recently_resolved()) resolved.push_back(&f);
  if (resolved.empty()) return "";
  std::stable_sort(resolved.begin(), resolved.end(),
                   [](const pb::Finding* a, const pb::Finding* b) {
                     return a->resolved_at_unix_ms() > b->resolved_at_unix_ms();
                   });
  std::string out = "\n" + Paint(color, kBold, "RECENTLY RESOLVED") + " (" +
                    std::to_string(resolved.size()) + ", newest first)\n";
  const size_t shown = std::min(resolved.size(), options.max_recently_resolved);
  for (size_t i = 0; i < shown; ++i) {
    const pb::Finding& f = *resolved[i];
    out += Paint(color, kGreen, "resolved") + " " +
           (f.has_resolved_at_unix_ms() ? FormatUnixMs(Ms(f.resolved_at_unix_ms())) : "-") + "  " +
           Pad(f.severity(), 8) + " " + Paint(color, kBold, f.code());
    if (const std::string netns = NetnsText(f.netns()); !netns.empty()) out += "  " + netns;
    if (f.has_pod()) out += "  pod " + f.pod();
    out += "\n    " + f.summary();
    if (f.has_first_seen_unix_ms() && f.has_resolved_at_unix_ms()) {
      out += " (was open " +
             FormatDuration(
                 std::max<int64_t>(0, Ms(f.resolved_at_unix_ms()) - Ms(f.first_seen_unix_ms()))) +
             ", since " + FormatUnixMs(Ms(f.first_seen_unix_ms())) + ")";
    }
    out += "\n";
  }
  if (shown < resolved.size()) {
    out += Paint(color, kDim,
                 "(" + std::to_string(resolved.size() - shown) +
                     " older resolved findings not shown; -o json lists them all)") +
           "\n";
  }
  return out;
}

// changes/v1's form of a finding: no history, null for an unknown pod or start.
void FillChangedFinding(const pb::Finding& f, pb::ChangedFinding* out) {
  out->set_code(f.code());
  out->set_severity(f.severity());
  out->set_subject(f.subject());
  *out->mutable_netns() = f.netns();
  if (f.has_pod()) {
    out->mutable_pod()->set_string_value(f.pod());
  } else {
    out->mutable_pod()->set_null_value(google::protobuf::NULL_VALUE);
  }
  out->set_summary(f.summary());
  *out->mutable_evidence() = f.evidence();
  out->set_hint(f.hint());
  if (f.has_since_unix_ms()) {
    out->mutable_since_unix_ms()->set_number_value(static_cast<double>(Ms(f.since_unix_ms())));
  } else {
    out->mutable_since_unix_ms()->set_null_value(google::protobuf::NULL_VALUE);
  }
}

}  // namespace

std::string FormatUnixMs(int64_t unix_ms, bool with_millis) {
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

std::string FormatDuration(int64_t ms) {
  char text[32];
  const int64_t s = std::max<int64_t>(0, ms) / 1000;
  if (ms < 10000) {
    std::snprintf(text, sizeof(text), "%.1f s",
                  static_cast<double>(std::max<int64_t>(0, ms)) / 1e3);
  } else if (s < 120) {
    std::snprintf(text, sizeof(text), "%lld s", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  } else {
    std::snprintf(text, sizeof(text), "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s / 3600 % 24));
  }
  return text;
}

std::string RenderReportTable(const pb::Report& report, const RenderOptions& options) {
  const bool color = options.color;
  const pb::Node& node = report.node();
  const pb::Summary& summary = report.summary();
  const pb::SeverityCounts& counts = summary.findings();
  std::string out;
  out += Paint(color, kBold, "ambient-doctor report") + "  node " + node.name() + "  ·  " +
         std::to_string(summary.netns_scanned()) + " netns scanned in " +
         std::to_string(static_cast<int>(node.scan_ms() + 0.5)) + " ms\n";
  if (report.has_origin()) out += OriginLine(report.origin(), color);
  const pb::ModeCounts& modes = summary.by_mode();
  out += "modes: ambient " + std::to_string(modes.ambient()) + ", sidecar " +
         std::to_string(modes.sidecar()) + ", conflict " + std::to_string(modes.conflict()) +
         ", none " + std::to_string(modes.none());
  out += "  ·  findings: " +
         Paint(color && counts.critical(), kRed, std::to_string(counts.critical()) + " critical") +
         ", " +
         Paint(color && counts.warning(), kYellow, std::to_string(counts.warning()) + " warning") +
         ", " + std::to_string(counts.info()) + " info\n";
  out += DegradedLines(color, node.errors(), "");
  out += DegradedLines(color, node.probe_path().errors(), "");  // conntrack (probe path)
  if (node.has_cni() && !node.cni().not_judged().empty()) {
    out += Paint(color, kBold, "CNI chain not judged: ") + node.cni().not_judged() + "\n";
  }

  if (report.has_kubernetes()) out += KubernetesLine(report.kubernetes(), color);
  if (node.zds_collected()) out += "\n" + RenderNodeSection(node, color);

  // Netns table. The pod and ZDS columns appear only when their sources ran.
  const bool show_pod = std::any_of(report.netns().begin(), report.netns().end(),
                                    [](const pb::NetnsEntry& e) { return e.has_pod(); });
  const bool show_zds = node.zds_collected();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"NETNS", "INODE"};
  if (show_pod) header.push_back("POD");
  header.insert(header.end(), {"MODE", "BACKENDS", "FAMILIES", "VARIANT"});
  if (show_zds) header.insert(header.end(), {"ZDS", "ZTUNNEL LISTENERS"});
  header.push_back("STATUS");
  rows.push_back(header);
  size_t hidden = 0;
  for (const pb::NetnsEntry& e : report.netns()) {
    if (!options.show_all_netns && !HasIstioState(e) && e.status() == "ok") {
      ++hidden;
      continue;
    }
    std::string path = e.path();
    if (e.host()) path += " (host)";
    std::vector<std::string> row = {path, std::to_string(e.inode())};
    if (show_pod) row.push_back(e.has_pod() && !e.pod().empty() ? e.pod() : "-");
    row.insert(row.end(), {ModeText(e), BackendsText(e), JoinOrDash(e.families()), VariantText(e)});
    if (show_zds) {
      row.push_back(e.zds_state());
      row.push_back(ListenersText(e));
    }
    row.push_back(e.status());
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
  const int64_t taken_at = Ms(node.taken_at_unix_ms());
  if (report.findings().empty()) {
    out += Paint(color, kGreen, "No findings: every scanned netns looks healthy.") + "\n";
    return out + RecentlyResolvedSection(report, options);
  }
  out += Paint(color, kBold, "FINDINGS") + "\n";
  for (const pb::Finding& f : report.findings()) out += RenderFindingBlock(f, taken_at, color);
  return out + RecentlyResolvedSection(report, options);
}

std::string RenderFindingBlock(const pb::Finding& f, int64_t taken_at, bool color) {
  std::string out = Paint(color, SeverityColor(f.severity()), Pad(Upper(f.severity()), 8)) + " " +
                    Paint(color, kBold, f.code());
  if (const std::string netns = NetnsText(f.netns()); !netns.empty()) out += "  " + netns;
  if (f.has_pod() && !f.pod().empty()) out += "  pod " + f.pod();
  out += "\n    " + f.summary() + "\n";
  if (f.has_since_unix_ms() && f.since_unix_ms() > 0) {
    out += Paint(color, kDim, "    | ") + "first seen " + FormatUnixMs(Ms(f.since_unix_ms()));
    // With daemon history the condition's age is known: say it.
    if (f.has_first_seen_unix_ms()) {
      out +=
          " (" + FormatDuration(std::max<int64_t>(0, taken_at - Ms(f.since_unix_ms()))) + " ago)";
    }
    out += "\n";
  }
  out += HistoryLine(f, taken_at, color);
  for (const auto& e : f.evidence()) out += Paint(color, kDim, "    | ") + e + "\n";
  if (!f.hint().empty()) out += "    hint: " + f.hint() + "\n";
  return out;
}

std::string KubernetesLine(const pb::Kubernetes& kube, bool color) {
  std::string out = Paint(color, kBold, "kubernetes: ");
  if (!kube.enabled()) return out + "off (--no-kube-api): desired state not judged\n";
  if (!kube.not_judged().empty()) {
    return out + Paint(color, kYellow, "desired state not judged: ") + kube.not_judged() + "\n";
  }
  const pb::DesiredCounts& desired = kube.pods_desired();
  out += kube.server() + ", node " + kube.node() + "  ·  pods meant for ambient " +
         std::to_string(desired.ambient()) + ", not " + std::to_string(desired.not_ambient());
  if (desired.unknown() > 0) out += ", unknown " + std::to_string(desired.unknown());
  if (!kube.istio_cni_pod().empty()) {
    out += "  ·  istio-cni " + kube.istio_cni_pod() + " " +
           (kube.istio_cni_ready() ? Paint(color, kGreen, "ready")
                                   : Paint(color, kYellow, "not ready"));
  }
  if (kube.cni_not_ready_taint()) {
    out += "  ·  " + Paint(color, kYellow, "taint cni.istio.io/not-ready");
  }
  return out + "\n";
}

std::string RenderReportJson(const pb::Report& report) { return api::ToJson(report); }

ChangeSet LocalChangeSet(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                         const std::vector<FindingChange>& changes) {
  ChangeSet set;
  set.node = snapshot.node_name;
  set.taken_at_unix_ms = static_cast<double>(snapshot.taken_at_unix_ms);
  for (const FindingChange& change : changes) {
    set.changes.push_back(
        {change.kind == FindingChange::Kind::kOpened, api::BuildFinding(change.finding)});
  }
  for (const Finding& f : analysis.findings) {
    switch (f.severity) {
      case Severity::kCritical:
        set.open_findings.set_critical(set.open_findings.critical() + 1);
        break;
      case Severity::kWarning:
        set.open_findings.set_warning(set.open_findings.warning() + 1);
        break;
      case Severity::kInfo:
        set.open_findings.set_info(set.open_findings.info() + 1);
        break;
    }
  }
  return set;
}

std::string RenderChangeLines(const ChangeSet& set, bool color) {
  std::string out;
  const std::string stamp = FormatUnixMs(Ms(set.taken_at_unix_ms), true);
  for (const ChangeSet::Change& change : set.changes) {
    const pb::Finding& f = change.finding;
    out += stamp + " " +
           Paint(color, SeverityColor(change.opened ? f.severity() : "ok"), f.severity());
    out += (change.opened ? " opened " : " resolved ") + Paint(color, kBold, f.code());
    if (!f.netns().path().empty() || f.netns().inode() != 0) {
      out += " " + (f.netns().path().empty() ? std::string("netns") : f.netns().path()) +
             " (inode " + std::to_string(f.netns().inode()) + ")";
    }
    if (f.has_pod() && !f.pod().empty()) out += " pod " + f.pod();
    out += ": " + f.summary() + "\n";
  }
  return out;
}

std::string RenderChangesJson(const ChangeSet& set) {
  pb::ChangesDocument doc;
  doc.set_schema(kChangesSchema);
  doc.set_node(set.node);
  doc.set_taken_at_unix_ms(static_cast<double>(Ms(set.taken_at_unix_ms)));
  for (const auto& change : set.changes) {
    FillChangedFinding(change.finding, change.opened ? doc.add_opened() : doc.add_resolved());
  }
  *doc.mutable_findings() = set.open_findings;
  return api::ToJson(doc, /*compact=*/true) + "\n";
}

}  // namespace ad::cli

namespace ad::cli {
namespace {

std::string_view VerdictColor(std::string_view code) {
  if (code == "in_mesh" || code == "out_of_mesh") return kGreen;
  if (code == "not_in_mesh") return kRed;
  return kYellow;
}

std::string Labelled(bool color, std::string_view label, const std::string& text) {
  return Paint(color, kBold, Pad(std::string(label), 15)) + text + "\n";
}

// The paired netns: how it was found, its rules per backend, the ZDS hand-off and listeners.
std::string PodNetnsLines(const pb::PodReport& pod, bool color) {
  std::string out;
  if (!pod.has_netns()) {
    return Labelled(color, "netns", "not paired: " + pod.pairing_detail());
  }
  const pb::NetnsEntry& e = pod.netns();
  out += Labelled(color, "netns", e.path() + " (inode " + std::to_string(e.inode()) + ")");
  out += Labelled(color, "paired by", pod.pairing() + ": " + pod.pairing_detail());
  std::string rules = pod.redirect();
  if (!pod.redirect_detail().empty()) rules += ": " + pod.redirect_detail();
  out += Labelled(color, "rules", rules);
  out += Labelled(color, "",
                  "mode " + ModeText(e) + ", backends " + BackendsText(e) + ", families " +
                      JoinOrDash(e.families()) + ", variant " + VariantText(e) + ", status " +
                      e.status());
  if (!e.zds_state().empty()) {
    out += Labelled(color, "ZDS hand-off", e.zds_state());
    out += Labelled(color, "ztunnel", "listeners " + ListenersText(e));
  }
  return out;
}

std::string PodFlowLines(const pb::PodReport& pod, bool color) {
  if (pod.flows().empty()) return {};
  std::string out = Paint(color, kBold, "recent flows") + "\n";
  for (const pb::Flow& flow : pod.flows()) {
    const pb::FiveTuple& t = flow.tuple();
    out += "  " + Pad(flow.role(), 7) + t.src_ip() + ":" + std::to_string(t.src_port()) + " -> " +
           t.dst_ip() + ":" + std::to_string(t.dst_port()) + "  " + flow.outcome() + ", " +
           std::to_string(flow.bytes_sent()) + " B sent, " + std::to_string(flow.bytes_received()) +
           " B received\n";
  }
  return out;
}

}  // namespace

std::string RenderPodText(const pb::PodReport& pod, bool color) {
  std::string out = Paint(color, kBold, "pod " + pod.pod());
  if (!pod.node().empty()) out += "  on node " + pod.node();
  out += "\n" + Paint(color, VerdictColor(pod.verdict_code()), pod.verdict()) + "\n\n";
  if (pod.location() != "this_node" || pod.desired_state().empty()) {
    if (!pod.kubernetes().not_judged().empty()) {
      out += Labelled(color, "kubernetes", "not judged: " + pod.kubernetes().not_judged());
    }
    return out;
  }
  out += Labelled(color, "desired",
                  pod.desired_state() + " (" + pod.desired_reason() + "): " + pod.desired_why());
  out += Labelled(color, "judged",
                  pod.judgeable() ? "yes: " + pod.judge_why()
                                  : "no (" + pod.judge_block() + "): " + pod.judge_why());
  out += Labelled(color, "annotation",
                  pod.has_redirection_annotation()
                      ? "ambient.istio.io/redirection=" + pod.redirection_annotation()
                      : "ambient.istio.io/redirection not set");
  out += PodNetnsLines(pod, color);
  for (const std::string& note : pod.notes()) out += Labelled(color, "note", note);
  out += PodFlowLines(pod, color);
  out += "\n";
  if (pod.findings().empty()) {
    return out + Paint(color, kGreen, "No findings for this pod or its netns.") + "\n";
  }
  out += Paint(color, kBold, "FINDINGS") + "\n";
  const int64_t taken_at = Ms(pod.taken_at_unix_ms());
  for (const pb::Finding& f : pod.findings()) out += RenderFindingBlock(f, taken_at, color);
  return out;
}

std::string RenderPodJson(const pb::PodReport& pod) { return api::ToJson(pod); }

int PodExitCode(const pb::PodReport& pod) {
  if (pod.location() != "this_node") return kExitScanFailed;
  const bool serious = std::any_of(pod.findings().begin(), pod.findings().end(),
                                   [](const pb::Finding& f) { return f.severity() != "info"; });
  if (serious || pod.verdict_code() == "not_in_mesh" ||
      pod.verdict_code() == "enrolled_against_intent") {
    return 1;
  }
  return pod.verdict_code() == "not_judged" ? kExitScanFailed : 0;
}

}  // namespace ad::cli
