// Hand-built snapshots for the analysis tests: healthy ambient pods and host netns materialised
// from the expected rule sets, plus helpers to break them the way the lab faults do.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/istio_ruleset.h"
#include "model/snapshot.h"

namespace ad::test {

inline Table& FindOrAddTable(std::vector<Table>& tables, Backend backend, Family family,
                             std::string_view name) {
  for (Table& table : tables) {
    if (table.backend == backend && table.family == family && table.name == name) return table;
  }
  Table table;
  table.backend = backend;
  table.family = family;
  table.name = std::string(name);
  tables.push_back(std::move(table));
  return tables.back();
}

inline Chain& FindOrAddChain(Table& table, std::string_view name) {
  for (Chain& chain : table.chains) {
    if (chain.name == name) return chain;
  }
  Chain chain;
  chain.name = std::string(name);
  table.chains.push_back(std::move(chain));
  return table.chains.back();
}

// Appends an expected rule set to a netns's tables (iptables built-ins keep their other rules).
inline void Materialise(NetfilterState& netfilter, Backend backend,
                        const istio::ExpectedRuleset& ruleset) {
  for (const istio::ExpectedChain& expected : ruleset.chains) {
    Table& table = FindOrAddTable(netfilter.tables, backend, expected.family, expected.table);
    Chain& chain = FindOrAddChain(table, expected.chain);
    chain.is_base = expected.is_base || !expected.owned;
    chain.hook = expected.hook;
    chain.type = expected.type;
    chain.priority = expected.priority;
    for (const istio::ExpectedRule& rule : expected.rules) {
      Rule copy = rule.rule;
      copy.has_counter = backend != Backend::kIptablesLegacy;
      chain.rules.push_back(std::move(copy));
    }
  }
}

inline void AddPolicyRouting(RoutingState& routing, const AmbientVariant& variant) {
  const istio::ExpectedPolicyRouting expected =
      istio::BuildPolicyRouting(variant, routing.ipv6_disabled);
  routing.rules.insert(routing.rules.end(), expected.rules.begin(), expected.rules.end());
  routing.routes.insert(routing.routes.end(), expected.routes.begin(), expected.routes.end());
}

inline istio::ProbeSnat DefaultSnat() { return istio::ProbeSnat{}; }

inline NetnsSnapshot EmptyNetns(std::string path, uint64_t inode, bool is_host = false) {
  NetnsSnapshot netns;
  netns.reads = NetnsReads::AllOk();  // as if every reader succeeded
  netns.netns.paths = {std::move(path)};
  netns.netns.inode = inode;
  netns.netns.is_host = is_host;
  return netns;
}

// A healthy enrolled pod: rules, policy routing and one pod IP per family.
inline NetnsSnapshot HealthyPod(std::string path, uint64_t inode, Backend backend,
                                const AmbientVariant& variant, std::string ipv4,
                                std::string ipv6 = "") {
  NetnsSnapshot netns = EmptyNetns(std::move(path), inode);
  Materialise(netns.netfilter, backend,
              istio::BuildInpodRuleset(istio::RulesetBackendFor(backend), variant, DefaultSnat()));
  AddPolicyRouting(netns.routing, variant);
  netns.routing.addresses.push_back({"lo", Family::kIpv4, "127.0.0.1", 8, false});
  netns.routing.addresses.push_back({"eth0", Family::kIpv4, std::move(ipv4), 24, true});
  if (!ipv6.empty()) {
    netns.routing.addresses.push_back({"eth0", Family::kIpv6, std::move(ipv6), 64, true});
  }
  return netns;
}

// Host netns with the probe-SNAT rules and the probe sets holding `members`.
inline NetnsSnapshot HealthyHost(Backend backend, bool ipv6,
                                 const std::vector<std::string>& v4_members,
                                 const std::vector<std::string>& v6_members = {}) {
  NetnsSnapshot host = EmptyNetns("/proc/1/ns/net", 4026531840, true);
  const istio::RulesetBackend ruleset = istio::RulesetBackendFor(backend);
  std::vector<Family> families = {Family::kIpv4};
  if (ipv6) families.push_back(Family::kIpv6);
  for (Family family : families) {
    istio::ExpectedRuleset rules = istio::BuildHostRuleset(ruleset, family, DefaultSnat());
    for (istio::ExpectedChain& chain : rules.chains) {
      for (istio::ExpectedRule& rule : chain.rules) {
        for (Match& match : rule.rule.sem.matches) {
          if (match.kind == MatchKind::kSocketUid) match.value = 1000;  // kubelet
        }
      }
    }
    Materialise(host.netfilter, backend, rules);
  }
  if (backend == Backend::kNft) {
    Table& table =
        FindOrAddTable(host.netfilter.tables, Backend::kNft, Family::kInet, istio::kNftHostTable);
    table.sets.push_back({"istio-inpod-probes-v4", "ipv4_addr", "", v4_members});
    if (ipv6) table.sets.push_back({"istio-inpod-probes-v6", "ipv6_addr", "", v6_members});
  } else {
    host.netfilter.ipsets.push_back(
        {"istio-inpod-probes-v4", "hash:ip", Family::kIpv4, v4_members});
    if (ipv6) {
      host.netfilter.ipsets.push_back(
          {"istio-inpod-probes-v6", "hash:ip", Family::kIpv6, v6_members});
    }
  }
  return host;
}

// One ZDS connection as the node sources see it: istio-cni (`cni_pid`) listens on the socket and
// holds the accepted end of ztunnel's (`ztunnel_pid`) client.
inline void AddZdsConnection(NodeSnapshot& node, int cni_pid, int ztunnel_pid) {
  node.zds_collected = true;
  node.zds.path = "/var/run/ztunnel/ztunnel.sock";
  node.zds.listener_found = true;
  node.zds.listener.inode = 5000;
  node.zds.listener.type = 5;    // SOCK_SEQPACKET
  node.zds.listener.state = 10;  // LISTEN
  node.zds.listener.path = node.zds.path;
  node.zds.listener.owner_pids = {cni_pid};
  UnixSocket accepted;
  accepted.inode = 5001;
  accepted.peer_inode = 5002;
  accepted.owner_pids = {cni_pid};
  node.zds.accepted = {accepted};
  UnixSocket client;
  client.inode = 5002;
  client.peer_inode = 5001;
  client.owner_pids = {ztunnel_pid};
  node.zds.clients = {client};
}

// A process of the fd inventory holding `netns_fds`, named after its role.
inline ProcessNetnsFds ProcessWithNetnsFds(int pid, ProcessRole role,
                                           std::vector<uint64_t> netns_fds, uint64_t own_netns,
                                           int64_t start_time_unix_ms = 0) {
  ProcessNetnsFds process;
  process.pid = pid;
  process.comm = role == ProcessRole::kZtunnel ? "ztunnel" : "istio-cni";
  process.role = role;
  process.own_netns_inode = own_netns;
  process.netns_fd_inodes = std::move(netns_fds);
  process.start_time_unix_ms = start_time_unix_ms;
  return process;
}

// A CRI pod sandbox of namespace demo.
inline PodIdentity CriPod(std::string uid, std::string name, uint64_t netns_inode,
                          std::vector<std::string> ips = {}) {
  PodIdentity pod;
  pod.uid = std::move(uid);
  pod.name = std::move(name);
  pod.namespace_name = "demo";
  pod.netns_inode = netns_inode;
  pod.ips = std::move(ips);
  return pod;
}

inline std::vector<std::string> Codes(const NodeAnalysis& analysis) {
  std::vector<std::string> codes;
  for (const Finding& finding : analysis.findings)
    codes.push_back(std::string(finding.code_name()));
  return codes;
}

inline std::string Dump(const NodeAnalysis& analysis) {
  std::string text;
  for (const Finding& finding : analysis.findings) {
    text +=
        std::string(finding.code_name()) + " " + finding.netns_path + ": " + finding.summary + "\n";
    for (const std::string& line : finding.evidence) text += "    " + line + "\n";
  }
  return text;
}

}  // namespace ad::test
