// The lab's rule generators reproduce Istio's golden files for every ambient case and backend.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lab/lab.h"
#include "lab/rules.h"
#include "shared_corpus.h"

namespace ad::lab {
namespace {

namespace fs = std::filesystem;

fs::path GoldenRoot() { return corpus::CorpusPath("istio-golden/cni/pkg"); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> GoldenLines(const fs::path& path, size_t skip) {
  std::ifstream file(path);
  std::stringstream content;
  content << file.rdbuf();
  std::vector<std::string> lines = Lines(content.str());
  lines.erase(lines.begin(),
              lines.begin() + static_cast<std::ptrdiff_t>(std::min(skip, lines.size())));
  return lines;
}

struct GoldenCase {
  std::string name;
  AmbientVariant variant;  // ipv6 is set per file suffix
  bool host = false;
};

std::vector<GoldenCase> Cases() {
  const std::vector<std::string> vifs = {"fake1s0f0", "fake1s0f1"};
  return {
      {"default", {.dns_capture = true}},
      {"ingress", {.ingress_mode = true}},
      {"virtual_interfaces", {.virtual_interfaces = vifs}},
      {"ingress_and_virtual_interfaces", {.ingress_mode = true, .virtual_interfaces = vifs}},
      {"dns_pod_enabled_and_off_globally", {.dns_capture = true}},
      {"dns_pod_disabled_and_on_globally", {}},
      {"hostprobe", {}, true},
  };
}

class LabRulesGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!corpus::HaveCorpus()) {
      GTEST_SKIP() << corpus::CorpusAbsentReason();
    }
  }
};

TEST_F(LabRulesGoldenTest, IptablesMatchesAllGoldens) {
  int compared = 0;
  for (const GoldenCase& golden : Cases()) {
    for (bool ipv6 : {false, true}) {
      const std::string file = golden.name + (ipv6 ? "_ipv6" : "") + ".golden";
      SCOPED_TRACE(file);
      // Istio's tests use a test-only v6 SNAT for in-pod rules but the default for host rules.
      SnatConfig snat;
      if (!golden.host) snat.ipv6 = kIstioTestSnatIpv6;
      std::string text;
      if (golden.host) {
        text = IptablesHostRestore(Family::kIpv4, snat);
        if (ipv6) text += IptablesHostRestore(Family::kIpv6, snat);
      } else {
        AmbientVariant variant = golden.variant;
        variant.ipv6 = ipv6;
        text = IptablesInpodRestore(variant, Family::kIpv4, snat);
        if (ipv6) text += IptablesInpodRestore(variant, Family::kIpv6, snat);
      }
      // The goldens open with the verify step's 2-line command log.
      EXPECT_EQ(Lines(text), GoldenLines(GoldenRoot() / "iptables/testdata" / file, 2));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 14);
}

TEST_F(LabRulesGoldenTest, NftMatchesAllGoldens) {
  int compared = 0;
  for (const GoldenCase& golden : Cases()) {
    for (bool ipv6 : {false, true}) {
      const std::string file = golden.name + (ipv6 ? "_ipv6" : "") + ".golden";
      SCOPED_TRACE(file);
      const SnatConfig snat{.ipv6 = kIstioTestSnatIpv6, .kubelet_uid = 1000};
      AmbientVariant variant = golden.variant;
      variant.ipv6 = ipv6;
      const std::string text =
          golden.host ? NftHostScript(ipv6, snat) : NftInpodScript(variant, snat);
      EXPECT_EQ(Lines(text), GoldenLines(GoldenRoot() / "nftables/testdata" / file, 0));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 14);
}

TEST(LabRulesTweaksTest, DupJumpAndDeletedRedirect) {
  const AmbientVariant variant{.dns_capture = true};
  const RuleTweaks tweaks{.extra_output_jumps = 1, .omit_outbound_redirect = true};
  const std::string ipt = IptablesInpodRestore(variant, Family::kIpv4, {}, tweaks);
  const std::string nft = NftInpodScript(variant, {}, tweaks);
  auto count = [](const std::string& text, const std::string& needle) {
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(ipt, "-A OUTPUT -j ISTIO_OUTPUT"), 4);  // mangle, nat, raw + the duplicate
  EXPECT_EQ(count(ipt, "--to-ports 15001"), 0);
  EXPECT_EQ(count(nft, "istio-ambient-nat output jump istio-output"), 2);
  EXPECT_EQ(count(nft, "redirect to :15001"), 0);
}

TEST(LabPlanTest, FaultsLandOnTheLastMeshedPodByDefault) {
  LabOptions options;
  options.prefix = "adplan";
  options.pods = 4;
  options.plain_pods = 2;
  options.mixed_variants = true;
  options.faults = {{FaultKind::kDupJump, std::nullopt}, {FaultKind::kNoProbeMember, 0}};
  Result<LabNode> plan = PlanLab(options);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->pods.size(), 6u);
  EXPECT_EQ(plan->pods[0].netns_name, "adplan-pod-000");
  EXPECT_TRUE(plan->pods[0].variant.ingress_mode);
  EXPECT_EQ(plan->pods[1].variant.virtual_interfaces.size(), 2u);
  EXPECT_FALSE(plan->pods[5].meshed);
  EXPECT_EQ(plan->pods[3].faults, std::vector<std::string>{"dup-jump"});
  EXPECT_EQ(plan->pods[0].faults, std::vector<std::string>{"no-probe-member"});
  EXPECT_EQ(plan->faults.size(), 2u);

  options.faults = {{FaultKind::kDupJump, 5}};
  EXPECT_FALSE(PlanLab(options).ok());  // plain pods cannot carry ambient faults
  options.faults = {{FaultKind::kFlip, std::nullopt}};
  options.backend = LabBackend::kNft;
  EXPECT_FALSE(PlanLab(options).ok());  // flip is an iptables backend phenomenon
}

TEST(LabPlanTest, ParsesFaultsAndBackends) {
  Result<FaultSpec> fault = ParseFault("flip:3");
  ASSERT_TRUE(fault.ok());
  EXPECT_EQ(fault->kind, FaultKind::kFlip);
  EXPECT_EQ(fault->pod_index, 3);
  EXPECT_FALSE(ParseFault("bogus").ok());
  EXPECT_FALSE(ParseFault("flip:x").ok());
  EXPECT_TRUE(ParseBackend("legacy").ok());
  EXPECT_FALSE(ParseBackend("iptables").ok());
}

}  // namespace
}  // namespace ad::lab
