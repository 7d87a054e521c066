// Model <-> proto for the node-wide parts of a capture: the ZDS socket, processes, ztunnel, CRI,
// resources, conntrack, CNI, the nft userspace, the Kubernetes objects, the manifest and the
// engine memory.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capture/capture_proto.h"

namespace ad::capture {
namespace {

constexpr EnumPair<SourceKind, pb::CaptureSourceKind> kSourceKinds[] = {
    {SourceKind::kNetns, pb::CAPTURE_SOURCE_KIND_NETNS},
    {SourceKind::kProc, pb::CAPTURE_SOURCE_KIND_PROC},
    {SourceKind::kNftables, pb::CAPTURE_SOURCE_KIND_NFTABLES},
    {SourceKind::kLegacyIpv4, pb::CAPTURE_SOURCE_KIND_LEGACY_IPV4},
    {SourceKind::kLegacyIpv6, pb::CAPTURE_SOURCE_KIND_LEGACY_IPV6},
    {SourceKind::kIpset, pb::CAPTURE_SOURCE_KIND_IPSET},
    {SourceKind::kRoute, pb::CAPTURE_SOURCE_KIND_ROUTE},
    {SourceKind::kSockDiag, pb::CAPTURE_SOURCE_KIND_SOCK_DIAG},
    {SourceKind::kZds, pb::CAPTURE_SOURCE_KIND_ZDS},
    {SourceKind::kHttp, pb::CAPTURE_SOURCE_KIND_HTTP},
    {SourceKind::kZtunnel, pb::CAPTURE_SOURCE_KIND_ZTUNNEL},
    {SourceKind::kZtunnelConfigDump, pb::CAPTURE_SOURCE_KIND_ZTUNNEL_CONFIG_DUMP},
    {SourceKind::kZtunnelReadiness, pb::CAPTURE_SOURCE_KIND_ZTUNNEL_READINESS},
    {SourceKind::kZtunnelMetrics, pb::CAPTURE_SOURCE_KIND_ZTUNNEL_METRICS},
    {SourceKind::kCri, pb::CAPTURE_SOURCE_KIND_CRI},
    {SourceKind::kIptablesText, pb::CAPTURE_SOURCE_KIND_IPTABLES_TEXT},
    {SourceKind::kNftText, pb::CAPTURE_SOURCE_KIND_NFT_TEXT},
    {SourceKind::kApi, pb::CAPTURE_SOURCE_KIND_API},
    {SourceKind::kTracing, pb::CAPTURE_SOURCE_KIND_TRACING},
    {SourceKind::kConntrack, pb::CAPTURE_SOURCE_KIND_CONNTRACK},
    {SourceKind::kCniConfig, pb::CAPTURE_SOURCE_KIND_CNI_CONFIG},
    {SourceKind::kNftProbe, pb::CAPTURE_SOURCE_KIND_NFT_PROBE},
    {SourceKind::kKubeApi, pb::CAPTURE_SOURCE_KIND_KUBE_API},
    {SourceKind::kCapture, pb::CAPTURE_SOURCE_KIND_CAPTURE},
    {SourceKind::kLab, pb::CAPTURE_SOURCE_KIND_LAB},
};
static_assert(CoversEnum(kSourceKinds, kSourceKindCount));

constexpr EnumPair<ProcessRole, pb::CaptureProcessRole> kProcessRoles[] = {
    {ProcessRole::kOther, pb::CAPTURE_PROCESS_ROLE_OTHER},
    {ProcessRole::kIstioCni, pb::CAPTURE_PROCESS_ROLE_ISTIO_CNI},
    {ProcessRole::kZtunnel, pb::CAPTURE_PROCESS_ROLE_ZTUNNEL},
};
static_assert(CoversEnum(kProcessRoles, static_cast<size_t>(ProcessRole::kZtunnel) + 1));

constexpr EnumPair<CniDirOrigin, pb::CaptureCniDirOrigin> kCniDirOrigins[] = {
    {CniDirOrigin::kNone, pb::CAPTURE_CNI_DIR_ORIGIN_NONE},
    {CniDirOrigin::kFlag, pb::CAPTURE_CNI_DIR_ORIGIN_FLAG},
    {CniDirOrigin::kRuntime, pb::CAPTURE_CNI_DIR_ORIGIN_RUNTIME},
    {CniDirOrigin::kDefault, pb::CAPTURE_CNI_DIR_ORIGIN_DEFAULT},
};
static_assert(CoversEnum(kCniDirOrigins, static_cast<size_t>(CniDirOrigin::kDefault) + 1));

constexpr EnumPair<KubeApiReason, pb::CaptureKubeApiReason> kKubeApiReasons[] = {
    {KubeApiReason::kNone, pb::CAPTURE_KUBE_API_REASON_NONE},
    {KubeApiReason::kDisabled, pb::CAPTURE_KUBE_API_REASON_DISABLED},
    {KubeApiReason::kNoCredentials, pb::CAPTURE_KUBE_API_REASON_NO_CREDENTIALS},
    {KubeApiReason::kBadConfig, pb::CAPTURE_KUBE_API_REASON_BAD_CONFIG},
    {KubeApiReason::kUnauthorized, pb::CAPTURE_KUBE_API_REASON_UNAUTHORIZED},
    {KubeApiReason::kForbidden, pb::CAPTURE_KUBE_API_REASON_FORBIDDEN},
    {KubeApiReason::kThrottled, pb::CAPTURE_KUBE_API_REASON_THROTTLED},
    {KubeApiReason::kUnreachable, pb::CAPTURE_KUBE_API_REASON_UNREACHABLE},
    {KubeApiReason::kHung, pb::CAPTURE_KUBE_API_REASON_HUNG},
    {KubeApiReason::kGarbage, pb::CAPTURE_KUBE_API_REASON_GARBAGE},
    {KubeApiReason::kServerError, pb::CAPTURE_KUBE_API_REASON_SERVER_ERROR},
};
static_assert(CoversEnum(kKubeApiReasons, static_cast<size_t>(KubeApiReason::kServerError) + 1));

// A reason this reader does not know is still a failure: the data is not trusted.
KubeApiReason GetKubeApiReason(int value) {
  return EnumFromProto(kKubeApiReasons, value, KubeApiReason::kServerError);
}

template <typename T>
void PutOptional(const std::optional<T>& value, auto setter) {
  if (value) setter(*value);
}

// --- ZDS, processes -----------------------------------------------------------------------------

void PutUnixSocket(const UnixSocket& in, pb::CaptureUnixSocket* out) {
  out->set_inode(in.inode);
  out->set_type(in.type);
  out->set_state(in.state);
  out->set_path(in.path);
  out->set_peer_inode(in.peer_inode);
  out->set_receive_queue(in.receive_queue);
  out->set_send_queue(in.send_queue);
  PutValues(in.owner_pids, out->mutable_owner_pids());
  out->set_vfs_dev(in.vfs_dev);
  out->set_vfs_inode(in.vfs_inode);
  PutValues(in.pending_client_inodes, out->mutable_pending_client_inodes());
}

UnixSocket GetUnixSocket(const pb::CaptureUnixSocket& in) {
  return {.inode = in.inode(),
          .type = in.type(),
          .state = static_cast<uint8_t>(in.state()),
          .path = in.path(),
          .peer_inode = in.peer_inode(),
          .receive_queue = in.receive_queue(),
          .send_queue = in.send_queue(),
          .owner_pids = GetValues<int>(in.owner_pids()),
          .vfs_dev = in.vfs_dev(),
          .vfs_inode = in.vfs_inode(),
          .pending_client_inodes = GetValues<uint64_t>(in.pending_client_inodes())};
}

void PutZds(const ZdsSocketState& in, pb::CaptureZdsSocketState* out) {
  out->set_path(in.path);
  out->set_listener_found(in.listener_found);
  PutUnixSocket(in.listener, out->mutable_listener());
  PutList(in.accepted, out->mutable_accepted(), PutUnixSocket);
  PutList(in.clients, out->mutable_clients(), PutUnixSocket);
  PutList(in.errors, out->mutable_errors(), PutSourceError);
}

ZdsSocketState GetZds(const pb::CaptureZdsSocketState& in) {
  return {.path = in.path(),
          .listener_found = in.listener_found(),
          .listener = GetUnixSocket(in.listener()),
          .accepted = GetList(in.accepted(), GetUnixSocket),
          .clients = GetList(in.clients(), GetUnixSocket),
          .errors = GetList(in.errors(), GetSourceError)};
}

void PutProcess(const ProcessNetnsFds& in, pb::CaptureProcess* out) {
  out->set_pid(in.pid);
  out->set_comm(in.comm);
  out->set_role(EnumToProto(kProcessRoles, in.role));
  out->set_own_netns_inode(in.own_netns_inode);
  PutValues(in.netns_fd_inodes, out->mutable_netns_fd_inodes());
  out->set_start_time_unix_ms(in.start_time_unix_ms);
}

ProcessNetnsFds GetProcess(const pb::CaptureProcess& in) {
  return {.pid = in.pid(),
          .comm = in.comm(),
          .role = EnumFromProto(kProcessRoles, in.role(), ProcessRole::kOther),
          .own_netns_inode = in.own_netns_inode(),
          .netns_fd_inodes = GetValues<uint64_t>(in.netns_fd_inodes()),
          .start_time_unix_ms = in.start_time_unix_ms()};
}

// --- ztunnel ------------------------------------------------------------------------------------

void PutWorkloadState(const ZtunnelWorkloadState& in, pb::CaptureZtunnelWorkloadState* out) {
  out->set_pod_uid(in.pod_uid);
  out->set_state(in.state);
  out->set_name(in.name);
  out->set_namespace_name(in.namespace_name);
  out->set_service_account(in.service_account);
}

ZtunnelWorkloadState GetWorkloadState(const pb::CaptureZtunnelWorkloadState& in) {
  return {.pod_uid = in.pod_uid(),
          .state = in.state(),
          .name = in.name(),
          .namespace_name = in.namespace_name(),
          .service_account = in.service_account()};
}

void PutWorkload(const ZtunnelWorkload& in, pb::CaptureZtunnelWorkload* out) {
  out->set_uid(in.uid);
  out->set_name(in.name);
  out->set_namespace_name(in.namespace_name);
  out->set_node(in.node);
  out->set_protocol(in.protocol);
  out->set_network_mode(in.network_mode);
  PutValues(in.ips, out->mutable_ips());
}

ZtunnelWorkload GetWorkload(const pb::CaptureZtunnelWorkload& in) {
  return {.uid = in.uid(),
          .name = in.name(),
          .namespace_name = in.namespace_name(),
          .node = in.node(),
          .protocol = in.protocol(),
          .network_mode = in.network_mode(),
          .ips = GetStrings(in.ips())};
}

void PutCertificate(const ZtunnelCertificate& in, pb::CaptureZtunnelCertificate* out) {
  out->set_identity(in.identity);
  out->set_state(in.state);
  out->set_expires_unix_ms(in.expires_unix_ms);
  out->set_chain_length(in.chain_length);
}

ZtunnelCertificate GetCertificate(const pb::CaptureZtunnelCertificate& in) {
  return {.identity = in.identity(),
          .state = in.state(),
          .expires_unix_ms = in.expires_unix_ms(),
          .chain_length = static_cast<size_t>(in.chain_length())};
}

void PutZtunnel(const ZtunnelAdminState& in, pb::CaptureZtunnelAdmin* out) {
  out->set_pid(in.pid);
  out->set_netns_inode(in.netns_inode);
  out->set_admin_reachable(in.admin_reachable);
  PutOptional(in.ready, [&](bool ready) { out->set_ready(ready); });
  PutValues(in.pending_tasks, out->mutable_pending_tasks());
  PutList(in.workload_state.items(), out->mutable_workload_state(), PutWorkloadState);
  PutList(in.workloads.items(), out->mutable_workloads(), PutWorkload);
  out->set_workloads_seen(in.workloads_seen);
  out->set_has_certificates(in.has_certificates);
  PutList(in.certificates, out->mutable_certificates(), PutCertificate);
  PutOptional(in.active_proxy_count, [&](double count) { out->set_active_proxy_count(count); });
  PutOptional(in.pending_proxy_count, [&](double count) { out->set_pending_proxy_count(count); });
  PutList(in.errors, out->mutable_errors(), PutSourceError);
}

ZtunnelAdminState GetZtunnel(const pb::CaptureZtunnelAdmin& in) {
  ZtunnelAdminState out{.pid = in.pid(),
                        .netns_inode = in.netns_inode(),
                        .admin_reachable = in.admin_reachable(),
                        .pending_tasks = GetStrings(in.pending_tasks()),
                        .workload_state = GetList(in.workload_state(), GetWorkloadState),
                        .workloads = GetList(in.workloads(), GetWorkload),
                        .workloads_seen = static_cast<size_t>(in.workloads_seen()),
                        .has_certificates = in.has_certificates(),
                        .certificates = GetList(in.certificates(), GetCertificate),
                        .errors = GetList(in.errors(), GetSourceError)};
  if (in.has_ready()) out.ready = in.ready();
  if (in.has_active_proxy_count()) out.active_proxy_count = in.active_proxy_count();
  if (in.has_pending_proxy_count()) out.pending_proxy_count = in.pending_proxy_count();
  return out;
}

void PutResources(const ZtunnelResourceUsage& in, pb::CaptureZtunnelResources* out) {
  out->set_pid(in.pid);
  out->set_open_fds(in.open_fds);
  out->set_fd_soft_limit(in.fd_soft_limit);
  out->set_fd_limit_unlimited(in.fd_limit_unlimited);
  out->set_rss_bytes(in.rss_bytes);
  out->set_memory_limit_bytes(in.memory_limit_bytes);
  out->set_memory_unlimited(in.memory_unlimited);
  out->set_cgroup(in.cgroup);
  PutValues(in.close_wait_counts, out->mutable_close_wait_counts());
  out->set_close_wait_netns(in.close_wait_netns);
  out->set_close_wait_truncated(in.close_wait_truncated);
  PutList(in.errors, out->mutable_errors(), PutSourceError);
}

ZtunnelResourceUsage GetResources(const pb::CaptureZtunnelResources& in) {
  return {.pid = in.pid(),
          .open_fds = in.open_fds(),
          .fd_soft_limit = in.fd_soft_limit(),
          .fd_limit_unlimited = in.fd_limit_unlimited(),
          .rss_bytes = in.rss_bytes(),
          .memory_limit_bytes = in.memory_limit_bytes(),
          .memory_unlimited = in.memory_unlimited(),
          .cgroup = in.cgroup(),
          .close_wait_counts = GetValues<uint32_t>(in.close_wait_counts()),
          .close_wait_netns = in.close_wait_netns(),
          .close_wait_truncated = in.close_wait_truncated(),
          .errors = GetList(in.errors(), GetSourceError)};
}

// --- CRI ----------------------------------------------------------------------------------------

void PutPod(const PodIdentity& in, pb::CapturePodIdentity* out) {
  out->set_uid(in.uid);
  out->set_name(in.name);
  out->set_namespace_name(in.namespace_name);
  out->set_sandbox_id(in.sandbox_id);
  out->set_pid(in.pid);
  out->set_netns_path(in.netns_path);
  out->set_netns_inode(in.netns_inode);
  out->set_host_network(in.host_network);
  PutValues(in.ips, out->mutable_ips());
  out->set_created_at_unix_ms(in.created_at_unix_ms);
  out->set_dataplane_mode_label(in.dataplane_mode_label);
}

PodIdentity GetPod(const pb::CapturePodIdentity& in) {
  return {.uid = in.uid(),
          .name = in.name(),
          .namespace_name = in.namespace_name(),
          .sandbox_id = in.sandbox_id(),
          .pid = in.pid(),
          .netns_path = in.netns_path(),
          .netns_inode = in.netns_inode(),
          .host_network = in.host_network(),
          .ips = GetStrings(in.ips()),
          .created_at_unix_ms = in.created_at_unix_ms(),
          .dataplane_mode_label = in.dataplane_mode_label()};
}

void PutCri(const CriState& in, pb::CaptureCri* out) {
  out->set_available(in.available);
  out->set_endpoint(in.endpoint);
  out->set_runtime(in.runtime);
  PutList(in.pods.items(), out->mutable_pods(), PutPod);
  out->set_cni_conf_dir(in.cni_conf_dir);
  out->set_cni_pod_network(in.cni_pod_network);
  out->set_cni_note(in.cni_note);
  PutList(in.errors, out->mutable_errors(), PutSourceError);
}

CriState GetCri(const pb::CaptureCri& in) {
  return {.available = in.available(),
          .endpoint = in.endpoint(),
          .runtime = in.runtime(),
          .pods = GetList(in.pods(), GetPod),
          .cni_conf_dir = in.cni_conf_dir(),
          .cni_pod_network = in.cni_pod_network(),
          .cni_note = in.cni_note(),
          .errors = GetList(in.errors(), GetSourceError)};
}

// --- conntrack ----------------------------------------------------------------------------------

void PutConntrackEntry(const ProbeConntrackEntry& in, pb::CaptureProbeConntrackEntry* out) {
  out->set_family(PutFamily(in.family));
  out->set_orig_src(in.orig_src);
  out->set_orig_dst(in.orig_dst);
  out->set_orig_sport(in.orig_sport);
  out->set_orig_dport(in.orig_dport);
  out->set_reply_src(in.reply_src);
  out->set_reply_dst(in.reply_dst);
  out->set_reply_sport(in.reply_sport);
  out->set_reply_dport(in.reply_dport);
  out->set_tcp_state(in.tcp_state);
  out->set_status(in.status);
  out->set_timeout_s(in.timeout_s);
  out->set_id(in.id);
  out->set_start_unix_ms(in.start_unix_ms);
}

ProbeConntrackEntry GetConntrackEntry(const pb::CaptureProbeConntrackEntry& in) {
  return {.family = GetFamily(in.family()),
          .orig_src = in.orig_src(),
          .orig_dst = in.orig_dst(),
          .orig_sport = static_cast<uint16_t>(in.orig_sport()),
          .orig_dport = static_cast<uint16_t>(in.orig_dport()),
          .reply_src = in.reply_src(),
          .reply_dst = in.reply_dst(),
          .reply_sport = static_cast<uint16_t>(in.reply_sport()),
          .reply_dport = static_cast<uint16_t>(in.reply_dport()),
          .tcp_state = static_cast<uint8_t>(in.tcp_state()),
          .status = in.status(),
          .timeout_s = in.timeout_s(),
          .id = in.id(),
          .start_unix_ms = in.start_unix_ms()};
}

void PutConntrack(const ProbeConntrackState& in, pb::CaptureProbeConntrack* out) {
  out->set_collected(in.collected);
  out->set_netns_path(in.netns_path);
  out->set_filter(in.filter);
  PutValues(in.snat_addresses, out->mutable_snat_addresses());
  PutList(in.entries, out->mutable_entries(), PutConntrackEntry);
  out->set_matched(in.matched);
  out->set_examined(in.examined);
  out->set_truncated(in.truncated);
  out->set_syn_sent_timeout_s(in.syn_sent_timeout_s);
  out->set_dump_ms(in.dump_ms);
  PutList(in.errors, out->mutable_errors(), PutSourceError);
}

ProbeConntrackState GetConntrack(const pb::CaptureProbeConntrack& in) {
  return {.collected = in.collected(),
          .netns_path = in.netns_path(),
          .filter = in.filter(),
          .snat_addresses = GetStrings(in.snat_addresses()),
          .entries = GetList(in.entries(), GetConntrackEntry),
          .matched = in.matched(),
          .examined = in.examined(),
          .truncated = in.truncated(),
          .syn_sent_timeout_s = in.syn_sent_timeout_s(),
          .dump_ms = in.dump_ms(),
          .errors = GetList(in.errors(), GetSourceError)};
}

// --- CNI, nft userspace -------------------------------------------------------------------------

void PutCniFile(const CniConfFile& in, pb::CaptureCniConfFile* out) {
  out->set_name(in.name);
  out->set_error(in.error);
}

CniConfFile GetCniFile(const pb::CaptureCniConfFile& in) {
  return {.name = in.name(), .error = in.error()};
}

void PutCniGap(const CniChainGap& in, pb::CaptureCniChainGap* out) {
  out->set_start_unix_ms(in.start_unix_ms);
  out->set_end_unix_ms(in.end_unix_ms);
  out->set_file(in.file);
}

CniChainGap GetCniGap(const pb::CaptureCniChainGap& in) {
  return {.start_unix_ms = in.start_unix_ms(), .end_unix_ms = in.end_unix_ms(), .file = in.file()};
}

void PutNetnsStart(const NetnsStart& in, pb::CaptureNetnsStart* out) {
  out->set_netns_inode(in.netns_inode);
  out->set_started_unix_ms(in.started_unix_ms);
  out->set_pid(in.pid);
}

NetnsStart GetNetnsStart(const pb::CaptureNetnsStart& in) {
  return {
      .netns_inode = in.netns_inode(), .started_unix_ms = in.started_unix_ms(), .pid = in.pid()};
}

void PutCni(const CniConfigState& in, pb::CaptureCniConfig* out) {
  out->set_collected(in.collected);
  out->set_dir(in.dir);
  out->set_host_root(in.host_root);
  out->set_dir_origin(EnumToProto(kCniDirOrigins, in.dir_origin));
  out->set_runtime(in.runtime);
  out->set_runtime_dir(in.runtime_dir);
  out->set_not_judged(in.not_judged);
  out->set_dir_readable(in.dir_readable);
  PutList(in.files, out->mutable_files(), PutCniFile);
  out->set_files_omitted(in.files_omitted);
  out->set_active_file(in.active_file);
  out->set_active_mtime_unix_ms(in.active_mtime_unix_ms);
  out->set_network_name(in.network_name);
  PutValues(in.plugin_types, out->mutable_plugin_types());
  out->set_istio_cni_chained(in.istio_cni_chained);
  out->set_kubeconfig_path(in.kubeconfig_path);
  out->set_kubeconfig_error(in.kubeconfig_error);
  PutList(in.gaps, out->mutable_gaps(), PutCniGap);
  out->set_gaps_dropped(in.gaps_dropped);
  PutList(in.netns_starts, out->mutable_netns_starts(), PutNetnsStart);
  PutList(in.errors, out->mutable_errors(), PutSourceError);
}

CniConfigState GetCni(const pb::CaptureCniConfig& in) {
  return {.collected = in.collected(),
          .dir = in.dir(),
          .host_root = in.host_root(),
          .dir_origin = EnumFromProto(kCniDirOrigins, in.dir_origin(), CniDirOrigin::kNone),
          .runtime = in.runtime(),
          .runtime_dir = in.runtime_dir(),
          .not_judged = in.not_judged(),
          .dir_readable = in.dir_readable(),
          .files = GetList(in.files(), GetCniFile),
          .files_omitted = static_cast<size_t>(in.files_omitted()),
          .active_file = in.active_file(),
          .active_mtime_unix_ms = in.active_mtime_unix_ms(),
          .network_name = in.network_name(),
          .plugin_types = GetStrings(in.plugin_types()),
          .istio_cni_chained = in.istio_cni_chained(),
          .kubeconfig_path = in.kubeconfig_path(),
          .kubeconfig_error = in.kubeconfig_error(),
          .gaps = GetList(in.gaps(), GetCniGap),
          .gaps_dropped = static_cast<size_t>(in.gaps_dropped()),
          .netns_starts = GetList(in.netns_starts(), GetNetnsStart),
          .errors = GetList(in.errors(), GetSourceError)};
}

void PutNftUserspace(const NftUserspaceState& in, pb::CaptureNftUserspace* out) {
  out->set_collected(in.collected);
  out->set_binary(in.binary);
  out->set_version(in.version);
  out->set_version_source(in.version_source);
  PutOptional(in.json_support, [&](bool json) { out->set_json_support(json); });
  out->set_json_evidence(in.json_evidence);
  out->set_probe_ran(in.probe_ran);
  out->set_probe_result(in.probe_result);
  PutList(in.errors, out->mutable_errors(), PutSourceError);
}

NftUserspaceState GetNftUserspace(const pb::CaptureNftUserspace& in) {
  NftUserspaceState out{.collected = in.collected(),
                        .binary = in.binary(),
                        .version = in.version(),
                        .version_source = in.version_source(),
                        .json_evidence = in.json_evidence(),
                        .probe_ran = in.probe_ran(),
                        .probe_result = in.probe_result(),
                        .errors = GetList(in.errors(), GetSourceError)};
  if (in.has_json_support()) out.json_support = in.json_support();
  return out;
}

// --- Kubernetes ---------------------------------------------------------------------------------

void PutResourceStatus(const KubeResourceStatus& in, pb::CaptureKubeResourceStatus* out) {
  out->set_synced(in.synced);
  out->set_watching(in.watching);
  out->set_resource_version(in.resource_version);
  out->set_reason(EnumToProto(kKubeApiReasons, in.reason));
  out->set_message(in.message);
  out->set_lists(in.lists);
  out->set_relists(in.relists);
  out->set_reconnects(in.reconnects);
  out->set_events(in.events);
  out->set_bookmarks(in.bookmarks);
}

KubeResourceStatus GetResourceStatus(const pb::CaptureKubeResourceStatus& in) {
  return {.synced = in.synced(),
          .watching = in.watching(),
          .resource_version = in.resource_version(),
          .reason = GetKubeApiReason(in.reason()),
          .message = in.message(),
          .lists = in.lists(),
          .relists = in.relists(),
          .reconnects = in.reconnects(),
          .events = in.events(),
          .bookmarks = in.bookmarks()};
}

void PutKubePod(const KubePod& in, pb::CaptureKubePod* out) {
  out->set_uid(in.uid);
  out->set_name(in.name);
  out->set_namespace_name(in.namespace_name);
  out->set_node_name(in.node_name);
  out->set_resource_version(in.resource_version);
  PutOptional(in.dataplane_mode, [&](const std::string& mode) { out->set_dataplane_mode(mode); });
  PutOptional(in.redirection, [&](const std::string& value) { out->set_redirection(value); });
  out->set_has_sidecar_status(in.has_sidecar_status);
  out->set_app_label(in.app_label);
  out->set_k8s_app_label(in.k8s_app_label);
  out->set_host_network(in.host_network);
  out->set_phase(in.phase);
  PutValues(in.pod_ips, out->mutable_pod_ips());
  out->set_ready(in.ready);
  out->set_creation_unix_s(in.creation_unix_s);
  PutOptional(in.deletion_unix_s, [&](int64_t at) { out->set_deletion_unix_s(at); });
}

KubePod GetKubePod(const pb::CaptureKubePod& in) {
  KubePod out{.uid = in.uid(),
              .name = in.name(),
              .namespace_name = in.namespace_name(),
              .node_name = in.node_name(),
              .resource_version = in.resource_version(),
              .has_sidecar_status = in.has_sidecar_status(),
              .app_label = in.app_label(),
              .k8s_app_label = in.k8s_app_label(),
              .host_network = in.host_network(),
              .phase = in.phase(),
              .pod_ips = GetStrings(in.pod_ips()),
              .ready = in.ready(),
              .creation_unix_s = in.creation_unix_s()};
  if (in.has_dataplane_mode()) out.dataplane_mode = in.dataplane_mode();
  if (in.has_redirection()) out.redirection = in.redirection();
  if (in.has_deletion_unix_s()) out.deletion_unix_s = in.deletion_unix_s();
  return out;
}

void PutKubeNamespace(const KubeNamespace& in, pb::CaptureKubeNamespace* out) {
  out->set_name(in.name);
  out->set_resource_version(in.resource_version);
  PutOptional(in.dataplane_mode, [&](const std::string& mode) { out->set_dataplane_mode(mode); });
}

KubeNamespace GetKubeNamespace(const pb::CaptureKubeNamespace& in) {
  KubeNamespace out{.name = in.name(), .resource_version = in.resource_version()};
  if (in.has_dataplane_mode()) out.dataplane_mode = in.dataplane_mode();
  return out;
}

void PutTaint(const KubeTaint& in, pb::CaptureKubeTaint* out) {
  out->set_key(in.key);
  out->set_value(in.value);
  out->set_effect(in.effect);
}

KubeTaint GetTaint(const pb::CaptureKubeTaint& in) {
  return {.key = in.key(), .value = in.value(), .effect = in.effect()};
}

void PutKube(const KubeSnapshot& in, pb::CaptureKube* out) {
  pb::CaptureKubeApiStatus* status = out->mutable_status();
  status->set_enabled(in.status.enabled);
  status->set_server(in.status.server);
  status->set_node_name(in.status.node_name);
  status->set_reason(EnumToProto(kKubeApiReasons, in.status.reason));
  status->set_message(in.status.message);
  PutResourceStatus(in.status.pods, status->mutable_pods());
  PutResourceStatus(in.status.namespaces, status->mutable_namespaces());
  PutResourceStatus(in.status.node, status->mutable_node());
  PutList(in.pods, out->mutable_pods(), PutKubePod);
  PutList(in.namespaces, out->mutable_namespaces(), PutKubeNamespace);
  if (in.node) {
    pb::CaptureKubeNode* node = out->mutable_node();
    node->set_name(in.node->name);
    node->set_resource_version(in.node->resource_version);
    PutList(in.node->taints, node->mutable_taints(), PutTaint);
  }
  out->set_generation(in.generation);
}

KubeSnapshot GetKube(const pb::CaptureKube& in) {
  const pb::CaptureKubeApiStatus& status = in.status();
  KubeSnapshot out{.status = {.enabled = status.enabled(),
                              .server = status.server(),
                              .node_name = status.node_name(),
                              .reason = GetKubeApiReason(status.reason()),
                              .message = status.message(),
                              .pods = GetResourceStatus(status.pods()),
                              .namespaces = GetResourceStatus(status.namespaces()),
                              .node = GetResourceStatus(status.node())},
                   .pods = GetList(in.pods(), GetKubePod),
                   .namespaces = GetList(in.namespaces(), GetKubeNamespace),
                   .generation = in.generation()};
  if (in.has_node()) {
    out.node = KubeNode{.name = in.node().name(),
                        .resource_version = in.node().resource_version(),
                        .taints = GetList(in.node().taints(), GetTaint)};
  }
  return out;
}

// --- the snapshot, manifest and memory ----------------------------------------------------------

void PutSnapshot(const NodeSnapshot& in, pb::CaptureNodeSnapshot* out) {
  out->set_node_name(in.node_name);
  out->set_taken_at_unix_ms(in.taken_at_unix_ms);
  PutList(in.netns, out->mutable_netns(), PutNetns);
  PutList(in.errors, out->mutable_errors(), PutSourceError);
  out->set_scan_ms(in.scan_ms);
  out->set_zds_collected(in.zds_collected);
  PutZds(in.zds, out->mutable_zds());
  PutList(in.processes, out->mutable_processes(), PutProcess);
  PutList(in.ztunnels, out->mutable_ztunnels(), PutZtunnel);
  PutCri(in.cri, out->mutable_cri());
  PutList(in.ztunnel_resources, out->mutable_ztunnel_resources(), PutResources);
  PutConntrack(in.probe_conntrack, out->mutable_probe_conntrack());
  PutCni(in.cni, out->mutable_cni());
  PutNftUserspace(in.nft_userspace, out->mutable_nft_userspace());
  if (in.kube) PutKube(*in.kube, out->mutable_kube());
}

NodeSnapshot GetSnapshot(const pb::CaptureNodeSnapshot& in) {
  NodeSnapshot out{.node_name = in.node_name(),
                   .taken_at_unix_ms = in.taken_at_unix_ms(),
                   .netns = GetList(in.netns(), GetNetns),
                   .errors = GetList(in.errors(), GetSourceError),
                   .scan_ms = in.scan_ms(),
                   .zds_collected = in.zds_collected(),
                   .zds = GetZds(in.zds()),
                   .processes = GetList(in.processes(), GetProcess),
                   .ztunnels = GetList(in.ztunnels(), GetZtunnel),
                   .cri = GetCri(in.cri()),
                   .ztunnel_resources = GetList(in.ztunnel_resources(), GetResources),
                   .probe_conntrack = GetConntrack(in.probe_conntrack()),
                   .cni = GetCni(in.cni()),
                   .nft_userspace = GetNftUserspace(in.nft_userspace())};
  if (in.has_kube()) out.kube = std::make_shared<const KubeSnapshot>(GetKube(in.kube()));
  return out;
}

void PutManifest(const Manifest& in, pb::CaptureManifest* out) {
  out->set_format(in.format);
  out->set_version(in.version);
  out->set_agent_version(in.agent_version);
  out->set_node_name(in.node_name);
  out->set_taken_at_unix_ms(in.taken_at_unix_ms);
  out->set_origin(in.origin);
  PutValues(in.agent_flags, out->mutable_agent_flags());
  out->set_ips_redacted(in.ips_redacted);
  PutValues(in.contents, out->mutable_contents());
}

void PutFirstSeen(const std::map<std::string, int64_t>& in,
                  google::protobuf::RepeatedPtrField<pb::CaptureFirstSeen>* out) {
  out->Reserve(static_cast<int>(in.size()));
  for (const auto& [key, unix_ms] : in) {
    pb::CaptureFirstSeen* entry = out->Add();
    entry->set_key(key);
    entry->set_unix_ms(unix_ms);
  }
}

// A key written twice (only a foreign writer could) keeps its first time.
std::map<std::string, int64_t> GetFirstSeen(
    const google::protobuf::RepeatedPtrField<pb::CaptureFirstSeen>& in) {
  std::map<std::string, int64_t> out;
  for (const pb::CaptureFirstSeen& entry : in) out.emplace(entry.key(), entry.unix_ms());
  return out;
}

}  // namespace

void PutSourceError(const SourceError& in, pb::CaptureSourceError* out) {
  out->set_kind(EnumToProto(kSourceKinds, in.kind));
  out->set_message(in.message);
  out->set_error_number(in.error_number);
}

// A kind this reader does not know keeps its message; "netns" is the model's default kind.
SourceError GetSourceError(const pb::CaptureSourceError& in) {
  return {.kind = EnumFromProto(kSourceKinds, in.kind(), SourceKind::kNetns),
          .message = in.message(),
          .error_number = in.error_number()};
}

Manifest GetManifest(const pb::CaptureManifest& in) {
  return {.format = in.format(),
          .version = in.version(),
          .agent_version = in.agent_version(),
          .node_name = in.node_name(),
          .taken_at_unix_ms = in.taken_at_unix_ms(),
          .origin = in.origin(),
          .agent_flags = GetStrings(in.agent_flags()),
          .ips_redacted = in.ips_redacted(),
          .contents = GetStrings(in.contents())};
}

void PutCapture(const Capture& in, pb::Capture* out) {
  PutManifest(in.manifest, out->mutable_manifest());
  PutSnapshot(in.snapshot, out->mutable_snapshot());
  pb::CaptureEngineMemory* memory = out->mutable_memory();
  PutFirstSeen(in.memory.signal_first_seen, memory->mutable_signal_first_seen());
  PutFirstSeen(in.memory.desired_first_seen, memory->mutable_desired_first_seen());
  PutFirstSeen(in.memory.finding_first_seen, memory->mutable_finding_first_seen());
}

Capture GetCapture(const pb::Capture& in) {
  return {.manifest = GetManifest(in.manifest()),
          .snapshot = GetSnapshot(in.snapshot()),
          .memory = {.signal_first_seen = GetFirstSeen(in.memory().signal_first_seen()),
                     .desired_first_seen = GetFirstSeen(in.memory().desired_first_seen()),
                     .finding_first_seen = GetFirstSeen(in.memory().finding_first_seen())}};
}

}  // namespace ad::capture
