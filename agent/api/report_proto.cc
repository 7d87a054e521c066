#include "api/report_proto.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "api/kube_proto.h"
#include "report/report_policy.h"

namespace ad::api {
namespace {

// nsfs and sockfs inode numbers are 32-bit in the kernel (proc_inum, get_next_ino).
uint32_t Inode(uint64_t inode) { return static_cast<uint32_t>(inode); }
double Ms(int64_t unix_ms) { return static_cast<double>(unix_ms); }
std::string_view MatchKindName(MatchKind k) {
  switch (k) {
    case MatchKind::kProtocol:
      return "protocol";
    case MatchKind::kSrcAddr:
      return "src_addr";
    case MatchKind::kDstAddr:
      return "dst_addr";
    case MatchKind::kSrcPort:
      return "src_port";
    case MatchKind::kDstPort:
      return "dst_port";
    case MatchKind::kInIface:
      return "in_iface";
    case MatchKind::kOutIface:
      return "out_iface";
    case MatchKind::kMark:
      return "mark";
    case MatchKind::kConnmark:
      return "connmark";
    case MatchKind::kSet:
      return "set";
    case MatchKind::kSocketExists:
      return "socket_exists";
    case MatchKind::kSocketUid:
      return "socket_uid";
    case MatchKind::kSocketGid:
      return "socket_gid";
    case MatchKind::kCtState:
      return "ct_state";
    case MatchKind::kAddrType:
      return "addr_type";
    case MatchKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string_view ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kContinue:
      return "continue";
    case ActionKind::kAccept:
      return "accept";
    case ActionKind::kDrop:
      return "drop";
    case ActionKind::kReject:
      return "reject";
    case ActionKind::kReturn:
      return "return";
    case ActionKind::kJump:
      return "jump";
    case ActionKind::kGoto:
      return "goto";
    case ActionKind::kRedirect:
      return "redirect";
    case ActionKind::kDnat:
      return "dnat";
    case ActionKind::kSnat:
      return "snat";
    case ActionKind::kMasquerade:
      return "masquerade";
    case ActionKind::kTproxy:
      return "tproxy";
    case ActionKind::kSetMark:
      return "set_mark";
    case ActionKind::kSetConnmark:
      return "set_connmark";
    case ActionKind::kRestoreConnmark:
      return "restore_connmark";
    case ActionKind::kSaveConnmark:
      return "save_connmark";
    case ActionKind::kCtZone:
      return "ct_zone";
    case ActionKind::kNotrack:
      return "notrack";
    case ActionKind::kLog:
      return "log";
    case ActionKind::kVerdictMap:
      return "verdict_map";
    case ActionKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

template <typename Repeated>
void AddErrors(const std::vector<SourceError>& errors, Repeated* out) {
  for (const SourceError& e : errors) {
    pb::SourceError* error = out->Add();
    error->set_source(std::string(e.source()));
    error->set_message(e.message);
  }
}

template <typename Repeated>
void AddBackends(const std::set<Backend>& backends, Repeated* out) {
  for (Backend b : backends) out->Add(std::string(BackendName(b)));
}

void FillUnixSocket(const UnixSocket& socket, pb::UnixSocket* out) {
  out->set_inode(Inode(socket.inode));
  out->set_peer_inode(Inode(socket.peer_inode));
  out->set_receive_queue(socket.receive_queue);
  out->set_send_queue(socket.send_queue);
  out->mutable_owner_pids()->Add(socket.owner_pids.begin(), socket.owner_pids.end());
}

void FillNode(const NodeSnapshot& snapshot, pb::Node* node) {
  node->set_name(snapshot.node_name);
  node->set_taken_at_unix_ms(Ms(snapshot.taken_at_unix_ms));
  node->set_scan_ms(snapshot.scan_ms);
  AddErrors(snapshot.errors, node->mutable_errors());
  node->set_zds_collected(snapshot.zds_collected);
  if (snapshot.zds_collected) {
    const ZdsSocketState& zds = snapshot.zds;
    pb::ZdsSocket* out = node->mutable_zds();
    out->set_path(zds.path);
    out->set_listener_found(zds.listener_found);
    if (zds.listener_found) {
      pb::ZdsListener* listener = out->mutable_listener();
      listener->set_inode(Inode(zds.listener.inode));
      listener->mutable_owner_pids()->Add(zds.listener.owner_pids.begin(),
                                          zds.listener.owner_pids.end());
      listener->set_backlog(static_cast<uint32_t>(
          std::max<size_t>(zds.listener.receive_queue, zds.listener.pending_client_inodes.size())));
    }
    for (const UnixSocket& s : zds.accepted) FillUnixSocket(s, out->add_accepted());
    for (const UnixSocket& s : zds.clients) FillUnixSocket(s, out->add_clients());
    AddErrors(zds.errors, out->mutable_errors());
  }
  for (const ProcessNetnsFds& p : snapshot.processes) {
    pb::Process* out = node->add_processes();
    out->set_pid(p.pid);
    out->set_comm(p.comm);
    out->set_role(std::string(ProcessRoleName(p.role)));
    out->set_start_time_unix_ms(Ms(p.start_time_unix_ms));
    out->set_own_netns_inode(Inode(p.own_netns_inode));
    for (uint64_t inode : p.netns_fd_inodes) out->add_netns_fd_inodes(Inode(inode));
  }
  for (const ZtunnelAdminState& z : snapshot.ztunnels) {
    pb::Ztunnel* out = node->add_ztunnels();
    out->set_pid(z.pid);
    out->set_netns_inode(Inode(z.netns_inode));
    out->set_admin_reachable(z.admin_reachable);
    if (z.ready.has_value()) out->set_ready(*z.ready);
    for (const std::string& task : z.pending_tasks) out->add_pending_tasks(task);
    for (const ZtunnelWorkloadState& w : z.workload_state) {
      pb::ZtunnelWorkloadState* state = out->add_workload_state();
      state->set_pod_uid(w.pod_uid);
      state->set_state(w.state);
      if (!w.name.empty()) state->set_pod(w.namespace_name + "/" + w.name);
    }
    out->set_workloads(static_cast<uint32_t>(z.workloads_seen));
    if (z.active_proxy_count) out->set_active_proxy_count(*z.active_proxy_count);
    if (z.pending_proxy_count) out->set_pending_proxy_count(*z.pending_proxy_count);
    AddErrors(z.errors, out->mutable_errors());
    for (const ZtunnelCertificate& c : z.certificates) {
      pb::ZtunnelCertificate* certificate = out->add_certificates();
      certificate->set_identity(c.identity);
      certificate->set_state(c.state);
      certificate->set_expires_unix_ms(Ms(c.expires_unix_ms));
      certificate->set_chain_length(static_cast<uint32_t>(c.chain_length));
    }
  }
  for (const ZtunnelResourceUsage& r : snapshot.ztunnel_resources) {
    pb::ZtunnelResources* out = node->add_ztunnel_resources();
    out->set_pid(r.pid);
    // Kernel bounds both by nr_open (< 2^32).
    out->set_open_fds(static_cast<uint32_t>(std::min<uint64_t>(r.open_fds, UINT32_MAX)));
    out->set_fd_soft_limit(static_cast<uint32_t>(std::min<uint64_t>(r.fd_soft_limit, UINT32_MAX)));
    out->set_fd_limit_unlimited(r.fd_limit_unlimited);
    out->set_rss_bytes(static_cast<double>(r.rss_bytes));
    out->set_memory_limit_bytes(static_cast<double>(r.memory_limit_bytes));
    out->set_memory_unlimited(r.memory_unlimited);
    out->set_cgroup(r.cgroup);
    for (uint32_t count : r.close_wait_counts) out->add_close_wait_counts(count);
    out->set_close_wait_netns(r.close_wait_netns);
    out->set_close_wait_truncated(r.close_wait_truncated);
    AddErrors(r.errors, out->mutable_errors());
  }
  const CriState& cri = snapshot.cri;
  pb::Cri* out = node->mutable_cri();
  out->set_available(cri.available);
  out->set_endpoint(cri.endpoint);
  out->set_runtime(cri.runtime);
  out->set_pods(static_cast<uint32_t>(cri.pods.size()));
  AddErrors(cri.errors, out->mutable_errors());

  const ProbeConntrackState& conntrack = snapshot.probe_conntrack;
  if (conntrack.collected) {
    pb::ProbePath* probe = node->mutable_probe_path();
    probe->set_netns_path(conntrack.netns_path);
    probe->set_filter(conntrack.filter);
    for (const std::string& address : conntrack.snat_addresses) probe->add_snat_addresses(address);
    for (const ProbeConntrackEntry& e : conntrack.entries) {
      pb::ProbeConntrackEntry* entry = probe->add_unreplied();
      entry->set_family(std::string(FamilyName(e.family)));
      entry->set_orig_src(e.orig_src);
      entry->set_orig_sport(e.orig_sport);
      entry->set_orig_dst(e.orig_dst);
      entry->set_orig_dport(e.orig_dport);
      entry->set_reply_dst(e.reply_dst);
      entry->set_reply_dport(e.reply_dport);
      entry->set_tcp_state(TcpConntrackStateName(e.tcp_state));
      entry->set_timeout_s(e.timeout_s);
      entry->set_start_unix_ms(Ms(e.start_unix_ms));
    }
    probe->set_matched(static_cast<uint32_t>(conntrack.matched));
    probe->set_examined(static_cast<uint32_t>(conntrack.examined));
    probe->set_truncated(conntrack.truncated);
    probe->set_syn_sent_timeout_s(conntrack.syn_sent_timeout_s);
    probe->set_dump_ms(conntrack.dump_ms);
    AddErrors(conntrack.errors, probe->mutable_errors());
  }
  if (snapshot.cni.collected) {
    const CniConfigState& cni = snapshot.cni;
    pb::CniConfig* c = node->mutable_cni();
    c->set_dir(cni.dir);
    c->set_dir_readable(cni.dir_readable);
    for (const CniConfFile& file : cni.files) {
      pb::CniConfFile* f = c->add_files();
      f->set_name(file.name);
      f->set_error(file.error);
    }
    c->set_files_omitted(static_cast<uint32_t>(cni.files_omitted));
    c->set_active_file(cni.active_file);
    c->set_active_mtime_unix_ms(static_cast<double>(cni.active_mtime_unix_ms));
    c->set_network_name(cni.network_name);
    for (const std::string& type : cni.plugin_types) c->add_plugin_types(type);
    c->set_istio_cni_chained(cni.istio_cni_chained);
    c->set_kubeconfig_path(cni.kubeconfig_path);
    c->set_kubeconfig_error(cni.kubeconfig_error);
    for (const CniChainGap& gap : cni.gaps) {
      pb::CniChainGap* g = c->add_gaps();
      g->set_start_unix_ms(static_cast<double>(gap.start_unix_ms));
      g->set_end_unix_ms(static_cast<double>(gap.end_unix_ms));
      g->set_file(gap.file);
    }
    AddErrors(cni.errors, c->mutable_errors());
    c->set_dir_source(std::string(CniDirOriginName(cni.dir_origin)));
    c->set_not_judged(cni.not_judged);
    c->set_runtime(cni.runtime);
    c->set_runtime_dir(cni.runtime_dir);
  }
  if (snapshot.nft_userspace.collected) {
    const NftUserspaceState& nft = snapshot.nft_userspace;
    pb::NftUserspace* n = node->mutable_nft_userspace();
    n->set_binary(nft.binary);
    n->set_version(nft.version);
    n->set_version_source(nft.version_source);
    n->set_json_support_known(nft.json_support.has_value());
    n->set_json_support(nft.json_support.value_or(false));
    n->set_json_evidence(nft.json_evidence);
    n->set_probe_ran(nft.probe_ran);
    n->set_probe_result(nft.probe_result);
    AddErrors(nft.errors, n->mutable_errors());
  }
}

void FillSummary(const NodeSnapshot& snapshot, const NodeAnalysis& analysis, pb::Summary* out) {
  out->set_netns_scanned(static_cast<uint32_t>(snapshot.netns.size()));
  pb::ModeCounts* modes = out->mutable_by_mode();
  for (const NetnsClassification& c : analysis.netns) {
    switch (c.mode) {
      case DataplaneMode::kAmbient:
        modes->set_ambient(modes->ambient() + 1);
        break;
      case DataplaneMode::kSidecar:
        modes->set_sidecar(modes->sidecar() + 1);
        break;
      case DataplaneMode::kConflict:
        modes->set_conflict(modes->conflict() + 1);
        break;
      case DataplaneMode::kNone:
        modes->set_none(modes->none() + 1);
        break;
    }
  }
  pb::SeverityCounts* findings = out->mutable_findings();
  for (const Finding& f : analysis.findings) {
    switch (f.severity) {
      case Severity::kCritical:
        findings->set_critical(findings->critical() + 1);
        break;
      case Severity::kWarning:
        findings->set_warning(findings->warning() + 1);
        break;
      case Severity::kInfo:
        findings->set_info(findings->info() + 1);
        break;
    }
  }
}

}  // namespace

pb::Finding BuildFinding(const Finding& f) {
  pb::Finding out;
  out.set_code(std::string(f.code_name()));
  out.set_severity(std::string(SeverityName(f.severity)));
  out.set_subject(f.subject);
  out.mutable_netns()->set_path(f.netns_path);
  out.mutable_netns()->set_inode(Inode(f.netns_inode));
  if (!f.pod.empty()) out.set_pod(f.pod);
  out.set_summary(f.summary);
  for (const std::string& e : f.evidence) out.add_evidence(e);
  out.set_hint(f.hint);
  if (f.since_unix_ms > 0) out.set_since_unix_ms(Ms(f.since_unix_ms));
  return out;
}

pb::Finding BuildFinding(const FindingRecord& record) {
  pb::Finding out = BuildFinding(record.finding);
  if (record.first_seen_unix_ms > 0) out.set_first_seen_unix_ms(Ms(record.first_seen_unix_ms));
  if (record.last_seen_unix_ms > 0) out.set_last_seen_unix_ms(Ms(record.last_seen_unix_ms));
  if (record.resolved_at_unix_ms > 0) {
    out.set_resolved_at_unix_ms(Ms(record.resolved_at_unix_ms));
  }
  return out;
}

pb::NetnsEntry BuildNetnsEntry(const NetnsSnapshot& ns, const NetnsClassification& c,
                               const NodeAnalysis& analysis) {
  pb::NetnsEntry out;
  out.set_path(ns.netns.PrimaryPath());
  for (const std::string& path : ns.netns.paths) out.add_paths(path);
  out.set_inode(Inode(ns.netns.inode));
  out.set_host(ns.netns.is_host);
  out.mutable_pids()->Add(ns.netns.pids.begin(), ns.netns.pids.end());
  out.set_mode(std::string(DataplaneModeName(c.mode)));
  AddBackends(c.ambient_backends, out.mutable_ambient_backends());
  AddBackends(c.sidecar_backends, out.mutable_sidecar_backends());
  for (Family f : c.families) out.add_families(std::string(FamilyName(f)));
  if (c.variant) {
    pb::AmbientVariant* variant = out.mutable_variant();
    variant->set_dns_capture(c.variant->dns_capture);
    variant->set_ingress_mode(c.variant->ingress_mode);
    for (const std::string& vif : c.variant->virtual_interfaces) {
      variant->add_virtual_interfaces(vif);
    }
    variant->set_ipv6(c.variant->ipv6);
  }
  out.set_host_rules(c.host_rules_present);
  AddBackends(c.host_backends, out.mutable_host_backends());
  out.set_status(NetnsStatus(analysis, ns.netns.inode));
  out.set_unreadable(ns.unreadable);
  AddErrors(ns.errors, out.mutable_errors());
  out.set_scan_ms(ns.scan_ms);
  if (!c.pod.empty()) out.set_pod(c.pod);
  out.set_pod_uid(c.pod_uid);
  out.set_zds_state(std::string(ZdsStateName(c.zds_state)));
  for (uint16_t port : c.ztunnel_listeners) out.add_ztunnel_listeners(port);
  out.mutable_ztunnel_pids()->Add(c.ztunnel_pids.begin(), c.ztunnel_pids.end());
  return out;
}

pb::Report BuildReport(const NodeSnapshot& snapshot, const NodeAnalysis& analysis,
                       const ReportHistory& history, const DesiredAnalysis* desired) {
  pb::Report report;
  report.set_schema(kReportSchema);
  FillNode(snapshot, report.mutable_node());
  FillSummary(snapshot, analysis, report.mutable_summary());
  const size_t count = std::min(snapshot.netns.size(), analysis.netns.size());
  report.mutable_netns()->Reserve(static_cast<int>(count));
  for (size_t i = 0; i < count; ++i) {
    *report.add_netns() = BuildNetnsEntry(snapshot.netns[i], analysis.netns[i], analysis);
  }
  const bool with_records = history.finding_records != nullptr &&
                            history.finding_records->size() == analysis.findings.size();
  for (size_t i = 0; i < analysis.findings.size(); ++i) {
    *report.add_findings() = with_records ? BuildFinding((*history.finding_records)[i])
                                          : BuildFinding(analysis.findings[i]);
  }
  if (history.recently_resolved != nullptr) {
    for (const FindingRecord& r : *history.recently_resolved) {
      *report.add_recently_resolved() = BuildFinding(r);
    }
  }
  if (snapshot.kube) *report.mutable_kubernetes() = BuildKubernetes(snapshot, desired);
  return report;
}

pb::NetnsRules BuildNetnsRules(const NetnsSnapshot& ns, const NetnsClassification& c,
                               const NodeAnalysis& analysis) {
  pb::NetnsRules out;
  *out.mutable_netns() = BuildNetnsEntry(ns, c, analysis);
  for (const Table& table : ns.netfilter.tables) {
    pb::RuleTable* t = out.add_tables();
    t->set_backend(std::string(BackendName(table.backend)));
    t->set_family(std::string(FamilyName(table.family)));
    t->set_name(table.name);
    for (const Chain& chain : table.chains) {
      pb::RuleChain* ch = t->add_chains();
      ch->set_name(chain.name);
      ch->set_base(chain.is_base);
      if (chain.is_base) {  // a user chain has no hook, priority, type or policy
        ch->set_hook(chain.hook);
        ch->set_priority(chain.priority);
        ch->set_type(chain.type);
        ch->set_policy(chain.policy);
      }
      for (const Rule& rule : chain.rules) {
        pb::RuleLine* line = ch->add_rules();
        line->set_text(RenderRule(table, chain.name, rule));
        if (!rule.comment.empty()) line->set_comment(rule.comment);
        if (rule.handle != 0) line->set_handle(static_cast<uint32_t>(rule.handle));  // nft only
        for (const Match& m : rule.sem.matches) {
          pb::RuleMatch* match = line->add_matches();
          match->set_kind(std::string(MatchKindName(m.kind)));
          match->set_negated(m.negated);
          match->set_value(m.value);
          match->set_value2(m.value2);
          match->set_text(m.text);
          for (const std::string& e : m.elements) match->add_elements(e);
        }
        const Action& a = rule.sem.action;
        pb::RuleAction* action = line->mutable_action();
        action->set_kind(std::string(ActionKindName(a.kind)));
        action->set_value(a.value);
        action->set_value2(a.value2);
        action->set_value3(a.value3);
        action->set_text(a.text);
        for (const std::string& e : a.elements) action->add_elements(e);
      }
    }
    for (const NftSet& set : table.sets) {
      pb::NftSet* s = t->add_sets();
      s->set_name(set.name);
      s->set_type(set.key_type);
      if (!set.data_type.empty()) s->set_data_type(set.data_type);  // maps only
      s->set_anonymous(set.anonymous);
      s->set_interval(set.interval);
      s->set_comment(set.comment);
      for (const std::string& e : set.elements) s->add_elements(e);
    }
  }
  for (const IpSet& set : ns.netfilter.ipsets) {
    pb::Ipset* s = out.add_ipsets();
    s->set_name(set.name);
    s->set_type(set.type);
    s->set_family(std::string(FamilyName(set.family)));
    for (const std::string& m : set.members) s->add_members(m);
  }
  for (const InterfaceAddress& a : ns.routing.addresses) {
    pb::InterfaceAddress* address = out.add_addresses();
    address->set_ifname(a.ifname);
    address->set_family(std::string(FamilyName(a.family)));
    address->set_address(a.address);
    address->set_prefix_len(a.prefix_len);
    address->set_global(a.global_scope);
  }
  out.set_ipv6_disabled(ns.routing.ipv6_disabled);
  pb::LoopbackLink* loopback = out.mutable_loopback();
  loopback->set_known(ns.routing.loopback.known);
  loopback->set_found(ns.routing.loopback.found);
  loopback->set_up(ns.routing.loopback.up);
  loopback->set_flags(ns.routing.loopback.flags);
  for (const PolicyRule& r : ns.routing.rules) {
    pb::PolicyRule* p = out.add_policy_rules();
    p->set_family(std::string(FamilyName(r.family)));
    p->set_priority(r.priority);
    p->set_fwmark(r.fwmark);
    p->set_fwmask(r.fwmask);
    p->set_table(r.table);
    p->set_action(r.action);
  }
  for (const RouteEntry& r : ns.routing.routes) {
    pb::Route* route = out.add_routes();
    route->set_family(std::string(FamilyName(r.family)));
    route->set_table(r.table);
    route->set_type(r.type);
    route->set_dst(r.dst);
    route->set_dev(r.dev);
  }
  for (const ListeningSocket& l : ns.listeners) {
    pb::Listener* listener = out.add_listeners();
    listener->set_family(std::string(FamilyName(l.family)));
    listener->set_port(l.port);
    listener->set_mark(l.mark);
    listener->set_mark_known(l.mark_known);
    listener->set_inode(Inode(l.inode));
    listener->mutable_owner_pids()->Add(l.owner_pids.begin(), l.owner_pids.end());
    listener->set_protocol(l.protocol == 17 ? "udp" : "tcp");
    listener->set_address(l.address);
  }
  for (const std::string& name : ns.netfilter.legacy_tables_v4) out.add_legacy_tables_v4(name);
  for (const std::string& name : ns.netfilter.legacy_tables_v6) out.add_legacy_tables_v6(name);
  return out;
}

void FillDaemonOrigin(const PublishedResult& result, pb::ReportOrigin* origin) {
  origin->set_source("daemon");
  origin->set_sequence(result.sequence);
  origin->set_trigger(std::string(StepTriggerName(result.trigger)));
  origin->set_history(true);
}

std::string ToJson(const google::protobuf::Message& message, bool compact) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = !compact;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  const auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return "{\"error\": \"json printer: " + std::string(status.message()) + "\"}";
  if (!compact) out += '\n';  // like the hand-written v1 document
  return out;
}

}  // namespace ad::api
