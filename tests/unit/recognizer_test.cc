// Classify and the expected rule sets on hand-built netns snapshots.
#include "analysis/recognizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/istio_ruleset.h"
#include "analysis_fixtures.h"

namespace ad {
namespace {

const AmbientVariant kDefault{true, false, {}, false};

std::vector<std::string> RuleIds(const istio::ExpectedChain* chain) {
  std::vector<std::string> ids;
  if (chain == nullptr) return ids;
  for (const istio::ExpectedRule& rule : chain->rules) ids.push_back(rule.id);
  return ids;
}

TEST(IstioRuleset, IptablesDefaultLayout) {
  const istio::ExpectedRuleset rules = istio::BuildInpodRuleset(
      istio::RulesetBackend::kIptables, Family::kIpv4, kDefault, test::DefaultSnat());
  // mangle, nat, raw x (PREROUTING, OUTPUT, ISTIO_PRERT, ISTIO_OUTPUT)
  EXPECT_EQ(rules.chains.size(), 12u);
  EXPECT_EQ(RuleIds(rules.Find(Family::kIpv4, "nat", "ISTIO_OUTPUT")),
            (std::vector<std::string>{"N6/v4", "N8", "N9/v4", "N10", "N11/v4", "N12/v4"}));
  EXPECT_EQ(RuleIds(rules.Find(Family::kIpv4, "nat", "ISTIO_PRERT")),
            (std::vector<std::string>{"N5/v4", "N7/v4"}));
  const istio::ExpectedChain* jump = rules.Find(Family::kIpv4, "raw", "OUTPUT");
  ASSERT_NE(jump, nullptr);
  EXPECT_FALSE(jump->owned);
  EXPECT_EQ(jump->rules.at(0).rule.sem.action.text, "ISTIO_OUTPUT");
}

TEST(IstioRuleset, IngressKeepsEmptyPreroutingChainAndNoRaw) {
  const AmbientVariant ingress{false, true, {}, false};
  const istio::ExpectedRuleset rules = istio::BuildInpodRuleset(
      istio::RulesetBackend::kIptables, Family::kIpv4, ingress, test::DefaultSnat());
  const istio::ExpectedChain* prerouting = rules.Find(Family::kIpv4, "nat", "ISTIO_PRERT");
  ASSERT_NE(prerouting, nullptr);
  EXPECT_TRUE(prerouting->rules.empty());
  EXPECT_EQ(rules.Find(Family::kIpv4, "raw", "ISTIO_OUTPUT"), nullptr);
}

TEST(IstioRuleset, NftIpv6TwinsFollowTheirIpv4Rule) {
  const AmbientVariant v6{true, false, {"eth1"}, true};
  const istio::ExpectedRuleset rules =
      istio::BuildInpodRuleset(istio::RulesetBackend::kNft, v6, test::DefaultSnat());
  EXPECT_EQ(RuleIds(rules.Find(Family::kInet, "istio-ambient-nat", "istio-prerouting")),
            (std::vector<std::string>{"N3:eth1", "N4:eth1", "N5/v4", "N5/v6", "N7/v4", "N7/v6"}));
  const istio::ExpectedChain* base = rules.Find(Family::kInet, "istio-ambient-mangle", "output");
  ASSERT_NE(base, nullptr);
  EXPECT_TRUE(base->is_base);
  EXPECT_EQ(base->type, "route");
  EXPECT_EQ(base->priority, -150);
}

TEST(IstioRuleset, PolicyRouting) {
  const auto v4 = istio::BuildPolicyRouting(kDefault, false);
  ASSERT_EQ(v4.rules.size(), 1u);
  EXPECT_EQ(v4.rules[0].fwmark, 0x111u);
  EXPECT_EQ(v4.rules[0].fwmask, 0xfffu);
  EXPECT_EQ(v4.rules[0].table, 100u);
  EXPECT_EQ(v4.rules[0].priority, 32764u);
  ASSERT_EQ(v4.routes.size(), 1u);
  EXPECT_EQ(v4.routes[0].dst, "0.0.0.0/0");
  EXPECT_EQ(v4.routes[0].dev, "lo");
  AmbientVariant v6 = kDefault;
  v6.ipv6 = true;
  EXPECT_EQ(istio::BuildPolicyRouting(v6, false).routes.size(), 2u);
  EXPECT_EQ(istio::BuildPolicyRouting(v6, true).routes.size(), 1u);
}

TEST(IstioRuleset, HostRuleKubeletUidIsWildcard) {
  const istio::ExpectedRuleset host =
      istio::BuildHostRuleset(istio::RulesetBackend::kNft, Family::kIpv4, test::DefaultSnat());
  ASSERT_EQ(host.chains.size(), 1u);
  RuleSemantics observed = host.chains[0].rules[0].rule.sem;
  for (Match& match : observed.matches) {
    if (match.kind == MatchKind::kSocketUid) match.value = 1000;
  }
  EXPECT_TRUE(istio::SemanticsMatch(observed, host.chains[0].rules[0].rule.sem));
  observed.action.text = "10.0.0.1";
  EXPECT_FALSE(istio::SemanticsMatch(observed, host.chains[0].rules[0].rule.sem));
}

TEST(Recognizer, VariantsAreRecognised) {
  for (Backend backend : {Backend::kIptablesLegacy, Backend::kIptablesNft, Backend::kNft}) {
    for (const AmbientVariant& variant : {kDefault, AmbientVariant{false, true, {}, false},
                                          AmbientVariant{false, false, {"a", "b"}, true},
                                          AmbientVariant{true, true, {"x"}, true}}) {
      const NetnsSnapshot pod =
          test::HealthyPod("/run/netns/p", 5, backend, variant, "10.0.0.5", "fd00::5");
      const NetnsClassification c = Classify(pod);
      EXPECT_EQ(c.mode, DataplaneMode::kAmbient);
      EXPECT_EQ(c.ambient_backends, std::set<Backend>{backend});
      ASSERT_TRUE(c.variant.has_value());
      EXPECT_EQ(*c.variant, variant) << c.variant->Describe();
      EXPECT_TRUE(c.families.contains(Family::kIpv4));
      EXPECT_EQ(c.families.contains(Family::kIpv6), variant.ipv6 || backend == Backend::kNft);
      EXPECT_FALSE(c.host_rules_present);
      EXPECT_EQ(c.netns_inode, 5u);
      EXPECT_EQ(c.netns_path, "/run/netns/p");
    }
  }
}

// The recognizer reuses one expected rule set per variant; it must equal a fresh build.
TEST(Recognizer, FitsOfOneVariantShareAnExpectedRulesetEqualToAFreshBuild) {
  const NetnsSnapshot a = test::HealthyPod("/run/netns/a", 5, Backend::kNft, kDefault, "10.0.0.5");
  const NetnsSnapshot b = test::HealthyPod("/run/netns/b", 6, Backend::kNft, kDefault, "10.0.0.6");
  const analysis::NetnsIstioState first = analysis::Recognize(a, AnalysisOptions{});
  const analysis::NetnsIstioState second = analysis::Recognize(b, AnalysisOptions{});
  ASSERT_EQ(first.ambient.size(), 1u);
  ASSERT_EQ(second.ambient.size(), 1u);
  ASSERT_NE(first.ambient[0].expected, nullptr);
  EXPECT_EQ(first.ambient[0].expected.get(), second.ambient[0].expected.get());
  EXPECT_EQ(first.ambient[0].missing + first.ambient[0].unexpected, 0u);

  const istio::ExpectedRuleset fresh =
      istio::BuildInpodRuleset(istio::RulesetBackend::kNft, kDefault, test::DefaultSnat());
  const istio::ExpectedRuleset& shared = *first.ambient[0].expected;
  ASSERT_EQ(shared.chains.size(), fresh.chains.size());
  for (size_t c = 0; c < fresh.chains.size(); ++c) {
    EXPECT_EQ(shared.chains[c].chain, fresh.chains[c].chain);
    ASSERT_EQ(shared.chains[c].rules.size(), fresh.chains[c].rules.size());
    for (size_t r = 0; r < fresh.chains[c].rules.size(); ++r) {
      EXPECT_EQ(shared.chains[c].rules[r].id, fresh.chains[c].rules[r].id);
      EXPECT_EQ(shared.chains[c].rules[r].rule.sem, fresh.chains[c].rules[r].rule.sem);
    }
  }
}

// Readers canonicalize, but the recognizer must not depend on it: reversed matches still fit.
TEST(Recognizer, RulesWithMatchesOutOfCanonicalOrderStillFit) {
  NetnsSnapshot pod =
      test::HealthyPod("/run/netns/p", 5, Backend::kIptablesNft, kDefault, "10.0.0.5");
  for (Table& table : pod.netfilter.tables) {
    for (Chain& chain : table.chains) {
      for (Rule& rule : chain.rules) {
        std::reverse(rule.sem.matches.begin(), rule.sem.matches.end());
      }
    }
  }
  const analysis::NetnsIstioState state = analysis::Recognize(pod, AnalysisOptions{});
  ASSERT_EQ(state.ambient.size(), 1u);
  EXPECT_EQ(state.ambient[0].missing, 0u);
  EXPECT_EQ(state.ambient[0].unexpected, 0u);
  EXPECT_EQ(state.ambient[0].variant, kDefault);
}

// Interface names make the variant space open-ended; past the cache's bound every fit is still
// exact (in-use rule sets stay alive when the cache is cleared).
TEST(Recognizer, ManyInterfaceVariantsFitExactlyPastTheCacheBound) {
  std::vector<analysis::NetnsIstioState> states;
  for (int i = 0; i < 1100; ++i) {
    const AmbientVariant variant{true, false, {"vif" + std::to_string(i)}, false};
    states.push_back(
        analysis::Recognize(test::HealthyPod("/run/netns/p", 5, Backend::kNft, variant, "10.0.0.5"),
                            AnalysisOptions{}));
    ASSERT_EQ(states.back().ambient.size(), 1u);
    EXPECT_EQ(states.back().ambient[0].variant, variant);
    EXPECT_EQ(states.back().ambient[0].missing + states.back().ambient[0].unexpected, 0u);
  }
  const istio::ExpectedChain* first = states.front().ambient[0].expected->Find(
      Family::kInet, "istio-ambient-nat", "istio-prerouting");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->rules.front().id, "N3:vif0");
}

TEST(Recognizer, EmptyNetnsIsNone) {
  const NetnsClassification c = Classify(test::EmptyNetns("/run/netns/x", 9));
  EXPECT_EQ(c.mode, DataplaneMode::kNone);
  EXPECT_FALSE(c.variant.has_value());
}

NetnsSnapshot IptablesSidecar(Backend backend) {
  NetnsSnapshot netns = test::EmptyNetns("/run/netns/sc", 8);
  Table& nat = test::FindOrAddTable(netns.netfilter.tables, backend, Family::kIpv4, "nat");
  Rule jump_output;
  jump_output.sem.action = Action{ActionKind::kJump, 0, 0, 0, "ISTIO_OUTPUT"};
  test::FindOrAddChain(nat, "OUTPUT").rules.push_back(jump_output);
  Rule uid_return;
  uid_return.sem.matches = {Match{MatchKind::kSocketUid, false, 1337, 0, ""}};
  uid_return.sem.action.kind = ActionKind::kReturn;
  test::FindOrAddChain(nat, "ISTIO_OUTPUT").rules.push_back(uid_return);
  test::FindOrAddChain(nat, "ISTIO_INBOUND");
  return netns;
}

TEST(Recognizer, SidecarIptablesIsNotAmbientDespiteIstioOutput) {
  const NetnsClassification c = Classify(IptablesSidecar(Backend::kIptablesLegacy));
  EXPECT_EQ(c.mode, DataplaneMode::kSidecar);
  EXPECT_TRUE(c.ambient_backends.empty());
  EXPECT_EQ(c.sidecar_backends, std::set<Backend>{Backend::kIptablesLegacy});
}

TEST(Recognizer, AmbientOutputWithoutPreroutingIsStillAmbient) {
  NetnsSnapshot pod =
      test::HealthyPod("/run/netns/p", 5, Backend::kIptablesNft, kDefault, "10.0.0.5");
  for (Table& table : pod.netfilter.tables) {
    std::erase_if(table.chains, [](const Chain& chain) { return chain.name == "ISTIO_PRERT"; });
    for (Chain& chain : table.chains) {
      std::erase_if(chain.rules, [](const Rule& rule) {
        return rule.sem.action.kind == ActionKind::kJump && rule.sem.action.text == "ISTIO_PRERT";
      });
    }
  }
  const NetnsClassification c = Classify(pod);
  EXPECT_EQ(c.mode, DataplaneMode::kAmbient);
}

TEST(Recognizer, SidecarPlusAmbientIsConflict) {
  NetnsSnapshot pod = test::HealthyPod("/run/netns/p", 5, Backend::kNft, kDefault, "10.0.0.5");
  for (Table& table : IptablesSidecar(Backend::kIptablesNft).netfilter.tables) {
    pod.netfilter.tables.push_back(table);
  }
  const NetnsClassification c = Classify(pod);
  EXPECT_EQ(c.mode, DataplaneMode::kConflict);
  EXPECT_EQ(c.sidecar_backends, std::set<Backend>{Backend::kIptablesNft});
}

TEST(Recognizer, NftHostTableIsHostStateNotAmbient) {
  const NetnsSnapshot host = test::HealthyHost(Backend::kNft, true, {}, {});
  const NetnsClassification c = Classify(host);
  EXPECT_TRUE(c.is_host);
  EXPECT_EQ(c.mode, DataplaneMode::kNone);
  EXPECT_TRUE(c.host_rules_present);
  EXPECT_EQ(c.host_backends, std::set<Backend>{Backend::kNft});
}

TEST(Recognizer, IptablesHostRules) {
  const NetnsClassification c = Classify(test::HealthyHost(Backend::kIptablesLegacy, false, {}));
  EXPECT_EQ(c.mode, DataplaneMode::kNone);
  EXPECT_EQ(c.host_backends, std::set<Backend>{Backend::kIptablesLegacy});
}

TEST(Recognizer, ProbeSnatAddressFromOptions) {
  AnalysisOptions options;
  options.probe_snat_v4 = {"169.254.99.1"};
  istio::ProbeSnat snat;
  snat.v4 = "169.254.99.1";
  NetnsSnapshot pod = test::EmptyNetns("/run/netns/p", 5);
  test::Materialise(pod.netfilter, Backend::kNft,
                    istio::BuildInpodRuleset(istio::RulesetBackend::kNft, kDefault, snat));
  EXPECT_EQ(Classify(pod, options).variant, kDefault);
  test::AddPolicyRouting(pod.routing, kDefault);
  NodeSnapshot node;
  node.netns.push_back(pod);
  EXPECT_TRUE(Analyze(node, options).findings.empty());
  // With the default options the probe-accept rules look foreign: the pod is incomplete.
  EXPECT_FALSE(Analyze(node).findings.empty());
}

TEST(Recognizer, DescribeVariant) {
  EXPECT_EQ((AmbientVariant{true, false, {}, true}).Describe(), "dns,ipv6");
  EXPECT_EQ((AmbientVariant{false, true, {"eth1", "eth2"}, false}).Describe(),
            "ingress,vif=eth1+eth2");
  EXPECT_EQ(AmbientVariant{}.Describe(), "base");
  EXPECT_EQ(DataplaneModeName(DataplaneMode::kConflict), "conflict");
  EXPECT_EQ(SeverityName(Severity::kCritical), "critical");
}

}  // namespace
}  // namespace ad
