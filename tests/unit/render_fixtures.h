// Rich nodes for the renderer tests: every section of the report, rules of every backend, node
// and netns errors, a broken pod of each kind, ZDS plumbing with degraded sources. Analysed by the
// real analysis so the findings are the ones a scan would give.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/history.h"
#include "analysis_fixtures.h"

namespace ad::test {

struct RenderFixture {
  NodeSnapshot snapshot;
  NodeAnalysis analysis;
};

inline constexpr int64_t kFixtureTakenAt = 1787392830000;  // 2026-08-22T10:00:30Z

// Rules only: nft host with probe sets, pods in all three backends (one legacy pod with a duplicate
// jump, one iptables-nft pod with a deleted rule, IPv6 + virtual interfaces), a plain netns, an
// unreadable one, a partly read one, node-wide errors.
inline RenderFixture RulesNode() {
  RenderFixture f;
  NodeSnapshot& s = f.snapshot;
  s.node_name = "node-rich";
  s.taken_at_unix_ms = kFixtureTakenAt;
  s.scan_ms = 12.6;
  s.errors.push_back({SourceKind::kProc, "opendir /proc: Permission denied", 13});
  s.netns.push_back(
      HealthyHost(Backend::kNft, /*ipv6=*/true, {"10.0.0.11", "10.0.0.12"}, {"fd00::11"}));
  s.netns.push_back(HealthyPod("/run/netns/pod-nft", 4026532101, Backend::kNft,
                               AmbientVariant{.dns_capture = true}, "10.0.0.11"));
  NetnsSnapshot legacy =
      HealthyPod("/run/netns/pod-legacy", 4026532102, Backend::kIptablesLegacy,
                 AmbientVariant{.dns_capture = true, .ingress_mode = true}, "10.0.0.12");
  legacy.netns.paths.push_back("/proc/4242/ns/net");
  legacy.netns.pids = {4242, 4243};
  legacy.netfilter.legacy_tables_v4 = {"nat", "mangle"};
  for (Table& t : legacy.netfilter.tables) {
    for (Chain& c : t.chains) {
      if (c.name == "OUTPUT" && !c.rules.empty()) c.rules.push_back(c.rules.front());
    }
  }
  s.netns.push_back(std::move(legacy));
  NetnsSnapshot broken = HealthyPod(
      "/run/netns/pod-broken", 4026532103, Backend::kIptablesNft,
      AmbientVariant{.dns_capture = false, .virtual_interfaces = {"eth1", "eth2"}, .ipv6 = true},
      "10.0.0.13", "fd00::13");
  for (Table& t : broken.netfilter.tables) {
    for (Chain& c : t.chains) {
      if (c.name == "ISTIO_OUTPUT" && c.rules.size() > 1) c.rules.erase(c.rules.begin() + 1);
    }
  }
  broken.listeners.push_back({Family::kIpv4, 6, "0.0.0.0", 15001, 0x539, 9001, {77}, true});
  s.netns.push_back(std::move(broken));
  NetnsSnapshot plain = EmptyNetns("/run/netns/plain", 4026532104);
  plain.netfilter.ipsets.push_back({"other", "hash:net", Family::kIpv6, {"fd00::/64"}});
  s.netns.push_back(std::move(plain));
  NetnsSnapshot gone = EmptyNetns("/run/netns/gone", 4026532105);
  gone.unreadable = true;
  gone.errors.push_back({SourceKind::kNetns, "setns /run/netns/gone: No such file", 2});
  s.netns.push_back(std::move(gone));
  NetnsSnapshot partial = HealthyPod("/run/netns/pod-partial", 4026532106, Backend::kIptablesNft,
                                     AmbientVariant{}, "10.0.0.16");
  partial.reads.legacy_v6 = ReadStatus::kFailed;
  partial.errors.push_back(
      {SourceKind::kLegacyIpv6, "getsockopt IP6T_SO_GET_INFO: Protocol not available", 92});
  partial.scan_ms = 0.4;
  s.netns.push_back(std::move(partial));
  AnalysisOptions options;
  options.history_known = false;
  f.analysis = Analyze(s, options);
  return f;
}

// RulesNode plus the ZDS sources: a listener with a backlog, two connections, istio-cni and two
// ztunnels (one not ready, one whose admin failed), a ztunnel process without admin, CRI naming
// the pods, degraded sources everywhere.
inline RenderFixture ZdsRichNode(bool history_known) {
  RenderFixture f = RulesNode();
  NodeSnapshot& s = f.snapshot;
  s.zds_collected = true;
  s.zds.path = "/var/run/ztunnel/ztunnel.sock";
  s.zds.listener_found = true;
  s.zds.listener.inode = 7000;
  s.zds.listener.owner_pids = {100};
  s.zds.listener.receive_queue = 1;
  s.zds.listener.pending_client_inodes = {7010, 7011};
  UnixSocket accepted;
  accepted.inode = 7001;
  accepted.peer_inode = 7002;
  accepted.receive_queue = 88;
  accepted.owner_pids = {100};
  UnixSocket accepted_orphan;
  accepted_orphan.inode = 7003;
  accepted_orphan.peer_inode = 7004;
  accepted_orphan.send_queue = 5;
  s.zds.accepted = {accepted, accepted_orphan};
  UnixSocket client;
  client.inode = 7002;
  client.peer_inode = 7001;
  client.owner_pids = {200, 201};
  s.zds.clients = {client};
  s.zds.errors.push_back({SourceKind::kSockDiag, "UNIX_DIAG: Operation not permitted", 1});
  ProcessNetnsFds cni;
  cni.pid = 100;
  cni.comm = "install-cni";
  cni.role = ProcessRole::kIstioCni;
  cni.netns_fd_inodes = {4026532101, 4026532102, 4026532103};
  cni.start_time_unix_ms = 1787390000000;
  ProcessNetnsFds ztunnel;
  ztunnel.pid = 200;
  ztunnel.comm = "ztunnel";
  ztunnel.role = ProcessRole::kZtunnel;
  ztunnel.netns_fd_inodes = {4026532101, 4026532102};
  ztunnel.start_time_unix_ms = 1787391000000;
  ProcessNetnsFds ztunnel2;
  ztunnel2.pid = 201;
  ztunnel2.comm = "ztunnel";
  ztunnel2.role = ProcessRole::kZtunnel;
  ProcessNetnsFds ztunnel3;
  ztunnel3.pid = 202;
  ztunnel3.comm = "ztunnel";
  ztunnel3.role = ProcessRole::kZtunnel;
  ztunnel3.netns_fd_inodes = {4026532101};
  s.processes = {cni, ztunnel, ztunnel2, ztunnel3};
  ZtunnelAdminState admin;
  admin.pid = 200;
  admin.admin_reachable = true;
  admin.ready = false;
  admin.pending_tasks = {"workload proxy manager", "state manager"};
  admin.workload_state = {{"uid-nft", "Up", "nft", "demo", "sa"},
                          {"uid-legacy", "Pending", "", "", ""}};
  admin.active_proxy_count = 2;
  admin.pending_proxy_count = 1;
  ZtunnelAdminState admin2;
  admin2.pid = 201;
  admin2.admin_reachable = true;
  admin2.ready = true;
  admin2.active_proxy_count = 3;
  ZtunnelAdminState unknown;
  unknown.pid = 0;
  unknown.errors.push_back({SourceKind::kZtunnelConfigDump, "GET /config_dump: timed out", 110});
  s.ztunnels = {admin, admin2, unknown};
  s.cri.available = true;
  s.cri.runtime = "containerd 1.7.24";
  s.cri.endpoint = "unix:///run/containerd/containerd.sock";
  PodIdentity nft_pod{.uid = "uid-nft",
                      .name = "nft",
                      .namespace_name = "demo",
                      .netns_inode = 4026532101,
                      .ips = {"10.0.0.11"}};
  PodIdentity legacy_pod{.uid = "uid-legacy",
                         .name = "legacy",
                         .namespace_name = "demo",
                         .netns_inode = 4026532102,
                         .ips = {"10.0.0.12"}};
  s.cri.pods = {nft_pod, legacy_pod};
  s.cri.errors.push_back({SourceKind::kCri, "PodSandboxStatus x: deadline exceeded", 0});
  AnalysisOptions options;
  options.history_known = history_known;
  options.zds_stall_threshold_ms = 5000;
  f.analysis = Analyze(s, options);
  return f;
}

// A node without CRI and without a ZDS listener.
inline RenderFixture ZdsNoListenerNode() {
  RenderFixture f = RulesNode();
  NodeSnapshot& s = f.snapshot;
  s.zds_collected = true;
  s.zds.path = "/var/run/ztunnel/ztunnel.sock";
  s.cri.available = false;
  s.cri.errors.push_back({SourceKind::kCri, "no CRI socket answered", 2});
  AnalysisOptions options;
  options.history_known = false;
  f.analysis = Analyze(s, options);
  return f;
}

}  // namespace ad::test
