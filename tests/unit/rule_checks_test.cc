// Analyze on hand-built snapshots: each lab fault yields exactly its finding; healthy nodes none.
#include <gtest/gtest.h>

#include <set>

#include "analysis/analysis.h"
#include "analysis/istio_ruleset.h"
#include "analysis_fixtures.h"

namespace ad {
namespace {

using test::Codes;
using test::Dump;

const AmbientVariant kDefault{true, false, {}, false};
const AmbientVariant kDefaultV6{true, false, {}, true};

std::vector<AmbientVariant> AllVariants() {
  std::vector<AmbientVariant> variants;
  for (bool dns : {true, false}) {
    for (bool ingress : {false, true}) {
      for (bool ipv6 : {false, true}) {
        for (bool vif : {false, true}) {
          AmbientVariant variant{dns, ingress, {}, ipv6};
          if (vif) variant.virtual_interfaces = {"fake1s0f0", "fake1s0f1"};
          variants.push_back(variant);
        }
      }
    }
  }
  return variants;
}

constexpr Backend kBackends[] = {Backend::kIptablesLegacy, Backend::kIptablesNft, Backend::kNft};

NodeSnapshot NodeWith(Backend backend, const AmbientVariant& variant) {
  NodeSnapshot node;
  node.netns.push_back(test::HealthyHost(backend, variant.ipv6, {"10.244.0.5"}, {"fd00::5"}));
  node.netns.push_back(test::HealthyPod("/run/netns/pod-a", 4026532001, backend, variant,
                                        "10.244.0.5", variant.ipv6 ? "fd00::5" : ""));
  return node;
}

NetnsSnapshot& Pod(NodeSnapshot& node) { return node.netns[1]; }

TEST(RuleChecks, HealthyNodesHaveNoFindings) {
  for (Backend backend : kBackends) {
    for (const AmbientVariant& variant : AllVariants()) {
      const NodeAnalysis analysis = Analyze(NodeWith(backend, variant));
      EXPECT_TRUE(analysis.findings.empty())
          << BackendName(backend) << " " << variant.Describe() << "\n"
          << Dump(analysis);
      ASSERT_EQ(analysis.netns.size(), 2u);
      EXPECT_EQ(analysis.netns[1].mode, DataplaneMode::kAmbient);
      EXPECT_EQ(analysis.netns[1].variant, variant) << analysis.netns[1].variant->Describe();
      EXPECT_TRUE(analysis.netns[0].host_rules_present);
      EXPECT_EQ(analysis.netns[0].mode, DataplaneMode::kNone);
    }
  }
}

TEST(RuleChecks, EveryDeletedRuleGivesOnlyIncompleteRuleset) {
  for (Backend backend : kBackends) {
    for (const AmbientVariant& variant : AllVariants()) {
      const NodeSnapshot healthy = NodeWith(backend, variant);
      const NetnsSnapshot& pod = healthy.netns[1];
      for (size_t t = 0; t < pod.netfilter.tables.size(); ++t) {
        for (size_t c = 0; c < pod.netfilter.tables[t].chains.size(); ++c) {
          for (size_t r = 0; r < pod.netfilter.tables[t].chains[c].rules.size(); ++r) {
            NodeSnapshot broken = healthy;
            auto& rules = Pod(broken).netfilter.tables[t].chains[c].rules;
            const std::string what = pod.netfilter.tables[t].name + " " +
                                     pod.netfilter.tables[t].chains[c].name + " #" +
                                     std::to_string(r);
            rules.erase(rules.begin() + static_cast<std::ptrdiff_t>(r));
            const NodeAnalysis analysis = Analyze(broken);
            EXPECT_EQ(Codes(analysis), std::vector<std::string>{"INCOMPLETE_RULESET"})
                << BackendName(backend) << " " << variant.Describe() << " deleted " << what << "\n"
                << Dump(analysis);
          }
        }
      }
    }
  }
}

TEST(RuleChecks, MissingPolicyRouteGivesOnlyIncompleteRuleset) {
  for (Backend backend : kBackends) {
    for (const AmbientVariant& variant : {kDefault, kDefaultV6}) {
      const NodeSnapshot healthy = NodeWith(backend, variant);
      const size_t rules = healthy.netns[1].routing.rules.size();
      for (size_t i = 0; i < rules; ++i) {
        NodeSnapshot broken = healthy;
        Pod(broken).routing.rules.erase(Pod(broken).routing.rules.begin() +
                                        static_cast<std::ptrdiff_t>(i));
        EXPECT_EQ(Codes(Analyze(broken)), std::vector<std::string>{"INCOMPLETE_RULESET"});
        broken = healthy;
        Pod(broken).routing.routes.erase(Pod(broken).routing.routes.begin() +
                                         static_cast<std::ptrdiff_t>(i));
        const NodeAnalysis analysis = Analyze(broken);
        ASSERT_EQ(Codes(analysis), std::vector<std::string>{"INCOMPLETE_RULESET"});
        EXPECT_NE(analysis.findings[0].evidence[0].find("table 100"), std::string::npos);
      }
    }
  }
}

TEST(RuleChecks, Ipv6RouteNotRequiredWhenIpv6Disabled) {
  NodeSnapshot node = NodeWith(Backend::kNft, kDefaultV6);
  Pod(node).routing.ipv6_disabled = true;
  std::erase_if(Pod(node).routing.rules,
                [](const PolicyRule& r) { return r.family == Family::kIpv6; });
  std::erase_if(Pod(node).routing.routes,
                [](const RouteEntry& r) { return r.family == Family::kIpv6; });
  EXPECT_TRUE(Analyze(node).findings.empty()) << Dump(Analyze(node));
}

TEST(RuleChecks, ReorderedRulesGiveIncompleteRuleset) {
  NodeSnapshot node = NodeWith(Backend::kIptablesNft, kDefault);
  Table& nat =
      test::FindOrAddTable(Pod(node).netfilter.tables, Backend::kIptablesNft, Family::kIpv4, "nat");
  Chain& output = test::FindOrAddChain(nat, "ISTIO_OUTPUT");
  std::swap(output.rules.front(), output.rules.back());
  const NodeAnalysis analysis = Analyze(node);
  ASSERT_EQ(Codes(analysis), std::vector<std::string>{"INCOMPLETE_RULESET"}) << Dump(analysis);
  EXPECT_NE(analysis.findings[0].evidence[0].find("out of order"), std::string::npos);
}

TEST(RuleChecks, DuplicateJumpGivesOnlyDuplicateRule) {
  for (Backend backend : kBackends) {
    NodeSnapshot node = NodeWith(backend, kDefaultV6);
    const bool nft = backend == Backend::kNft;
    Table& nat = test::FindOrAddTable(Pod(node).netfilter.tables, backend,
                                      nft ? Family::kInet : Family::kIpv4,
                                      nft ? "istio-ambient-nat" : "nat");
    Chain& output = test::FindOrAddChain(nat, nft ? "output" : "OUTPUT");
    output.rules.push_back(output.rules.front());
    const NodeAnalysis analysis = Analyze(node);
    ASSERT_EQ(Codes(analysis), std::vector<std::string>{"DUPLICATE_RULE"}) << Dump(analysis);
    const Finding& finding = analysis.findings[0];
    EXPECT_EQ(finding.severity, Severity::kWarning);
    EXPECT_EQ(finding.netns_path, "/run/netns/pod-a");
    EXPECT_EQ(finding.netns_inode, 4026532001u);
    ASSERT_EQ(finding.evidence.size(), 1u);
    const std::string prefix = nft ? "nft inet istio-ambient-nat output: "
                                   : std::string(BackendName(backend)) + " ipv4 nat OUTPUT: ";
    EXPECT_EQ(finding.evidence[0].rfind(prefix, 0), 0u) << finding.evidence[0];
    EXPECT_FALSE(finding.hint.empty());
  }
}

TEST(RuleChecks, DuplicateRuleInsideIstioChain) {
  NodeSnapshot node = NodeWith(Backend::kIptablesLegacy, kDefault);
  Table& nat = test::FindOrAddTable(Pod(node).netfilter.tables, Backend::kIptablesLegacy,
                                    Family::kIpv4, "nat");
  Chain& output = test::FindOrAddChain(nat, "ISTIO_OUTPUT");
  output.rules.insert(output.rules.begin() + 2, output.rules[1]);
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(Codes(analysis), std::vector<std::string>{"DUPLICATE_RULE"}) << Dump(analysis);
}

TEST(RuleChecks, FlippedBackendGivesOnlyMixedBackend) {
  for (const AmbientVariant& variant : {kDefault, kDefaultV6}) {
    NodeSnapshot node;
    node.netns.push_back(test::HealthyHost(Backend::kIptablesLegacy, variant.ipv6,
                                           {"10.244.0.5", "10.244.0.6"}, {"fd00::5"}));
    NetnsSnapshot flipped = test::HealthyPod("/run/netns/pod-a", 4026532001, Backend::kIptablesNft,
                                             variant, "10.244.0.5", variant.ipv6 ? "fd00::5" : "");
    test::Materialise(
        flipped.netfilter, Backend::kIptablesLegacy,
        istio::BuildInpodRuleset(istio::RulesetBackend::kIptables, variant, test::DefaultSnat()));
    node.netns.push_back(flipped);
    node.netns.push_back(test::HealthyPod("/run/netns/pod-b", 4026532002, Backend::kIptablesLegacy,
                                          variant, "10.244.0.6"));
    const NodeAnalysis analysis = Analyze(node);
    ASSERT_EQ(Codes(analysis), std::vector<std::string>{"MIXED_BACKEND"}) << Dump(analysis);
    EXPECT_EQ(analysis.findings[0].severity, Severity::kCritical);
    EXPECT_EQ(analysis.findings[0].evidence.size(), 2u);
    EXPECT_EQ(analysis.netns[1].ambient_backends,
              (std::set<Backend>{Backend::kIptablesLegacy, Backend::kIptablesNft}));
  }
}

TEST(RuleChecks, NftPlusIptablesIsMixedBackend) {
  NodeSnapshot node = NodeWith(Backend::kNft, kDefault);
  test::Materialise(
      Pod(node).netfilter, Backend::kIptablesNft,
      istio::BuildInpodRuleset(istio::RulesetBackend::kIptables, kDefault, test::DefaultSnat()));
  EXPECT_EQ(Codes(Analyze(node)), std::vector<std::string>{"MIXED_BACKEND"});
}

NetfilterState SidecarNftTables() {
  NetfilterState netfilter;
  Table table;
  table.backend = Backend::kNft;
  table.family = Family::kInet;
  table.name = "istio-proxy-nat";
  Chain output{"output", true, "output", -100, "nat", "accept", {}};
  Rule jump;
  jump.sem.action = Action{ActionKind::kJump, 0, 0, 0, "istio-output"};
  output.rules.push_back(jump);
  Chain istio_output;
  istio_output.name = "istio-output";
  Rule uid_return;
  uid_return.sem.matches = {Match{MatchKind::kSocketUid, false, 1337, 0, ""}};
  uid_return.sem.action.kind = ActionKind::kReturn;
  istio_output.rules.push_back(uid_return);
  Chain redirect;
  redirect.name = "istio-redirect";
  Rule to_envoy;
  to_envoy.sem.matches = {Match{MatchKind::kProtocol, false, 6, 0, ""}};
  to_envoy.sem.action = Action{ActionKind::kRedirect, 15001, 15001, 0, ""};
  redirect.rules.push_back(to_envoy);
  table.chains = {output, istio_output, redirect};
  netfilter.tables.push_back(table);
  return netfilter;
}

TEST(RuleChecks, SidecarTablesInAmbientPodGiveOnlyDataplaneConflict) {
  for (Backend backend : kBackends) {
    NodeSnapshot node = NodeWith(backend, kDefault);
    for (Table& table : SidecarNftTables().tables) Pod(node).netfilter.tables.push_back(table);
    const NodeAnalysis analysis = Analyze(node);
    EXPECT_EQ(Codes(analysis), std::vector<std::string>{"DATAPLANE_CONFLICT"}) << Dump(analysis);
    EXPECT_EQ(analysis.netns[1].mode, DataplaneMode::kConflict);
  }
}

TEST(RuleChecks, HostEnrolledGivesOnlyHostNetnsEnrolled) {
  for (Backend backend : kBackends) {
    NodeSnapshot node = NodeWith(backend, kDefault);
    NetnsSnapshot& host = node.netns[0];
    // Istio's nft pod table shares its name with the host table: add the pod chains beside it.
    test::Materialise(
        host.netfilter, backend,
        istio::BuildInpodRuleset(istio::RulesetBackendFor(backend), kDefault, test::DefaultSnat()));
    const NodeAnalysis analysis = Analyze(node);
    ASSERT_EQ(Codes(analysis), std::vector<std::string>{"HOST_NETNS_ENROLLED"}) << Dump(analysis);
    EXPECT_EQ(analysis.findings[0].netns_path, "/proc/1/ns/net");
    EXPECT_EQ(analysis.findings[0].severity, Severity::kCritical);
  }
}

TEST(RuleChecks, HostEnrolledWithoutOtherPods) {
  NodeSnapshot node;
  NetnsSnapshot host = test::EmptyNetns("/proc/1/ns/net", 1, true);
  test::Materialise(
      host.netfilter, Backend::kIptablesNft,
      istio::BuildInpodRuleset(istio::RulesetBackend::kIptables, kDefault, test::DefaultSnat()));
  node.netns.push_back(host);
  EXPECT_EQ(Codes(Analyze(node)), std::vector<std::string>{"HOST_NETNS_ENROLLED"});
}

TEST(RuleChecks, PodOnOtherBackendThanHostDrifts) {
  NodeSnapshot node = NodeWith(Backend::kIptablesNft, kDefault);
  node.netns.push_back(
      test::HealthyPod("/run/netns/pod-b", 4026532002, Backend::kNft, kDefault, "10.244.0.5"));
  const NodeAnalysis analysis = Analyze(node);
  ASSERT_EQ(Codes(analysis), std::vector<std::string>{"BACKEND_DRIFT"}) << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].netns_path, "/run/netns/pod-b");
}

TEST(RuleChecks, DriftAgainstMajorityWhenHostHasNoRules) {
  NodeSnapshot node;
  node.netns.push_back(test::EmptyNetns("/proc/1/ns/net", 1, true));
  node.netns.push_back(
      test::HealthyPod("/run/netns/a", 11, Backend::kIptablesLegacy, kDefault, "10.0.0.1"));
  node.netns.push_back(
      test::HealthyPod("/run/netns/b", 12, Backend::kIptablesLegacy, kDefault, "10.0.0.2"));
  node.netns.push_back(
      test::HealthyPod("/run/netns/c", 13, Backend::kIptablesNft, kDefault, "10.0.0.3"));
  const NodeAnalysis analysis = Analyze(node);
  int drift = 0;
  for (const Finding& finding : analysis.findings) {
    if (finding.code_name() == "BACKEND_DRIFT") {
      ++drift;
      EXPECT_EQ(finding.netns_path, "/run/netns/c");
    } else {
      EXPECT_EQ(std::string(finding.code_name()), "PROBE_SNAT_MISSING");
      EXPECT_EQ(finding.netns_path, "/proc/1/ns/net");
    }
  }
  EXPECT_EQ(drift, 1) << Dump(analysis);
}

TEST(RuleChecks, ProbeSnatHostRuleMissing) {
  for (Backend backend : kBackends) {
    NodeSnapshot node = NodeWith(backend, kDefault);
    NetnsSnapshot& host = node.netns[0];
    for (Table& table : host.netfilter.tables) {
      for (Chain& chain : table.chains) {
        if (chain.name == "ISTIO_POSTRT" || chain.name == "postrouting") chain.rules.clear();
      }
    }
    const NodeAnalysis analysis = Analyze(node);
    ASSERT_EQ(Codes(analysis), std::vector<std::string>{"PROBE_SNAT_MISSING"}) << Dump(analysis);
    EXPECT_EQ(analysis.findings[0].netns_path, "/proc/1/ns/net");
  }
}

TEST(RuleChecks, ProbeSnatNoHostRulesAtAll) {
  NodeSnapshot node = NodeWith(Backend::kIptablesLegacy, kDefault);
  node.netns[0].netfilter.tables.clear();
  const NodeAnalysis analysis = Analyze(node);
  ASSERT_EQ(Codes(analysis), std::vector<std::string>{"PROBE_SNAT_MISSING"}) << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].netns_path, "/proc/1/ns/net");
}

TEST(RuleChecks, ProbeSetMissing) {
  NodeSnapshot node = NodeWith(Backend::kIptablesNft, kDefault);
  node.netns[0].netfilter.ipsets.clear();
  const NodeAnalysis analysis = Analyze(node);
  ASSERT_EQ(Codes(analysis), std::vector<std::string>{"PROBE_SNAT_MISSING"}) << Dump(analysis);
  EXPECT_NE(analysis.findings[0].summary.find("istio-inpod-probes-v4"), std::string::npos);
}

TEST(RuleChecks, PodIpNotInProbeSet) {
  for (Backend backend : kBackends) {
    NodeSnapshot node;
    node.netns.push_back(test::HealthyHost(backend, true, {"10.244.0.5"}, {}));
    node.netns.push_back(test::HealthyPod("/run/netns/pod-a", 4026532001, backend, kDefaultV6,
                                          "10.244.0.5", "fd00::5"));
    node.netns.push_back(test::HealthyPod("/run/netns/pod-b", 4026532002, backend, kDefaultV6,
                                          "10.244.0.6", "fd00::6"));
    const NodeAnalysis analysis = Analyze(node);
    // One finding per pod, one evidence line per missing address.
    ASSERT_EQ(Codes(analysis),
              (std::vector<std::string>{"PROBE_SNAT_MISSING", "PROBE_SNAT_MISSING"}))
        << Dump(analysis);
    EXPECT_EQ(analysis.findings[0].netns_path, "/run/netns/pod-a");  // fd00::5
    EXPECT_EQ(analysis.findings[0].evidence.size(), 1u);
    EXPECT_EQ(analysis.findings[1].netns_path, "/run/netns/pod-b");  // both addresses
    EXPECT_EQ(analysis.findings[1].evidence.size(), 2u);
  }
}

TEST(RuleChecks, NoEnrolledPodsNoProbeChecks) {
  NodeSnapshot node;
  node.netns.push_back(test::EmptyNetns("/proc/1/ns/net", 1, true));
  node.netns.push_back(test::EmptyNetns("/run/netns/plain", 2));
  EXPECT_TRUE(Analyze(node).findings.empty());
}

TEST(RuleChecks, NonIstioRulesAreIgnored) {
  NodeSnapshot node = NodeWith(Backend::kIptablesNft, kDefault);
  for (NetnsSnapshot& netns : node.netns) {
    Table& filter = test::FindOrAddTable(netns.netfilter.tables, Backend::kIptablesNft,
                                         Family::kIpv4, "filter");
    Chain& forward = test::FindOrAddChain(filter, "FORWARD");
    Rule accept;
    accept.sem.action.kind = ActionKind::kAccept;
    forward.rules = {accept, accept};  // a CNI's own duplicate is not ours to report
    Table& nat =
        test::FindOrAddTable(netns.netfilter.tables, Backend::kIptablesNft, Family::kIpv4, "nat");
    Chain& prerouting = test::FindOrAddChain(nat, "PREROUTING");
    Rule kube;
    kube.sem.action = Action{ActionKind::kJump, 0, 0, 0, "KUBE-SERVICES"};
    prerouting.rules.insert(prerouting.rules.begin(), {kube, kube});
    Table cni;
    cni.backend = Backend::kNft;
    cni.family = Family::kIpv4;
    cni.name = "cilium";
    Chain cni_chain;
    cni_chain.name = "forward";
    cni_chain.rules = {accept, accept};
    cni.chains.push_back(cni_chain);
    netns.netfilter.tables.push_back(cni);
  }
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_TRUE(analysis.findings.empty()) << Dump(analysis);
}

TEST(RuleChecks, UnreadableNetns) {
  NodeSnapshot node = NodeWith(Backend::kNft, kDefault);
  NetnsSnapshot gone = test::EmptyNetns("/run/netns/gone", 77);
  gone.unreadable = true;
  gone.errors.push_back(
      {SourceKind::kNetns, "setns(/run/netns/gone): No such file or directory", 2});
  node.netns.push_back(gone);
  const NodeAnalysis analysis = Analyze(node);
  ASSERT_EQ(Codes(analysis), std::vector<std::string>{"NETNS_UNREADABLE"}) << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].netns_path, "/run/netns/gone");
  EXPECT_EQ(analysis.findings[0].netns_inode, 77u);
  ASSERT_EQ(analysis.findings[0].evidence.size(), 1u);
  EXPECT_NE(analysis.findings[0].evidence[0].find("No such file"), std::string::npos);
}

TEST(RuleChecks, PartiallyReadableNetnsNamesTheSource) {
  NodeSnapshot node = NodeWith(Backend::kNft, kDefault);
  Pod(node).errors.push_back({SourceKind::kLegacyIpv4, "getsockopt: Operation not permitted", 1});
  Pod(node).reads.legacy_v4 = ReadStatus::kFailed;
  const NodeAnalysis analysis = Analyze(node);
  ASSERT_EQ(Codes(analysis), std::vector<std::string>{"NETNS_UNREADABLE"}) << Dump(analysis);
  EXPECT_EQ(analysis.findings[0].severity, Severity::kWarning);
  EXPECT_NE(analysis.findings[0].summary.find("iptables-legacy/ipv4"), std::string::npos);
}

TEST(RuleChecks, FailedRouteSourceDoesNotClaimMissingRoutes) {
  NodeSnapshot node = NodeWith(Backend::kNft, kDefault);
  Pod(node).routing = {};
  Pod(node).routing.addresses.push_back({"eth0", Family::kIpv4, "10.244.0.5", 24, true});
  Pod(node).errors.push_back({SourceKind::kRoute, "netlink: Operation not permitted", 1});
  Pod(node).reads.routes = ReadStatus::kFailed;
  EXPECT_EQ(Codes(Analyze(node)), std::vector<std::string>{"NETNS_UNREADABLE"});
}

// A failed host read proves nothing missing: the host gets NETNS_UNREADABLE naming the read,
// never "probe set missing" or "no probe SNAT rule".
TEST(RuleChecks, FailedHostReadsGiveUnreadableNotProbeSnatMissing) {
  struct Case {
    const char* name;
    Backend backend;
    SourceKind source;
    ReadStatus NetnsReads::*read;
  };
  const Case cases[] = {
      {"ipset", Backend::kIptablesNft, SourceKind::kIpset, &NetnsReads::ipsets},
      {"nft sets", Backend::kNft, SourceKind::kNftables, &NetnsReads::nftables},
      {"nft rules", Backend::kIptablesNft, SourceKind::kNftables, &NetnsReads::nftables},
      {"legacy rules", Backend::kIptablesLegacy, SourceKind::kLegacyIpv4, &NetnsReads::legacy_v4},
  };
  for (const Case& c : cases) {
    NodeSnapshot node = NodeWith(c.backend, kDefault);
    NetnsSnapshot& host = node.netns[0];
    // What a failed read leaves behind: nothing from that reader.
    if (c.source == SourceKind::kIpset) host.netfilter.ipsets.clear();
    if (c.source == SourceKind::kNftables || c.source == SourceKind::kLegacyIpv4) {
      host.netfilter.tables.clear();
    }
    host.errors.push_back({c.source, "dump: Operation not permitted", 1});
    host.reads.*c.read = ReadStatus::kFailed;
    const NodeAnalysis analysis = Analyze(node);
    ASSERT_EQ(Codes(analysis), std::vector<std::string>{"NETNS_UNREADABLE"}) << c.name << "\n"
                                                                             << Dump(analysis);
    EXPECT_EQ(analysis.findings[0].netns_path, "/proc/1/ns/net") << c.name;
    EXPECT_EQ(analysis.findings[0].subject, SourceKindName(c.source)) << c.name;
  }
}

// Subjects are what identity is made of. Repeated rules: one finding per backend (a second
// repeated rule is more evidence, not a new finding).
TEST(RuleChecks, DuplicatesAreOneFindingPerBackend) {
  NodeSnapshot node = NodeWith(Backend::kIptablesNft, kDefault);
  Table* nat = nullptr;
  for (Table& table : Pod(node).netfilter.tables) {
    if (table.name == "nat" && table.family == Family::kIpv4) nat = &table;
  }
  ASSERT_NE(nat, nullptr);
  Chain* output = nullptr;
  for (Chain& chain : nat->chains) {
    if (chain.name == "ISTIO_OUTPUT") output = &chain;
  }
  ASSERT_NE(output, nullptr);
  ASSERT_FALSE(output->rules.empty());
  output->rules.push_back(output->rules.front());
  const NodeAnalysis one = Analyze(node);
  output->rules.push_back(output->rules[output->rules.size() - 2]);
  const NodeAnalysis two = Analyze(node);
  ASSERT_EQ(Codes(one), std::vector<std::string>{"DUPLICATE_RULE"}) << Dump(one);
  ASSERT_EQ(Codes(two), std::vector<std::string>{"DUPLICATE_RULE"}) << Dump(two);
  EXPECT_EQ(one.findings[0].subject, "iptables-nft");
  EXPECT_EQ(one.findings[0].evidence.size(), 1u);
  EXPECT_EQ(two.findings[0].evidence.size(), 2u);
  EXPECT_TRUE(DiffFindings(one.findings, two.findings).empty()) << "an update, not a new finding";
}

TEST(RuleChecks, FindingsSortedBySeverityPathCode) {
  NodeSnapshot node = NodeWith(Backend::kIptablesNft, kDefault);
  // pod-b: mixed (critical); pod-a: duplicate (warning); pod-c: unreadable (warning).
  NetnsSnapshot mixed =
      test::HealthyPod("/run/netns/pod-b", 2, Backend::kIptablesNft, kDefault, "10.244.0.5");
  test::Materialise(
      mixed.netfilter, Backend::kIptablesLegacy,
      istio::BuildInpodRuleset(istio::RulesetBackend::kIptables, kDefault, test::DefaultSnat()));
  node.netns.push_back(mixed);
  Table& nat =
      test::FindOrAddTable(Pod(node).netfilter.tables, Backend::kIptablesNft, Family::kIpv4, "nat");
  Chain& output = test::FindOrAddChain(nat, "OUTPUT");
  output.rules.push_back(output.rules.front());
  NetnsSnapshot gone = test::EmptyNetns("/run/netns/pod-c", 3);
  gone.unreadable = true;
  node.netns.insert(node.netns.begin(), gone);
  const NodeAnalysis analysis = Analyze(node);
  ASSERT_EQ(Codes(analysis),
            (std::vector<std::string>{"MIXED_BACKEND", "DUPLICATE_RULE", "NETNS_UNREADABLE"}))
      << Dump(analysis);
  EXPECT_EQ(analysis.findings[1].netns_path, "/run/netns/pod-a");
  ASSERT_EQ(analysis.netns.size(), node.netns.size());
  EXPECT_EQ(analysis.netns[0].netns_path, "/run/netns/pod-c");
}

// The one finding order (model/finding.h) that Analyze and the engine's merged findings share:
// severity first, then netns path, code (enum order) and subject; equal keys keep their order.
TEST(RuleChecks, SortFindingsOrdersBySeverityPathCodeSubject) {
  auto make = [](Severity severity, std::string path, FindingCode code, std::string subject,
                 std::string summary) {
    Finding f;
    f.severity = severity;
    f.netns_path = std::move(path);
    f.code = code;
    f.subject = std::move(subject);
    f.summary = std::move(summary);
    return f;
  };
  std::vector<Finding> findings = {
      make(Severity::kInfo, "/a", FindingCode::kZdsPending, "", "info"),
      make(Severity::kWarning, "/b", FindingCode::kDuplicateRule, "y", "warning b y"),
      make(Severity::kWarning, "/b", FindingCode::kDuplicateRule, "x", "warning b x"),
      make(Severity::kWarning, "/b", FindingCode::kIncompleteRuleset, "z", "warning b code"),
      make(Severity::kCritical, "/z", FindingCode::kZdsStall, "", "critical"),
      make(Severity::kWarning, "/a", FindingCode::kNetnsUnreadable, "", "warning a"),
      make(Severity::kWarning, "/b", FindingCode::kDuplicateRule, "x", "warning b x again"),
  };
  SortFindings(findings);
  std::vector<std::string> order;
  for (const Finding& f : findings) order.push_back(f.summary);
  EXPECT_EQ(order,
            (std::vector<std::string>{"critical", "warning a", "warning b code", "warning b x",
                                      "warning b x again", "warning b y", "info"}));
  EXPECT_TRUE(FindingBefore(findings[0], findings[1]));
  EXPECT_FALSE(FindingBefore(findings[3], findings[4]));  // equal keys: neither is before
}

TEST(RuleChecks, FindingCodeTable) {
  // Every enumerator has exactly one row, a name that parses back, a meaning and a hint.
  std::set<FindingCode> seen;
  std::set<std::string_view> names;
  for (const FindingCodeInfo& info : AllFindingCodes()) {
    EXPECT_TRUE(seen.insert(info.code).second) << info.name;
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_EQ(ParseFindingCode(info.name), info.code) << info.name;
    EXPECT_EQ(FindingCodeName(info.code), info.name);
    EXPECT_FALSE(info.meaning.empty()) << info.name;
    EXPECT_FALSE(info.hint.empty()) << info.name;
  }
  // Every enumerator before the kCount sentinel, so a code appended after the last one counts.
  EXPECT_EQ(seen.size(), kFindingCodeCount);
  EXPECT_EQ(AllFindingCodes().size(), kFindingCodeCount);
  EXPECT_EQ(FindingCodeDetails(FindingCode::kMixedBackend).severity, Severity::kCritical);
  EXPECT_EQ(ParseFindingCode("NOPE"), std::nullopt);
}

}  // namespace
}  // namespace ad
