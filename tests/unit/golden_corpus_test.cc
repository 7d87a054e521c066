// Istio's own golden rule files, parsed with our text parsers, through the recognizer and the
// checks: every ambient golden is a healthy pod of the right variant, the hostprobe goldens are
// host rules, and the sidecar goldens are sidecar mode.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "analysis_fixtures.h"
#include "shared_corpus.h"
#include "text/rule_text.h"

namespace ad {
namespace {

namespace fs = std::filesystem;

fs::path GoldenDir() { return corpus::CorpusPath("istio-golden"); }
fs::path ObservedDir() { return corpus::CorpusPath("netfilter-observed"); }

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// iptables goldens log "iptables-save"/"ip6tables-save" (the verify step) before, and in sidecar
// files also between, the restore inputs; in `_ipv6` files the ip6tables-restore input starts
// where the first table header repeats.
struct IptablesParts {
  std::string v4;
  std::string v6;
};

IptablesParts SplitIptablesGolden(const std::string& text) {
  IptablesParts parts;
  std::istringstream lines(text);
  std::string line;
  std::string first_header;
  bool in_v6 = false;
  while (std::getline(lines, line)) {
    if (line == "iptables-save" || line == "ip6tables-save") continue;
    if (line.starts_with("*")) {
      if (first_header.empty()) {
        first_header = line;
      } else if (line == first_header) {
        in_v6 = true;
      }
    }
    (in_v6 ? parts.v6 : parts.v4) += line + "\n";
  }
  return parts;
}

std::vector<Table> ParseIptablesGolden(const fs::path& path, Backend backend) {
  const IptablesParts parts = SplitIptablesGolden(ReadFile(path));
  std::vector<Table> tables;
  auto v4 = ParseIptablesText(parts.v4, backend, Family::kIpv4);
  EXPECT_TRUE(v4.ok()) << path << ": " << v4.error().message;
  if (v4.ok()) tables = *v4;
  if (!parts.v6.empty()) {
    auto v6 = ParseIptablesText(parts.v6, backend, Family::kIpv6);
    EXPECT_TRUE(v6.ok()) << path << " (ipv6): " << v6.error().message;
    if (v6.ok()) tables.insert(tables.end(), v6->begin(), v6->end());
  }
  return tables;
}

std::vector<Table> ParseNftGolden(const fs::path& path) {
  auto tables = ParseNftText(ReadFile(path));
  EXPECT_TRUE(tables.ok()) << path << ": " << tables.error().message;
  return tables.ok() ? *tables : std::vector<Table>{};
}

struct AmbientCase {
  std::string name;
  AmbientVariant variant;
};

std::vector<AmbientCase> AmbientCases() {
  const std::vector<std::string> vifs = {"fake1s0f0", "fake1s0f1"};
  std::vector<AmbientCase> cases = {
      {"default", {true, false, {}, false}},
      {"dns_pod_enabled_and_off_globally", {true, false, {}, false}},
      {"dns_pod_disabled_and_on_globally", {false, false, {}, false}},
      {"ingress", {false, true, {}, false}},
      {"virtual_interfaces", {false, false, vifs, false}},
      {"ingress_and_virtual_interfaces", {false, true, vifs, false}},
  };
  const size_t v4_cases = cases.size();
  for (size_t i = 0; i < v4_cases; ++i) {
    AmbientCase v6 = cases[i];
    v6.name += "_ipv6";
    v6.variant.ipv6 = true;
    cases.push_back(v6);
  }
  return cases;
}

struct BackendCase {
  Backend backend;
  std::string dir;
};

const std::vector<BackendCase>& AmbientBackends() {
  static const std::vector<BackendCase> backends = {
      {Backend::kIptablesLegacy, "cni/pkg/iptables/testdata"},
      {Backend::kIptablesNft, "cni/pkg/iptables/testdata"},
      {Backend::kNft, "cni/pkg/nftables/testdata"},
  };
  return backends;
}

std::vector<Table> ParseGolden(Backend backend, const fs::path& path) {
  return backend == Backend::kNft ? ParseNftGolden(path) : ParseIptablesGolden(path, backend);
}

TEST(GoldenCorpus, AmbientGoldensAreHealthyPodsOfTheirVariant) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  int checked = 0;
  for (const BackendCase& backend : AmbientBackends()) {
    for (const AmbientCase& golden : AmbientCases()) {
      const fs::path path = GoldenDir() / backend.dir / (golden.name + ".golden");
      SCOPED_TRACE(std::string(BackendName(backend.backend)) + " " + path.string());
      ASSERT_TRUE(fs::exists(path));
      NetnsSnapshot pod = test::EmptyNetns("/run/netns/golden", 4026532100);
      pod.netfilter.tables = ParseGolden(backend.backend, path);
      test::AddPolicyRouting(pod.routing, golden.variant);
      pod.routing.addresses.push_back({"eth0", Family::kIpv4, "10.244.1.7", 24, true});
      if (golden.variant.ipv6) {
        pod.routing.addresses.push_back({"eth0", Family::kIpv6, "fd00::7", 64, true});
      }

      const NetnsClassification c = Classify(pod);
      EXPECT_EQ(c.mode, DataplaneMode::kAmbient);
      EXPECT_EQ(c.ambient_backends, std::set<Backend>{backend.backend});
      ASSERT_TRUE(c.variant.has_value());
      EXPECT_EQ(*c.variant, golden.variant)
          << "recognised " << c.variant->Describe() << ", want " << golden.variant.Describe();
      EXPECT_TRUE(c.sidecar_backends.empty());

      NodeSnapshot node;
      node.netns.push_back(
          test::HealthyHost(backend.backend, golden.variant.ipv6, {"10.244.1.7"}, {"fd00::7"}));
      node.netns.push_back(pod);
      const NodeAnalysis analysis = Analyze(node);
      EXPECT_TRUE(analysis.findings.empty()) << test::Dump(analysis);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 36);  // 24 files; the iptables ones as legacy and as iptables-nft
}

TEST(GoldenCorpus, HostprobeGoldensAreHostRules) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  for (const BackendCase& backend : AmbientBackends()) {
    for (bool ipv6 : {false, true}) {
      const fs::path path =
          GoldenDir() / backend.dir / (ipv6 ? "hostprobe_ipv6.golden" : "hostprobe.golden");
      SCOPED_TRACE(std::string(BackendName(backend.backend)) + " " + path.string());
      NetnsSnapshot host = test::EmptyNetns("/proc/1/ns/net", 4026531840, true);
      host.netfilter.tables = ParseGolden(backend.backend, path);
      const NetnsClassification c = Classify(host);
      EXPECT_EQ(c.mode, DataplaneMode::kNone);
      EXPECT_TRUE(c.ambient_backends.empty());
      EXPECT_TRUE(c.host_rules_present);
      EXPECT_EQ(c.host_backends, std::set<Backend>{backend.backend});

      // With the probe sets the goldens satisfy the probe-SNAT check for an enrolled pod.
      if (backend.backend == Backend::kNft) {
        for (Table& table : host.netfilter.tables) {
          if (table.name != "istio-ambient-nat") continue;
          table.sets.push_back({"istio-inpod-probes-v4", "ipv4_addr", "", {"10.244.1.7"}});
          table.sets.push_back({"istio-inpod-probes-v6", "ipv6_addr", "", {"fd00::7"}});
        }
      } else {
        host.netfilter.ipsets.push_back(
            {"istio-inpod-probes-v4", "hash:ip", Family::kIpv4, {"10.244.1.7"}});
        host.netfilter.ipsets.push_back(
            {"istio-inpod-probes-v6", "hash:ip", Family::kIpv6, {"fd00::7"}});
      }
      const AmbientVariant variant{true, false, {}, ipv6};
      NodeSnapshot node;
      node.netns.push_back(host);
      node.netns.push_back(test::HealthyPod("/run/netns/pod", 4026532101, backend.backend, variant,
                                            "10.244.1.7", ipv6 ? "fd00::7" : ""));
      const NodeAnalysis analysis = Analyze(node);
      EXPECT_TRUE(analysis.findings.empty()) << test::Dump(analysis);
    }
  }
}

// Every sidecar golden carries sidecar-only chains (ISTIO_INBOUND/ISTIO_REDIRECT/...) or
// istio-proxy-* tables, including the "empty" case, so none is excluded here. The builder
// goldens (tools/istio-*/pkg/builder/testdata) hold placeholder tables and chains, not sidecar
// rules, and are not part of this test.
TEST(GoldenCorpus, SidecarGoldensAreSidecarMode) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  struct SidecarDir {
    std::string dir;
    bool nft;
  };
  const std::vector<SidecarDir> dirs = {{"tools/istio-iptables/pkg/capture/testdata", false},
                                        {"tools/istio-nftables/pkg/capture/testdata", true},
                                        {"cni/pkg/plugin/testdata", false}};
  int checked = 0;
  for (const SidecarDir& dir : dirs) {
    for (const fs::directory_entry& entry : fs::directory_iterator(GoldenDir() / dir.dir)) {
      if (entry.path().extension() != ".golden") continue;
      SCOPED_TRACE(entry.path().string());
      const Backend backend = dir.nft ? Backend::kNft : Backend::kIptablesNft;
      NetnsSnapshot pod = test::EmptyNetns("/run/netns/sidecar", 4026532200);
      pod.netfilter.tables = ParseGolden(backend, entry.path());
      const NetnsClassification c = Classify(pod);
      EXPECT_EQ(c.mode, DataplaneMode::kSidecar);
      EXPECT_EQ(c.sidecar_backends, std::set<Backend>{backend});
      EXPECT_TRUE(c.ambient_backends.empty());
      NodeSnapshot node;
      node.netns.push_back(pod);
      const NodeAnalysis analysis = Analyze(node);
      EXPECT_TRUE(analysis.findings.empty()) << test::Dump(analysis);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 27 + 28 + 9);
}

// The lab fault "sidecar rules added to an ambient pod", with a real sidecar golden.
TEST(GoldenCorpus, SidecarGoldenInAmbientPodIsOnlyConflict) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  const AmbientVariant variant{true, false, {}, false};
  for (const BackendCase& backend : AmbientBackends()) {
    NodeSnapshot node;
    node.netns.push_back(test::HealthyHost(backend.backend, false, {"10.244.1.7"}));
    NetnsSnapshot pod = test::EmptyNetns("/run/netns/pod", 4026532101);
    pod.netfilter.tables =
        ParseGolden(backend.backend, GoldenDir() / backend.dir / "default.golden");
    for (const Table& table :
         ParseNftGolden(GoldenDir() / "tools/istio-nftables/pkg/capture/testdata/tproxy.golden")) {
      pod.netfilter.tables.push_back(table);
    }
    test::AddPolicyRouting(pod.routing, variant);
    pod.routing.addresses.push_back({"eth0", Family::kIpv4, "10.244.1.7", 24, true});
    node.netns.push_back(pod);
    const NodeAnalysis analysis = Analyze(node);
    EXPECT_EQ(test::Codes(analysis), std::vector<std::string>{"DATAPLANE_CONFLICT"})
        << test::Dump(analysis);
  }
}

// The expected-rule templates equal the parsed goldens rule for rule (same order).
TEST(GoldenCorpus, TemplatesEqualGoldenDefault) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  const AmbientVariant variant{true, false, {}, true};
  istio::ProbeSnat snat;
  snat.v6 = "e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164";
  for (const BackendCase& backend : AmbientBackends()) {
    const std::vector<Table> tables =
        ParseGolden(backend.backend, GoldenDir() / backend.dir / "default_ipv6.golden");
    const istio::ExpectedRuleset expected =
        istio::BuildInpodRuleset(istio::RulesetBackendFor(backend.backend), variant, snat);
    for (const istio::ExpectedChain& chain : expected.chains) {
      SCOPED_TRACE(chain.table + " " + chain.chain + " " + std::string(FamilyName(chain.family)));
      const Table* table = nullptr;
      for (const Table& candidate : tables) {
        if (candidate.name == chain.table && candidate.family == chain.family) table = &candidate;
      }
      ASSERT_NE(table, nullptr);
      const Chain* seen = table->FindChain(chain.chain);
      ASSERT_NE(seen, nullptr);
      ASSERT_EQ(seen->rules.size(), chain.rules.size());
      for (size_t i = 0; i < chain.rules.size(); ++i) {
        EXPECT_EQ(seen->rules[i].sem, chain.rules[i].rule.sem)
            << chain.rules[i].id << ": golden "
            << RenderRule(backend.backend, chain.family, chain.chain, seen->rules[i]) << " vs "
            << RenderRule(backend.backend, chain.family, chain.chain, chain.rules[i].rule);
      }
    }
  }
}

// Real iptables-save output after the 1.30.5 flip (facts §5.5): one full copy per backend.
TEST(ObservedCorpus, FlipSaveOutputIsOnlyMixedBackend) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  const AmbientVariant variant{true, false, {}, false};
  NetnsSnapshot pod = test::EmptyNetns("/run/netns/flipped", 4026532300);
  for (const auto& [file, backend] :
       {std::pair{"flip-iptables-legacy-save.txt", Backend::kIptablesLegacy},
        std::pair{"flip-iptables-nft-save.txt", Backend::kIptablesNft}}) {
    auto tables = ParseIptablesText(ReadFile(ObservedDir() / file), backend, Family::kIpv4);
    ASSERT_TRUE(tables.ok()) << file << ": " << tables.error().message;
    pod.netfilter.tables.insert(pod.netfilter.tables.end(), tables->begin(), tables->end());
  }
  test::AddPolicyRouting(pod.routing, variant);
  pod.routing.addresses.push_back({"eth0", Family::kIpv4, "10.244.1.7", 24, true});
  NodeSnapshot node;
  node.netns.push_back(test::HealthyHost(Backend::kIptablesLegacy, false, {"10.244.1.7"}));
  node.netns.push_back(pod);
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(test::Codes(analysis), std::vector<std::string>{"MIXED_BACKEND"})
      << test::Dump(analysis);
  EXPECT_EQ(analysis.netns[1].variant, variant);
}

// Real `nft list ruleset` of the native nft default_ipv6 rule set is a healthy pod.
TEST(ObservedCorpus, NativeNftListingIsHealthy) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  const fs::path path = ObservedDir() / "native-nft-list-ruleset-default_ipv6.txt";
  const AmbientVariant variant{true, false, {}, true};
  NetnsSnapshot pod = test::EmptyNetns("/run/netns/native", 4026532301);
  pod.netfilter.tables = ParseNftGolden(path);
  test::AddPolicyRouting(pod.routing, variant);
  NodeSnapshot node;
  node.netns.push_back(test::HealthyHost(Backend::kNft, true, {}, {}));
  node.netns.push_back(pod);
  const NodeAnalysis analysis = Analyze(node);
  EXPECT_EQ(analysis.netns[1].variant, variant);
  EXPECT_TRUE(analysis.findings.empty()) << test::Dump(analysis);
}

}  // namespace
}  // namespace ad
