// The node snapshot: plain data produced by the sources and consumed by analysis and outputs.
// Holds no fds, sockets or library handles; copyable and serialisable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
};

struct RouteEntry {
  Family family = Family::kIpv4;
  uint32_t table = 0;
  std::string type;  // "local", "unicast", ...
  std::string dst;   // canonical prefix "0.0.0.0/0", "::/0"
  std::string dev;   // output interface name
};

struct InterfaceAddress {
  std::string ifname;
  Family family = Family::kIpv4;
  std::string address;  // canonical address without prefix
  uint8_t prefix_len = 0;
  bool global_scope = false;  // scope universe (pod IPs); loopback and link-local are not
};

struct RoutingState {
  std::vector<PolicyRule> rules;
  std::vector<RouteEntry> routes;  // only the table(s) the reader was asked for (Istio: 100)
  std::vector<InterfaceAddress> addresses;
  bool ipv6_disabled = false;  // /proc/sys/net/ipv6/conf/lo/disable_ipv6 == 1 (or no IPv6)
};

struct NetfilterState {
  std::vector<Table> tables;  // all backends
  std::vector<IpSet> ipsets;
  std::vector<std::string> legacy_tables_v4;  // ip_tables_names as read inside the netns
  std::vector<std::string> legacy_tables_v6;  // ip6_tables_names
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

  // Every netfilter backend was read: the rule picture is complete.
  bool NetfilterComplete() const {
    return nftables == ReadStatus::kOk && legacy_v4 == ReadStatus::kOk &&
           legacy_v6 == ReadStatus::kOk;
  }
  // For snapshots built by hand (tests, fixtures): every read succeeded.
  static NetnsReads AllOk();
};

struct NetnsSnapshot {
  NetnsRecord netns;
  NetnsReads reads;
  NetfilterState netfilter;
  RoutingState routing;
  std::vector<ListeningSocket> listeners;  // TCP LISTEN sockets (sock_diag; UDP not scanned)
  std::vector<SourceError> errors;         // partial failures; a vanished netns shows up here
  bool unreadable = false;                 // nothing could be read at all
  double scan_ms = 0;
};

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

  const NetnsSnapshot* Host() const;
};

}  // namespace ad
