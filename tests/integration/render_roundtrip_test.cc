// Loads every ambient golden, as rendered by RenderIptablesRestore / RenderNftScript, into a fresh
// network namespace with the real tools, and checks that what the tools print back re-parses to
// the same tables. Proves the renderers emit loadable text and the parsers read real tool output.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../unit/rule_golden_util.h"
#include "netns_test_util.h"
#include "shared_corpus.h"
#include "text/rule_text.h"

namespace ad {
namespace {

// Runs a command and returns its stdout, or nullopt when it exits non-zero.
std::optional<std::string> Capture(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

struct IptablesTool {
  const char* restore;
  const char* save;
  Family family;
};

constexpr IptablesTool kIptablesTools[] = {
    {"iptables-legacy-restore", "iptables-legacy-save", Family::kIpv4},
    {"iptables-nft-restore", "iptables-nft-save", Family::kIpv4},
    {"ip6tables-legacy-restore", "ip6tables-legacy-save", Family::kIpv6},
    {"ip6tables-nft-restore", "ip6tables-nft-save", Family::kIpv6},
};

class RenderRoundTrip : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!testing::IsRoot()) {
      GTEST_SKIP() << "needs root: creates a network namespace and loads netfilter rules";
    }
    if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
    for (const char* tool : {"iptables-legacy-restore", "iptables-nft-restore", "nft", "ipset"}) {
      if (testing::Run(std::string("command -v ") + tool) != 0) {
        GTEST_SKIP() << tool << " not installed";
      }
    }
    netns_ = std::make_unique<testing::ScopedNetns>("render");
    ASSERT_TRUE(netns_->ok()) << "ip netns add failed";
  }

  void TearDown() override { netns_.reset(); }  // deletes the namespace

  std::string InNetns(const std::string& command) const {
    return "ip netns exec " + netns_->name() + " " + command;
  }

  std::unique_ptr<testing::ScopedNetns> netns_;
};

TEST_P(RenderRoundTrip, IptablesToolsAcceptRenderedRestoreInput) {
  const std::string& name = GetParam();
  const auto [v4, v6] = golden::SplitIptablesGolden(
      golden::ReadText(golden::AmbientDir("iptables") + name + ".golden"));
  if (name.starts_with("hostprobe")) {
    // The SNAT rule references the probe ipsets; they must exist before the rules load.
    ASSERT_EQ(netns_->Exec("ipset create istio-inpod-probes-v4 hash:ip"), 0);
    ASSERT_EQ(netns_->Exec("ipset create istio-inpod-probes-v6 hash:ip family inet6"), 0);
  }
  for (const auto& tool : kIptablesTools) {
    const std::string& text = tool.family == Family::kIpv4 ? v4 : v6;
    if (text.empty()) continue;
    auto original = ParseIptablesText(text, Backend::kIptablesLegacy, tool.family);
    ASSERT_TRUE(original.ok()) << original.error().message;
    const std::string rendered = RenderIptablesRestore(*original);
    ASSERT_EQ(netns_->ExecWithInput(tool.restore, rendered), 0) << tool.restore << " rejected:\n"
                                                                << rendered;
    const auto saved = Capture(InNetns(tool.save));
    ASSERT_TRUE(saved.has_value()) << tool.save;
    auto reread = ParseIptablesText(*saved, Backend::kIptablesLegacy, tool.family);
    ASSERT_TRUE(reread.ok()) << reread.error().message;
    std::string why;
    EXPECT_TRUE(golden::TablesEqual(*reread, *original, &why))
        << name << " via " << tool.restore << ": " << why << "\nsaved:\n"
        << *saved;
  }
}

TEST_P(RenderRoundTrip, NftAcceptsRenderedScript) {
  const std::string& name = GetParam();
  auto original = ParseNftText(golden::ReadText(golden::AmbientDir("nftables") + name + ".golden"));
  ASSERT_TRUE(original.ok()) << original.error().message;
  if (name.starts_with("hostprobe")) {
    // The golden is a rules-only transaction: the agent creates the probe sets separately.
    for (auto& table : *original) {
      table.sets.push_back(NftSet{"istio-inpod-probes-v4", "ipv4_addr", "", {}});
      if (name.ends_with("_ipv6")) {
        table.sets.push_back(NftSet{"istio-inpod-probes-v6", "ipv6_addr", "", {}});
      }
    }
  }
  const std::string rendered = RenderNftScript(*original);
  ASSERT_EQ(netns_->ExecWithInput("nft -f -", rendered), 0) << "nft rejected:\n" << rendered;
  const auto listed = Capture(InNetns("nft list ruleset"));
  ASSERT_TRUE(listed.has_value());
  auto reread = ParseNftText(*listed);
  ASSERT_TRUE(reread.ok()) << reread.error().message;
  std::string why;
  EXPECT_TRUE(golden::TablesEqual(*reread, *original, &why)) << name << ": " << why << "\nlisted:\n"
                                                             << *listed;
}

INSTANTIATE_TEST_SUITE_P(AmbientGoldens, RenderRoundTrip,
                         ::testing::ValuesIn(golden::AllAmbientCases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ad
