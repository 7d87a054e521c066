// The node snapshot: plain data produced by the sources and consumed by analysis and outputs.
// Holds no fds, sockets or library handles; copyable and serialisable.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/cni.h"
#include "model/conntrack.h"
#include "model/kube.h"
#include "model/rule.h"
#include "model/source_error.h"
#include "model/zds.h"

namespace ad {

struct NetnsRecord {
  uint64_t dev = 0;
  uint64_t inode = 0;
  std::vector<std::string> paths;  // bind mounts and /proc/<pid>/ns/net links that reach it
  std::vector<int> pids;           // processes living in it (empty when /proc is not scanned)
  bool is_host = false;

  // Best path to open the netns with (first bind mount, else first /proc link).
  const std::string& PrimaryPath() const;

  bool operator==(const NetnsRecord&) const = default;
};

struct PolicyRule {  // one "ip rule"
  Family family = Family::kIpv4;
  uint32_t priority = 0;
  uint32_t fwmark = 0;
  uint32_t fwmask = 0;
  uint32_t table = 0;
  std::string action;  // "lookup", "blackhole", "unreachable", ...

  bool operator==(const PolicyRule&) const = default;
};

struct RouteEntry {
  Family family = Family::kIpv4;
  uint32_t table = 0;
  std::string type;  // "local", "unicast", ...
  std::string dst;   // canonical prefix "0.0.0.0/0", "::/0"
  std::string dev;   // output interface name

  bool operator==(const RouteEntry&) const = default;
};

struct InterfaceAddress {
  std::string ifname;
  Family family = Family::kIpv4;
  std::string address;  // canonical address without prefix
  uint8_t prefix_len = 0;
  bool global_scope = false;  // scope universe (pod IPs); loopback and link-local are not

  bool operator==(const InterfaceAddress&) const = default;
};

// The netns's loopback link (rtnetlink RTM_GETLINK for "lo"): ztunnel binds its in-pod DNS proxy
// on lo's 127.0.0.1 and ::1, so a lo that is down or lacks ::1 keeps the proxy from starting.
struct LoopbackLink {
  bool known = false;  // the RTM_GETLINK for lo was answered (either way)
  bool found = false;  // a link named lo exists
  bool up = false;     // IFF_UP in ifi_flags
  uint32_t flags = 0;  // ifi_flags as the kernel reported them

  bool operator==(const LoopbackLink&) const = default;
};

struct RoutingState {
  std::vector<PolicyRule> rules;
  std::vector<RouteEntry> routes;  // only the table(s) the reader was asked for (Istio: 100)
  std::vector<InterfaceAddress> addresses;
  bool ipv6_disabled = false;  // /proc/sys/net/ipv6/conf/lo/disable_ipv6 == 1 (or no IPv6)
  LoopbackLink loopback;

  bool operator==(const RoutingState&) const = default;
};

struct NetfilterState {
  std::vector<Table> tables;  // all backends
  std::vector<IpSet> ipsets;
  std::vector<std::string> legacy_tables_v4;  // ip_tables_names as read inside the netns
  std::vector<std::string> legacy_tables_v6;  // ip6_tables_names

  bool operator==(const NetfilterState&) const = default;
};

// Whether each per-netns read ran and succeeded, set by the inspector. Analysis judges absence
// ("no redirect rules", "no listener", "probe set missing") only from reads that succeeded.
enum class ReadStatus : uint8_t { kNotRead, kOk, kFailed };

struct NetnsReads {
  ReadStatus nftables = ReadStatus::kNotRead;
  ReadStatus legacy_v4 = ReadStatus::kNotRead;
  ReadStatus legacy_v6 = ReadStatus::kNotRead;
  ReadStatus routes = ReadStatus::kNotRead;
  ReadStatus listeners = ReadStatus::kNotRead;
  ReadStatus ipsets = ReadStatus::kNotRead;  // kNotRead outside the host in a node scan
  // UDP sockets on ztunnel's DNS port 15053 (a port-filtered sock_diag dump). Read only in netns
  // where a ztunnel-port TCP listener was found: kNotRead elsewhere.
  ReadStatus dns_udp = ReadStatus::kNotRead;

  // Every netfilter backend was read: the rule picture is complete.
  bool NetfilterComplete() const {
    return nftables == ReadStatus::kOk && legacy_v4 == ReadStatus::kOk &&
           legacy_v6 == ReadStatus::kOk;
  }
  // For snapshots built by hand (tests, fixtures): every read succeeded.
  static NetnsReads AllOk();
  bool operator==(const NetnsReads&) const = default;
};

struct NetnsSnapshot {
  NetnsRecord netns;
  NetnsReads reads;
  NetfilterState netfilter;
  RoutingState routing;
  // TCP LISTEN sockets (sock_diag), plus the UDP sockets bound to 15053 when reads.dns_udp ran.
  std::vector<ListeningSocket> listeners;
  std::vector<SourceError> errors;  // partial failures; a vanished netns shows up here
  bool unreadable = false;          // nothing could be read at all
  double scan_ms = 0;
};

// Whether two reads of a netns found the same: everything but how long the read took.
bool SameNetnsContent(const NetnsSnapshot& a, const NetnsSnapshot& b);

struct NodeSnapshot {
  std::string node_name;
  int64_t taken_at_unix_ms = 0;
  std::vector<NetnsSnapshot> netns;
  std::vector<SourceError> errors;  // node-wide source failures (e.g. /proc unreadable)
  double scan_ms = 0;

  // ZDS hand-off and pod identity (node-wide sources; empty when not collected).
  bool zds_collected = false;
  ZdsSocketState zds;
  std::vector<ProcessNetnsFds> processes;  // istio-cni and ztunnel processes only
  std::vector<ZtunnelAdminState> ztunnels;
  CriState cri;
  // Per ztunnel process: fds, memory and CLOSE_WAIT sockets against its limits (sorted by pid;
  // empty when not collected).
  std::vector<ZtunnelResourceUsage> ztunnel_resources;

  // Kubelet probe connections in the host netns's conntrack (probe path source; empty when off).
  ProbeConntrackState probe_conntrack;
  // CNI chain group: the CNI config directory and the nftables userspace.
  CniConfigState cni;
  NftUserspaceState nft_userspace;

  // The Kubernetes API source's copy of this node's pods, the namespaces and the node (shared
  // between steps while its generation is unchanged); null when no API source runs.
  std::shared_ptr<const KubeSnapshot> kube;

  const NetnsSnapshot* Host() const;
};

}  // namespace ad
