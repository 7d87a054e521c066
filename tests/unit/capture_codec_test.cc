// The capture file codec: every model field survives Encode -> Decode, the proto mirrors every
// model struct field for field, and any foreign, damaged, newer or oversized input is refused with
// a clear error (never a crash).
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "analysis_fixtures.h"
#include "capture/capture.h"
#include "capture/capture_proto.h"
#include "capture/gzip.h"

namespace ad::capture {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// ---------------------------------------------------------------------------------------------
// A node with every struct and every field set to a value other than its default.

Match AMatch(MatchKind kind, uint32_t value, std::string text) {
  return {.kind = kind,
          .negated = true,
          .value = value,
          .value2 = value + 1,
          .text = text,
          .elements = {"10.0.0.0/8", "\"eth0\""}};
}

Table RichNftTable() {
  Rule rule{.sem = {.matches = {AMatch(MatchKind::kSet, 1, "{} dst"),
                                AMatch(MatchKind::kDstPort, 15001, "")},
                    .action = {.kind = ActionKind::kVerdictMap,
                               .value = 7,
                               .value2 = 8,
                               .value3 = 9,
                               .text = "{} dport",
                               .elements = {"22 : accept", "80 : drop"}}},
            .comment = "istio \xff\xfe not utf-8",  // kernel text need not be UTF-8
            .handle = 42,
            .has_counter = true};
  Chain chain{.name = "istio-prerouting",
              .is_base = true,
              .hook = "prerouting",
              .priority = -150,
              .type = "nat",
              .policy = "drop",
              .rules = {rule, rule}};
  NftSet set{.name = "istio-inpod-probes-v4",
             .key_type = "ipv4_addr",
             .comment = "probes",
             .elements = {"10.244.0.5", "10.244.0.6"},
             .data_type = "verdict",
             .anonymous = true,
             .interval = true};
  return {.backend = Backend::kNft,
          .family = Family::kInet,
          .name = "istio-ambient-nat",
          .chains = {chain},
          .sets = {set},
          .userdata = {.comment = "made by istio",
                       .creator_version = "1.1.5",
                       .creator_build_time = 0,  // present, and the proto3 default
                       .error = "truncated entry"}};
}

NetnsSnapshot RichNetns(uint64_t inode, bool host) {
  NetnsSnapshot netns = test::HealthyPod("/run/netns/pod-" + std::to_string(inode), inode,
                                         host ? Backend::kIptablesLegacy : Backend::kIptablesNft,
                                         AmbientVariant{.dns_capture = true, .ipv6 = true},
                                         "10.244.0." + std::to_string(inode % 200), "fd00::5");
  netns.netns.dev = 4;
  netns.netns.paths.push_back("/proc/4242/ns/net");
  netns.netns.pids = {4242, 4243};
  netns.netns.is_host = host;
  netns.reads = {.nftables = ReadStatus::kOk,
                 .legacy_v4 = ReadStatus::kFailed,
                 .legacy_v6 = ReadStatus::kNotRead,
                 .routes = ReadStatus::kOk,
                 .listeners = ReadStatus::kFailed,
                 .ipsets = ReadStatus::kOk,
                 .dns_udp = ReadStatus::kFailed};
  netns.netfilter.tables.push_back(RichNftTable());
  Table legacy{.backend = Backend::kIptablesLegacy, .family = Family::kIpv6, .name = "mangle"};
  legacy.chains.push_back({.name = "PREROUTING", .policy = "ACCEPT"});
  legacy.userdata.creator_build_time = -1;
  netns.netfilter.tables.push_back(legacy);
  netns.netfilter.ipsets.push_back({.name = "istio-inpod-probes-v6",
                                    .type = "hash:ip",
                                    .family = Family::kIpv6,
                                    .members = {"fd00::1", "fd00::2"}});
  netns.netfilter.legacy_tables_v4 = {"nat", "mangle"};
  netns.netfilter.legacy_tables_v6 = {"raw"};
  netns.routing.rules.push_back({.family = Family::kIpv6,
                                 .priority = 32764,
                                 .fwmark = 0x539,
                                 .fwmask = 0xfff,
                                 .table = 100,
                                 .action = "lookup"});
  netns.routing.routes.push_back(
      {.family = Family::kIpv6, .table = 100, .type = "local", .dst = "::/0", .dev = "lo"});
  netns.routing.ipv6_disabled = true;
  netns.routing.loopback = {.known = true, .found = true, .up = true, .flags = 0x49};
  netns.listeners.push_back({.family = Family::kIpv6,
                             .protocol = 17,
                             .address = "::1",
                             .port = 15053,
                             .mark = 0x539,
                             .inode = 9001,
                             .owner_pids = {77, 78},
                             .mark_known = true});
  netns.errors.push_back({SourceKind::kLegacyIpv4, "getsockopt: Protocol not available", 92});
  netns.unreadable = true;
  netns.scan_ms = 1.25;
  return netns;
}

UnixSocket RichUnixSocket(uint64_t inode) {
  return {.inode = inode,
          .type = 5,
          .state = 10,
          .path = "/var/run/ztunnel/ztunnel.sock",
          .peer_inode = inode + 1,
          .receive_queue = 3,
          .send_queue = 4,
          .owner_pids = {100},
          .vfs_dev = 0x803,
          .vfs_inode = 777,
          .pending_client_inodes = {inode + 2, inode + 3}};
}

ZtunnelAdminState RichZtunnel() {
  return {.pid = 200,
          .netns_inode = 4026531840,
          .admin_reachable = true,
          .ready = false,  // present and false: not the same as unknown
          .pending_tasks = {"inpod", "xds"},
          .workload_state = std::vector<ZtunnelWorkloadState>{{.pod_uid = "uid-1",
                                                               .state = "Up",
                                                               .name = "web-0",
                                                               .namespace_name = "demo",
                                                               .service_account = "web"}},
          .workloads = std::vector<ZtunnelWorkload>{{.uid = "Kubernetes//Pod/demo/web-0",
                                                     .name = "web-0",
                                                     .namespace_name = "demo",
                                                     .node = "node-a",
                                                     .protocol = "HBONE",
                                                     .network_mode = "Standard",
                                                     .ips = {"10.244.0.5"}}},
          .workloads_seen = 250,
          .has_certificates = true,
          .certificates = {{.identity = "spiffe://cluster.local/ns/demo/sa/web",
                            .state = "Available",
                            .expires_unix_ms = 1787392830000,
                            .chain_length = 2}},
          .active_proxy_count = 0.0,  // present and zero
          .pending_proxy_count = 3.0,
          .errors = {{SourceKind::kZtunnelMetrics, "HTTP 500", 0}}};
}

KubeResourceStatus RichResourceStatus(KubeApiReason reason) {
  return {.synced = true,
          .watching = true,
          .resource_version = "1234",
          .reason = reason,
          .message = "GET /api/v1/pods: HTTP 403",
          .lists = 1,
          .relists = 2,
          .reconnects = 3,
          .events = 4,
          .bookmarks = 5};
}

std::shared_ptr<const KubeSnapshot> RichKube() {
  auto kube = std::make_shared<KubeSnapshot>();
  kube->status = {.enabled = true,
                  .server = "https://10.96.0.1:443",
                  .node_name = "node-a",
                  .reason = KubeApiReason::kThrottled,
                  .message = "Retry-After 5",
                  .pods = RichResourceStatus(KubeApiReason::kForbidden),
                  .namespaces = RichResourceStatus(KubeApiReason::kNone),
                  .node = RichResourceStatus(KubeApiReason::kHung)};
  kube->pods.push_back({.uid = "uid-1",
                        .name = "web-0",
                        .namespace_name = "demo",
                        .node_name = "node-a",
                        .resource_version = "99",
                        .dataplane_mode = "ambient",
                        .redirection = "",  // present and empty
                        .has_sidecar_status = true,
                        .app_label = "web",
                        .k8s_app_label = "istio-cni-node",
                        .host_network = true,
                        .phase = "Running",
                        .pod_ips = {"10.244.0.5", "fd00::5"},
                        .ready = true,
                        .creation_unix_s = 1787392000,
                        .deletion_unix_s = 0});
  kube->pods.push_back({.uid = "uid-2", .name = "plain", .namespace_name = "demo"});
  kube->namespaces.push_back(
      {.name = "demo", .resource_version = "7", .dataplane_mode = "ambient"});
  kube->namespaces.push_back({.name = "other"});
  kube->node = KubeNode{
      .name = "node-a",
      .resource_version = "8",
      .taints = {{.key = std::string(kTaintCniNotReady), .value = "true", .effect = "NoSchedule"}}};
  kube->generation = 17;
  return kube;
}

void AddRichNodeSources(NodeSnapshot& s) {
  s.zds_collected = true;
  s.zds = {.path = "/var/run/ztunnel/ztunnel.sock",
           .listener_found = true,
           .listener = RichUnixSocket(5000),
           .accepted = {RichUnixSocket(5001)},
           .clients = {RichUnixSocket(5002), RichUnixSocket(5003)},
           .errors = {{SourceKind::kZds, "stat: No such file or directory", 2}}};
  s.processes.push_back({.pid = 100,
                         .comm = "istio-cni",
                         .role = ProcessRole::kIstioCni,
                         .own_netns_inode = 4026531840,
                         .netns_fd_inodes = {4026532101, 4026532102},
                         .start_time_unix_ms = 1787391000000});
  s.processes.push_back({.pid = 200, .comm = "ztunnel", .role = ProcessRole::kZtunnel});
  s.ztunnels.push_back(RichZtunnel());
  s.ztunnels.push_back({.pid = 201});  // unknown readiness and counts stay unknown
  s.cri = {.available = true,
           .endpoint = "/run/containerd/containerd.sock",
           .runtime = "containerd 1.6.20",
           .pods = std::vector<PodIdentity>{{.uid = "uid-1",
                                             .name = "web-0",
                                             .namespace_name = "demo",
                                             .sandbox_id = "abc123",
                                             .pid = 4242,
                                             .netns_path = "/var/run/netns/cni-1",
                                             .netns_inode = 4026532101,
                                             .host_network = true,
                                             .ips = {"10.244.0.5"},
                                             .created_at_unix_ms = 1787391500000,
                                             .dataplane_mode_label = "ambient"}},
           .cni_conf_dir = "/etc/cni/net.d",
           .cni_pod_network = "k8s-pod-network",
           .cni_note = "loaded 1 network",
           .errors = {{SourceKind::kCri, "PodSandboxStatus: deadline exceeded", 110}}};
  s.ztunnel_resources.push_back({.pid = 200,
                                 .open_fds = 120,
                                 .fd_soft_limit = 1048576,
                                 .fd_limit_unlimited = true,
                                 .rss_bytes = 64 << 20,
                                 .memory_limit_bytes = 1 << 30,
                                 .memory_unlimited = true,
                                 .cgroup = "/kubepods/burstable/pod1",
                                 .close_wait_counts = {0, 3, 9},
                                 .close_wait_netns = 12,
                                 .close_wait_truncated = true,
                                 .errors = {{SourceKind::kProc, "open limits: EACCES", 13}}});
  s.probe_conntrack = {.collected = true,
                       .netns_path = "/proc/1/ns/net",
                       .filter = "user-space",
                       .snat_addresses = {"169.254.7.127"},
                       .entries = {{.family = Family::kIpv6,
                                    .orig_src = "fd00::1",
                                    .orig_dst = "fd00::5",
                                    .orig_sport = 40000,
                                    .orig_dport = 8080,
                                    .reply_src = "fd00::5",
                                    .reply_dst = "fd16::1",
                                    .reply_sport = 8080,
                                    .reply_dport = 40000,
                                    .tcp_state = 1,
                                    .status = 0x8,
                                    .timeout_s = 100,
                                    .id = 77,
                                    .start_unix_ms = 1787392800000}},
                       .matched = 3,
                       .examined = 5000,
                       .truncated = true,
                       .syn_sent_timeout_s = 120,
                       .dump_ms = 2.5,
                       .errors = {{SourceKind::kConntrack, "EPERM", 1}}};
  s.cni = {.collected = true,
           .dir = "/host/etc/cni/net.d",
           .host_root = "/host",
           .dir_origin = CniDirOrigin::kRuntime,
           .runtime = "containerd 1.6.20",
           .runtime_dir = "/etc/cni/net.d",
           .not_judged = "no directory",
           .dir_readable = true,
           .files = {{.name = "10-calico.conflist", .error = ""},
                     {.name = "99-bad.conf", .error = "malformed JSON"}},
           .files_omitted = 2,
           .active_file = "10-calico.conflist",
           .active_mtime_unix_ms = 1787390000000,
           .network_name = "k8s-pod-network",
           .plugin_types = {"calico", "istio-cni"},
           .istio_cni_chained = true,
           .kubeconfig_path = "/etc/cni/net.d/ZZZ-istio-cni-kubeconfig",
           .kubeconfig_error = "No such file",
           .gaps = {{.start_unix_ms = 1, .end_unix_ms = 2, .file = "10-calico.conflist"}},
           .gaps_dropped = 4,
           .netns_starts = {{.netns_inode = 4026532101, .started_unix_ms = 3, .pid = 4242}},
           .errors = {{SourceKind::kCniConfig, "opendir: EACCES", 13}}};
  s.nft_userspace = {.collected = true,
                     .binary = "/usr/sbin/nft",
                     .version = "1.0.6",
                     .version_source = "dpkg",
                     .json_support = false,
                     .json_evidence = "libnftables lacks libjansson",
                     .probe_ran = true,
                     .probe_result = "ok",
                     .errors = {{SourceKind::kNftProbe, "timeout", 0}}};
  s.kube = RichKube();
}

Capture RichCapture() {
  Capture capture;
  capture.manifest = {.agent_version = "0.1.0-42-gabc",
                      .node_name = "node-a",
                      .taken_at_unix_ms = 1787392830000,
                      .origin = "daemon",
                      .agent_flags = {"--cni-conf-dir", "auto"}};
  NodeSnapshot& s = capture.snapshot;
  s.node_name = "node-a";
  s.taken_at_unix_ms = 1787392830000;
  s.netns.push_back(RichNetns(4026531840, /*host=*/true));
  s.netns.push_back(RichNetns(4026532101, /*host=*/false));
  s.netns.push_back(test::EmptyNetns("/run/netns/plain", 4026532199));
  s.errors.push_back({SourceKind::kProc, "opendir /proc: Permission denied", 13});
  s.scan_ms = 12.5;
  AddRichNodeSources(s);
  capture.memory = {.signal_first_seen = {{"zds/stalled/4026532101", 1787392000000}},
                    .desired_first_seen = {{"desired/uid-1", 1787392100000}, {"desired/uid-2", -5}},
                    .finding_first_seen = {{"ZDS_STALLED/4026532101", 1787392200000}}};
  return capture;
}

// ---------------------------------------------------------------------------------------------
// Comparison of what model structs compare only in part (or not at all).

void ExpectSameNetns(const NetnsSnapshot& a, const NetnsSnapshot& b) {
  EXPECT_TRUE(SameNetnsContent(a, b)) << "netns " << a.netns.inode;
  EXPECT_EQ(a.scan_ms, b.scan_ms);
}

void ExpectSameKube(const std::shared_ptr<const KubeSnapshot>& a,
                    const std::shared_ptr<const KubeSnapshot>& b) {
  ASSERT_EQ(a == nullptr, b == nullptr);
  if (!a) return;
  EXPECT_EQ(a->status, b->status);
  EXPECT_EQ(a->pods, b->pods);
  EXPECT_EQ(a->namespaces, b->namespaces);
  EXPECT_EQ(a->node, b->node);
  EXPECT_EQ(a->generation, b->generation);
}

void ExpectSameSnapshot(const NodeSnapshot& a, const NodeSnapshot& b) {
  EXPECT_EQ(a.node_name, b.node_name);
  EXPECT_EQ(a.taken_at_unix_ms, b.taken_at_unix_ms);
  ASSERT_EQ(a.netns.size(), b.netns.size());
  for (size_t i = 0; i < a.netns.size(); ++i) ExpectSameNetns(a.netns[i], b.netns[i]);
  EXPECT_EQ(a.errors, b.errors);
  EXPECT_EQ(a.scan_ms, b.scan_ms);
  EXPECT_EQ(a.zds_collected, b.zds_collected);
  EXPECT_EQ(a.zds, b.zds);
  EXPECT_EQ(a.processes, b.processes);
  EXPECT_EQ(a.ztunnels, b.ztunnels);
  EXPECT_EQ(a.cri, b.cri);
  EXPECT_EQ(a.ztunnel_resources, b.ztunnel_resources);
  EXPECT_EQ(a.probe_conntrack, b.probe_conntrack);
  // operator== leaves out what changes every poll; a capture keeps it all the same.
  EXPECT_EQ(a.probe_conntrack.examined, b.probe_conntrack.examined);
  EXPECT_EQ(a.probe_conntrack.dump_ms, b.probe_conntrack.dump_ms);
  EXPECT_EQ(a.cni, b.cni);
  EXPECT_EQ(a.nft_userspace, b.nft_userspace);
  ExpectSameKube(a.kube, b.kube);
}

void ExpectSameManifest(const Manifest& a, const Manifest& b) {
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.agent_version, b.agent_version);
  EXPECT_EQ(a.node_name, b.node_name);
  EXPECT_EQ(a.taken_at_unix_ms, b.taken_at_unix_ms);
  EXPECT_EQ(a.origin, b.origin);
  EXPECT_EQ(a.agent_flags, b.agent_flags);
  EXPECT_EQ(a.ips_redacted, b.ips_redacted);
  EXPECT_EQ(a.contents, b.contents);
}

Capture RoundTrip(const Capture& capture) {
  Result<std::string> bytes = Encode(capture);
  EXPECT_TRUE(bytes.ok()) << bytes.error().message;
  if (!bytes) return {};
  Result<Capture> decoded = Decode(*bytes);
  EXPECT_TRUE(decoded.ok()) << decoded.error().message;
  return decoded ? std::move(decoded).value() : Capture{};
}

// ---------------------------------------------------------------------------------------------
// Round trips.

TEST(CaptureCodecTest, EveryFieldSurvivesARoundTrip) {
  const Capture capture = RichCapture();
  const Capture decoded = RoundTrip(capture);
  Manifest expected = capture.manifest;
  expected.contents = DescribeContents(capture);
  ExpectSameManifest(decoded.manifest, expected);
  ExpectSameSnapshot(decoded.snapshot, capture.snapshot);
  EXPECT_EQ(decoded.memory, capture.memory);
}

TEST(CaptureCodecTest, AnEmptyCaptureStaysEmpty) {
  Capture capture;
  const Capture decoded = RoundTrip(capture);
  EXPECT_EQ(decoded.manifest.format, kFormatName);
  EXPECT_EQ(decoded.manifest.version, kFormatVersion);
  EXPECT_TRUE(decoded.manifest.contents.empty());
  ExpectSameSnapshot(decoded.snapshot, capture.snapshot);
  EXPECT_EQ(decoded.snapshot.kube, nullptr);  // no API source: null, not an empty snapshot
  EXPECT_TRUE(decoded.memory.signal_first_seen.empty());
}

TEST(CaptureCodecTest, AbsentAndDefaultValuesStayApart) {
  Capture capture;
  NetnsSnapshot netns;
  Table table;  // creator_build_time -1: absent
  netns.netfilter.tables = {table, table};
  netns.netfilter.tables[1].userdata.creator_build_time = 0;
  capture.snapshot.netns = {netns};
  capture.snapshot.ztunnels = {ZtunnelAdminState{}, RichZtunnel()};
  capture.snapshot.nft_userspace.json_support = true;
  auto kube = std::make_shared<KubeSnapshot>();  // on, but nothing listed yet
  kube->pods.push_back({.name = "no-labels"});
  capture.snapshot.kube = kube;
  const Capture decoded = RoundTrip(capture);
  ExpectSameSnapshot(decoded.snapshot, capture.snapshot);
  const auto& tables = decoded.snapshot.netns.at(0).netfilter.tables;
  EXPECT_EQ(tables.at(0).userdata.creator_build_time, -1);
  EXPECT_EQ(tables.at(1).userdata.creator_build_time, 0);
  EXPECT_EQ(decoded.snapshot.ztunnels.at(0).ready, std::nullopt);
  EXPECT_EQ(decoded.snapshot.ztunnels.at(1).ready, std::optional<bool>(false));
  EXPECT_EQ(decoded.snapshot.kube->pods.at(0).dataplane_mode, std::nullopt);
  EXPECT_EQ(decoded.snapshot.kube->node, std::nullopt);
}

// Every enumerator of every model enum maps to its own proto value and back.
TEST(CaptureCodecTest, EveryEnumValueRoundTrips) {
  Capture capture;
  NodeSnapshot& s = capture.snapshot;
  NetnsSnapshot netns;
  Table table;
  Chain chain;
  for (int k = 0; k <= static_cast<int>(MatchKind::kUnknown); ++k) {
    chain.rules.push_back({.sem = {.matches = {{.kind = static_cast<MatchKind>(k)}}}});
  }
  for (int k = 0; k <= static_cast<int>(ActionKind::kUnknown); ++k) {
    chain.rules.push_back({.sem = {.action = {.kind = static_cast<ActionKind>(k)}}});
  }
  table.chains.push_back(chain);
  for (int b = 0; b <= static_cast<int>(Backend::kNft); ++b) {
    for (int f = 0; f <= static_cast<int>(Family::kOther); ++f) {
      table.backend = static_cast<Backend>(b);
      table.family = static_cast<Family>(f);
      netns.netfilter.tables.push_back(table);
    }
  }
  for (int r = 0; r <= static_cast<int>(ReadStatus::kFailed); ++r) {
    netns.reads.nftables = static_cast<ReadStatus>(r);
    s.netns.push_back(netns);
  }
  for (int k = 0; k < kSourceKindCount; ++k) {
    s.errors.push_back(
        {static_cast<SourceKind>(k), std::string(SourceKindName(static_cast<SourceKind>(k)))});
  }
  for (int r = 0; r <= static_cast<int>(ProcessRole::kZtunnel); ++r) {
    s.processes.push_back({.pid = r, .role = static_cast<ProcessRole>(r)});
  }
  auto kube = std::make_shared<KubeSnapshot>();
  for (int r = 0; r <= static_cast<int>(KubeApiReason::kServerError); ++r) {
    kube->status.reason = static_cast<KubeApiReason>(r);
    kube->status.pods.reason = static_cast<KubeApiReason>(r);
    s.kube = std::make_shared<KubeSnapshot>(*kube);
    for (int o = 0; o <= static_cast<int>(CniDirOrigin::kDefault); ++o) {
      s.cni.dir_origin = static_cast<CniDirOrigin>(o);
      ExpectSameSnapshot(RoundTrip(capture).snapshot, s);
    }
  }
}

TEST(CaptureCodecTest, EncodingIsDeterministic) {
  const Capture capture = RichCapture();
  Result<std::string> a = Encode(capture);
  Result<std::string> b = Encode(capture);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
}

TEST(CaptureCodecTest, ManifestListsWhatTheFileHolds) {
  Capture capture = RichCapture();
  capture.manifest.node_name.clear();  // Encode takes them from the snapshot
  capture.manifest.taken_at_unix_ms = 0;
  const Capture decoded = RoundTrip(capture);
  EXPECT_EQ(decoded.manifest.node_name, "node-a");
  EXPECT_EQ(decoded.manifest.taken_at_unix_ms, 1787392830000);
  const std::vector<std::string> expected = {
      "3 network namespaces (rules per backend, routes, listeners)",
      "1 node-wide source error",
      "ZDS socket observation",
      "fd inventory: 2 processes",
      "ztunnel admin: 2 (readiness, config_dump; certificate states without keys)",
      "ztunnel resource usage: 1",
      "CRI: 1 sandbox",
      "kubelet probe conntrack: 1 unreplied entry",
      "CNI config: 2 files in /host/etc/cni/net.d",
      "nftables userspace: nft 1.0.6",
      "Kubernetes objects: 2 pods, 2 namespaces, node",
      "engine memory: 4 aged conditions",
  };
  EXPECT_EQ(decoded.manifest.contents, expected);
}

// ---------------------------------------------------------------------------------------------
// The proto mirrors the model: same number of fields per struct, and the rich capture above sets
// every proto field (so the round trip checks each one). A model field added without its proto
// field fails here.

struct AnyField {
  template <typename T>
  struct IsOptional : std::false_type {};
  template <typename T>
  struct IsOptional<std::optional<T>> : std::true_type {};

  // std::optional<T> is built by its own converting constructor (through T), not from here,
  // which would make the two ambiguous.
  template <typename T>
  requires(!IsOptional<T>::value) operator T()
      const;  // NOLINT(google-explicit-constructor): converts to any member
};

template <typename T, size_t... I>
constexpr bool InitializableFrom(std::index_sequence<I...>) {
  return requires { T{(void(I), AnyField{})...}; };
}

// The number of members of aggregate T.
template <typename T, size_t N = 0>
constexpr size_t FieldCount() {
  if constexpr (InitializableFrom<T>(std::make_index_sequence<N + 1>{})) {
    return FieldCount<T, N + 1>();
  } else {
    return N;
  }
}

// Every message type reachable from Capture (each must be listed above).
void CollectTypes(const Descriptor* type, std::set<const Descriptor*>& types) {
  if (!types.insert(type).second) return;
  for (int i = 0; i < type->field_count(); ++i) {
    if (const Descriptor* sub = type->field(i)->message_type()) CollectTypes(sub, types);
  }
}

template <typename Model, typename Proto>
void ExpectMirrors(const char* name, std::set<const Descriptor*>& mirrored) {
  EXPECT_EQ(FieldCount<Model>(), static_cast<size_t>(Proto::descriptor()->field_count())) << name;
  mirrored.insert(Proto::descriptor());
}

// Checks each model struct against its message; returns the messages checked.
std::set<const Descriptor*> ExpectEveryStructMirrored() {
  std::set<const Descriptor*> mirrored;
  // EngineMemory's maps are lists of (key, time) in the file.
  mirrored.insert(pb::CaptureFirstSeen::descriptor());
  ExpectMirrors<Capture, pb::Capture>("Capture", mirrored);
  ExpectMirrors<Manifest, pb::CaptureManifest>("Manifest", mirrored);
  ExpectMirrors<EngineMemory, pb::CaptureEngineMemory>("EngineMemory", mirrored);
  ExpectMirrors<NodeSnapshot, pb::CaptureNodeSnapshot>("NodeSnapshot", mirrored);
  ExpectMirrors<SourceError, pb::CaptureSourceError>("SourceError", mirrored);
  ExpectMirrors<NetnsSnapshot, pb::CaptureNetns>("NetnsSnapshot", mirrored);
  ExpectMirrors<NetnsRecord, pb::CaptureNetnsRecord>("NetnsRecord", mirrored);
  ExpectMirrors<NetnsReads, pb::CaptureNetnsReads>("NetnsReads", mirrored);
  ExpectMirrors<NetfilterState, pb::CaptureNetfilter>("NetfilterState", mirrored);
  ExpectMirrors<Table, pb::CaptureTable>("Table", mirrored);
  ExpectMirrors<Chain, pb::CaptureChain>("Chain", mirrored);
  ExpectMirrors<Rule, pb::CaptureRule>("Rule", mirrored);
  ExpectMirrors<RuleSemantics, pb::CaptureRuleSemantics>("RuleSemantics", mirrored);
  ExpectMirrors<Match, pb::CaptureMatch>("Match", mirrored);
  ExpectMirrors<Action, pb::CaptureAction>("Action", mirrored);
  ExpectMirrors<NftSet, pb::CaptureNftSet>("NftSet", mirrored);
  ExpectMirrors<NftTableUserdata, pb::CaptureNftTableUserdata>("NftTableUserdata", mirrored);
  ExpectMirrors<IpSet, pb::CaptureIpSet>("IpSet", mirrored);
  ExpectMirrors<RoutingState, pb::CaptureRouting>("RoutingState", mirrored);
  ExpectMirrors<PolicyRule, pb::CapturePolicyRule>("PolicyRule", mirrored);
  ExpectMirrors<RouteEntry, pb::CaptureRoute>("RouteEntry", mirrored);
  ExpectMirrors<InterfaceAddress, pb::CaptureInterfaceAddress>("InterfaceAddress", mirrored);
  ExpectMirrors<LoopbackLink, pb::CaptureLoopbackLink>("LoopbackLink", mirrored);
  ExpectMirrors<ListeningSocket, pb::CaptureListeningSocket>("ListeningSocket", mirrored);
  ExpectMirrors<UnixSocket, pb::CaptureUnixSocket>("UnixSocket", mirrored);
  ExpectMirrors<ZdsSocketState, pb::CaptureZdsSocketState>("ZdsSocketState", mirrored);
  ExpectMirrors<ProcessNetnsFds, pb::CaptureProcess>("ProcessNetnsFds", mirrored);
  ExpectMirrors<ZtunnelWorkloadState, pb::CaptureZtunnelWorkloadState>("ZtunnelWorkloadState",
                                                                       mirrored);
  ExpectMirrors<ZtunnelWorkload, pb::CaptureZtunnelWorkload>("ZtunnelWorkload", mirrored);
  ExpectMirrors<ZtunnelCertificate, pb::CaptureZtunnelCertificate>("ZtunnelCertificate", mirrored);
  ExpectMirrors<ZtunnelAdminState, pb::CaptureZtunnelAdmin>("ZtunnelAdminState", mirrored);
  ExpectMirrors<ZtunnelResourceUsage, pb::CaptureZtunnelResources>("ZtunnelResourceUsage",
                                                                   mirrored);
  ExpectMirrors<PodIdentity, pb::CapturePodIdentity>("PodIdentity", mirrored);
  ExpectMirrors<CriState, pb::CaptureCri>("CriState", mirrored);
  ExpectMirrors<ProbeConntrackEntry, pb::CaptureProbeConntrackEntry>("ProbeConntrackEntry",
                                                                     mirrored);
  ExpectMirrors<ProbeConntrackState, pb::CaptureProbeConntrack>("ProbeConntrackState", mirrored);
  ExpectMirrors<CniConfFile, pb::CaptureCniConfFile>("CniConfFile", mirrored);
  ExpectMirrors<CniChainGap, pb::CaptureCniChainGap>("CniChainGap", mirrored);
  ExpectMirrors<NetnsStart, pb::CaptureNetnsStart>("NetnsStart", mirrored);
  ExpectMirrors<CniConfigState, pb::CaptureCniConfig>("CniConfigState", mirrored);
  ExpectMirrors<NftUserspaceState, pb::CaptureNftUserspace>("NftUserspaceState", mirrored);
  ExpectMirrors<KubeSnapshot, pb::CaptureKube>("KubeSnapshot", mirrored);
  ExpectMirrors<KubeApiStatus, pb::CaptureKubeApiStatus>("KubeApiStatus", mirrored);
  ExpectMirrors<KubeResourceStatus, pb::CaptureKubeResourceStatus>("KubeResourceStatus", mirrored);
  ExpectMirrors<KubePod, pb::CaptureKubePod>("KubePod", mirrored);
  ExpectMirrors<KubeNamespace, pb::CaptureKubeNamespace>("KubeNamespace", mirrored);
  ExpectMirrors<KubeNode, pb::CaptureKubeNode>("KubeNode", mirrored);
  ExpectMirrors<KubeTaint, pb::CaptureKubeTaint>("KubeTaint", mirrored);
  return mirrored;
}

TEST(CaptureCodecTest, ProtoHasAFieldForEveryModelField) {
  const std::set<const Descriptor*> mirrored = ExpectEveryStructMirrored();
  std::set<const Descriptor*> types;
  CollectTypes(pb::Capture::descriptor(), types);
  for (const Descriptor* type : types) {
    EXPECT_TRUE(mirrored.contains(type)) << type->full_name() << ": add it to the list above";
  }
}

// The fields a message (and what it contains) sets to a value other than the default.
void CollectSetFields(const Message& message, std::set<const FieldDescriptor*>& set) {
  const auto* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);  // proto3: non-default scalars, present messages
  for (const FieldDescriptor* field : fields) {
    set.insert(field);
    if (field->type() != FieldDescriptor::TYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        CollectSetFields(reflection->GetRepeatedMessage(message, field, i), set);
      }
    } else {
      CollectSetFields(reflection->GetMessage(message, field), set);
    }
  }
}

TEST(CaptureCodecTest, RichCaptureSetsEveryProtoField) {
  Capture capture = RichCapture();
  capture.manifest.ips_redacted = true;  // a flag here: PutCapture itself redacts nothing
  capture.manifest.contents = DescribeContents(capture);
  pb::Capture message;
  PutCapture(capture, &message);
  std::set<const FieldDescriptor*> set;
  CollectSetFields(message, set);
  std::set<const Descriptor*> types;
  CollectTypes(pb::Capture::descriptor(), types);
  for (const Descriptor* type : types) {
    for (int i = 0; i < type->field_count(); ++i) {
      EXPECT_TRUE(set.contains(type->field(i))) << type->field(i)->full_name() << " never set";
    }
  }
}

// --redact-ips: Encode maps the addresses (capture/redact_ips.h); the decoded capture says so and
// holds the stand-ins wherever the originals were.
TEST(CaptureCodecTest, RedactedCaptureHoldsStandIns) {
  Capture capture = RichCapture();
  capture.manifest.ips_redacted = true;
  Result<std::string> bytes = Encode(capture);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  Result<Capture> decoded = Decode(*bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_TRUE(decoded->manifest.ips_redacted);
  bool checked = false;
  for (size_t n = 0; n < capture.snapshot.netns.size(); ++n) {
    const auto& before = capture.snapshot.netns[n].routing.addresses;
    const auto& after = decoded->snapshot.netns[n].routing.addresses;
    ASSERT_EQ(before.size(), after.size());
    for (size_t i = 0; i < before.size(); ++i) {
      if (!before[i].global_scope) continue;
      EXPECT_NE(after[i].address, before[i].address);
      EXPECT_TRUE(after[i].address.starts_with("198.18.") ||
                  after[i].address.starts_with("2001:db8:"))
          << after[i].address;
      checked = true;
    }
  }
  EXPECT_TRUE(checked) << "the rich capture has global addresses";
}

// ---------------------------------------------------------------------------------------------
// Bad input: a clear error, never a crash.

std::string GzipOf(std::string_view data) {
  Result<std::string> bytes = Gzip(data);
  EXPECT_TRUE(bytes.ok());
  return bytes ? *bytes : std::string();
}

std::string PayloadWithManifest(std::string_view format, uint32_t version) {
  pb::Capture message;
  message.mutable_manifest()->set_format(std::string(format));
  message.mutable_manifest()->set_version(version);
  message.mutable_snapshot()->set_node_name("node-a");
  return message.SerializeAsString();
}

std::string DecodeError(std::string_view bytes, size_t max = kMaxDecodedBytes) {
  Result<Capture> decoded = Decode(bytes, max);
  if (decoded) return "(decoded)";
  EXPECT_EQ(decoded.error().kind, SourceKind::kCapture);
  EXPECT_EQ(decoded.error().source(), "capture");
  return decoded.error().message;
}

TEST(CaptureCodecBadInputTest, EmptyInput) {
  EXPECT_EQ(DecodeError(""), "not an ambient-doctor capture (empty)");
}

TEST(CaptureCodecBadInputTest, RandomBytes) {
  std::mt19937 rng(24);
  std::string bytes(4096, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  bytes[0] = 'x';
  EXPECT_EQ(DecodeError(bytes), "not an ambient-doctor capture (not gzip)");
  EXPECT_EQ(DecodeError("{\"schema\": \"ambient-doctor.report/v2\"}"),
            "not an ambient-doctor capture (not gzip)");
  // gzip magic, then garbage
  bytes[0] = '\x1f';
  bytes[1] = '\x8b';
  EXPECT_TRUE(DecodeError(bytes).starts_with("corrupted (gzip: ")) << DecodeError(bytes);
}

TEST(CaptureCodecBadInputTest, AGzipOfSomethingElse) {
  EXPECT_EQ(DecodeError(GzipOf("hello")), "not an ambient-doctor capture (no capture manifest)");
  EXPECT_EQ(DecodeError(GzipOf("")), "not an ambient-doctor capture (no capture manifest)");
  EXPECT_EQ(DecodeError(GzipOf(PayloadWithManifest("falco.scap", 1))),
            "not an ambient-doctor capture");
  EXPECT_EQ(DecodeError(GzipOf(PayloadWithManifest(kFormatName, 0))),
            "corrupted (no format version)");
}

TEST(CaptureCodecBadInputTest, Truncated) {
  Result<std::string> bytes = Encode(RichCapture());
  ASSERT_TRUE(bytes.ok());
  const size_t size = bytes->size();
  for (size_t length : {size_t{2}, size_t{5}, size_t{10}, size_t{11}, size / 3, size / 2, size - 8,
                        size - 4, size - 1}) {
    EXPECT_EQ(DecodeError(std::string_view(*bytes).substr(0, length)), "truncated")
        << "cut at " << length << " of " << size;
  }
}

TEST(CaptureCodecBadInputTest, OneFlippedByte) {
  Result<std::string> bytes = Encode(RichCapture());
  ASSERT_TRUE(bytes.ok());
  for (size_t at : {bytes->size() / 2, bytes->size() / 3, bytes->size() - 6}) {
    std::string damaged = *bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    const std::string error = DecodeError(damaged);
    EXPECT_TRUE(error.starts_with("corrupted (gzip: ")) << "at " << at << ": " << error;
  }
  std::string trailing = *bytes + "x";
  EXPECT_EQ(DecodeError(trailing), "corrupted (1 bytes after the end of the gzip stream)");
}

TEST(CaptureCodecBadInputTest, ANewerFormatVersion) {
  EXPECT_EQ(DecodeError(GzipOf(PayloadWithManifest(kFormatName, kFormatVersion + 1))),
            "written by a newer ambient-doctor (format version 2; this one reads up to 1)");
  // Refused from the manifest alone, before the rest (which a newer writer may lay out anew).
  std::string payload = PayloadWithManifest(kFormatName, kFormatVersion + 1) + "\xff\xff\xff";
  EXPECT_EQ(DecodeError(GzipOf(payload)),
            "written by a newer ambient-doctor (format version 2; this one reads up to 1)");
}

TEST(CaptureCodecBadInputTest, AManifestFollowedByGarbage) {
  std::string payload = PayloadWithManifest(kFormatName, kFormatVersion) + "\x12\x7f\x01";
  EXPECT_EQ(DecodeError(GzipOf(payload)), "corrupted (not a capture message)");
}

TEST(CaptureCodecBadInputTest, GzipBombOverTheBound) {
  // 8 MiB of zeros compress to ~8 KiB; refused over a 1 MiB bound while inflating.
  const std::string bomb = GzipOf(std::string(size_t{8} << 20, '\0'));
  EXPECT_LT(bomb.size(), size_t{64} << 10);
  EXPECT_EQ(DecodeError(bomb, size_t{1} << 20), "larger than 1 MiB decoded");
  // A valid capture under a bound smaller than itself is refused the same way.
  Result<std::string> bytes = Encode(RichCapture());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(DecodeError(*bytes, 100), "larger than 100 bytes decoded");
  EXPECT_EQ(DecodeError(*bytes, kMaxDecodedBytes), "(decoded)");
}

TEST(CaptureCodecBadInputTest, ThePayloadAloneNeverCrashes) {
  // Past the CRC: protobuf bytes straight into the decoder, every prefix of a real capture.
  pb::Capture message;
  PutCapture(RichCapture(), &message);
  const std::string payload = message.SerializeAsString();
  for (size_t length = 0; length < payload.size(); ++length) {
    (void)DecodePayload(std::string_view(payload).substr(0, length));
  }
  EXPECT_TRUE(DecodePayload(payload).ok());
}

// ---------------------------------------------------------------------------------------------
// Size: a 250-pod node of Istio's rules (printed for the bench notes, not asserted).

// `count` enrolled pods of one backend, each with its Istio rules, routes, listeners, CRI sandbox,
// ztunnel workload and Kubernetes pod, plus the host with the probe set.
Capture PodsNode(int count, Backend backend, const AmbientVariant& variant) {
  Capture capture;
  NodeSnapshot& s = capture.snapshot;
  s.node_name = "node-a";
  std::vector<std::string> members;
  std::vector<PodIdentity> pods;
  std::vector<ZtunnelWorkload> workloads;
  auto kube = std::make_shared<KubeSnapshot>();
  for (int i = 0; i < count; ++i) {
    const std::string ip = "10.244." + std::to_string(i / 200) + "." + std::to_string(i % 200);
    const std::string ip6 = variant.ipv6 ? "fd00::" + std::to_string(i + 1) : "";
    const uint64_t inode = 4026532100 + static_cast<uint64_t>(i);
    const std::string name = "pod-" + std::to_string(i);
    const std::string uid = "3f1c2a9e-0000-4000-8000-" + std::to_string(100000000000 + i);
    NetnsSnapshot pod =
        test::HealthyPod("/var/run/netns/cni-" + uid, inode, backend, variant, ip, ip6);
    for (uint16_t port : {15001, 15006, 15008, 15053}) {
      pod.listeners.push_back({Family::kIpv4, 6, "127.0.0.1", port, 0x539, inode, {1000}, true});
    }
    pod.scan_ms = 0.4;
    s.netns.push_back(std::move(pod));
    members.push_back(ip);
    pods.push_back(test::CriPod(uid, name, inode, {ip}));
    workloads.push_back({.uid = "Kubernetes//Pod/demo/" + name,
                         .name = name,
                         .namespace_name = "demo",
                         .node = "node-a",
                         .protocol = "HBONE",
                         .network_mode = "Standard",
                         .ips = {ip}});
    kube->pods.push_back({.uid = uid,
                          .name = name,
                          .namespace_name = "demo",
                          .node_name = "node-a",
                          .resource_version = std::to_string(1000 + i),
                          .phase = "Running",
                          .pod_ips = {ip},
                          .ready = true});
  }
  s.netns.insert(s.netns.begin(), test::HealthyHost(backend, variant.ipv6, members));
  s.cri.available = true;
  s.cri.pods = pods;
  s.ztunnels.push_back({.pid = 200,
                        .admin_reachable = true,
                        .ready = true,
                        .workloads = workloads,
                        .workloads_seen = static_cast<size_t>(count)});
  s.kube = kube;
  return capture;
}

TEST(CaptureCodecSizeTest, TwoHundredFiftyPods) {
  struct Case {
    const char* name;
    Backend backend;
    AmbientVariant variant;
  };
  for (const Case& c :
       {Case{"iptables-nft, DNS", Backend::kIptablesNft, {.dns_capture = true}},
        Case{"iptables-legacy, DNS", Backend::kIptablesLegacy, {.dns_capture = true}},
        Case{"nft, DNS, dual-stack", Backend::kNft, {.dns_capture = true, .ipv6 = true}}}) {
    const Capture capture = PodsNode(250, c.backend, c.variant);
    const auto start = std::chrono::steady_clock::now();
    Result<std::string> bytes = Encode(capture);
    const auto encoded = std::chrono::steady_clock::now();
    ASSERT_TRUE(bytes.ok());
    Result<Capture> decoded = Decode(*bytes);
    const auto end = std::chrono::steady_clock::now();
    ASSERT_TRUE(decoded.ok());
    ExpectSameSnapshot(decoded->snapshot, capture.snapshot);
    pb::Capture message;
    PutCapture(capture, &message);
    using Ms = std::chrono::duration<double, std::milli>;
    std::printf(
        "250 pods (%s; CRI, ztunnel, Kubernetes): %zu bytes encoded, %zu decoded; "
        "encode %.1f ms, decode %.1f ms\n",
        c.name, bytes->size(), message.ByteSizeLong(), Ms(encoded - start).count(),
        Ms(end - encoded).count());
  }
}

// ---------------------------------------------------------------------------------------------
// The fuzz target's seeds (tests/fuzz/corpus/capture_fuzz), written on demand:
//   capture_codec_test --gtest_also_run_disabled_tests --gtest_filter='*WriteFuzzSeeds'

void WriteSeed(const std::string& name, std::string_view bytes) {
  const std::string path = std::string(AD_SOURCE_DIR) + "/tests/fuzz/corpus/capture_fuzz/" + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
  std::fclose(file);
}

TEST(CaptureCodecSeeds, DISABLED_WriteFuzzSeeds) {
  Capture small;
  small.manifest = {.agent_version = "0.1.0", .origin = "local"};
  small.snapshot.node_name = "node-a";
  small.snapshot.netns.push_back(test::HealthyPod("/run/netns/pod", 4026532101, Backend::kNft,
                                                  AmbientVariant{}, "10.244.0.5"));
  auto kube = std::make_shared<KubeSnapshot>();
  kube->pods.push_back({.uid = "uid-1", .name = "web-0", .dataplane_mode = "ambient"});
  small.snapshot.kube = kube;
  const Capture rich = RichCapture();
  using Seed = std::pair<std::string, const Capture*>;
  for (const auto& [name, capture] :
       {Seed{"rich", &rich}, Seed{"small", &small}, Seed{"empty", nullptr}}) {
    const Capture value = capture != nullptr ? *capture : Capture{};
    Result<std::string> bytes = Encode(value);
    ASSERT_TRUE(bytes.ok());
    WriteSeed(name + ".capture", *bytes);
    if (capture == nullptr) continue;
    Result<std::string> payload = Gunzip(*bytes, kMaxDecodedBytes);
    ASSERT_TRUE(payload.ok());
    WriteSeed(name + ".payload", *payload);
    if (capture == &rich) WriteSeed("rich-truncated.capture", bytes->substr(0, bytes->size() / 2));
  }
}

}  // namespace
}  // namespace ad::capture
