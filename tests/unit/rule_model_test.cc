#include <gtest/gtest.h>

#include "model/rule.h"

namespace ad {
namespace {

Rule IstioInboundRedirect() {
  Rule rule;
  rule.sem.matches = {
      {MatchKind::kMark, true, 0x539, 0xfff, ""},
      {MatchKind::kDstPort, true, 15008, 15008, ""},
      {MatchKind::kDstAddr, true, 0, 0, "127.0.0.1/32"},
      {MatchKind::kProtocol, false, 6, 0, ""},
  };
  rule.sem.action = {ActionKind::kRedirect, 15006, 15006, 0, ""};
  Canonicalize(rule.sem);
  return rule;
}

TEST(RuleModel, Names) {
  EXPECT_EQ(BackendName(Backend::kIptablesLegacy), "iptables-legacy");
  EXPECT_EQ(BackendName(Backend::kIptablesNft), "iptables-nft");
  EXPECT_EQ(BackendName(Backend::kNft), "nft");
  EXPECT_EQ(FamilyName(Family::kIpv4), "ipv4");
  EXPECT_EQ(FamilyName(Family::kIpv6), "ipv6");
  EXPECT_EQ(FamilyName(Family::kInet), "inet");
  EXPECT_EQ(FamilyName(Family::kOther), "other");
}

TEST(RuleModel, CanonicalizeSortsAndDropsNoOps) {
  RuleSemantics a;
  a.matches = {{MatchKind::kMark, false, 0x539, 0xfff, ""},
               {MatchKind::kProtocol, false, 6, 0, ""},
               {MatchKind::kDstPort, false, 53, 53, ""},
               {MatchKind::kProtocol, false, 6, 0, ""},
               {MatchKind::kMark, false, 0, 0, ""}};
  Canonicalize(a);
  ASSERT_EQ(a.matches.size(), 3u);
  EXPECT_EQ(a.matches[0].kind, MatchKind::kProtocol);
  EXPECT_EQ(a.matches[1].kind, MatchKind::kDstPort);
  EXPECT_EQ(a.matches[2].kind, MatchKind::kMark);

  RuleSemantics b;
  b.matches = {a.matches[2], a.matches[1], a.matches[0]};
  Canonicalize(b);
  EXPECT_EQ(a, b);
}

TEST(RuleModel, FindChain) {
  Table table;
  table.chains.resize(2);
  table.chains[0].name = "PREROUTING";
  table.chains[1].name = "ISTIO_PRERT";
  ASSERT_NE(table.FindChain("ISTIO_PRERT"), nullptr);
  EXPECT_EQ(table.FindChain("ISTIO_PRERT"), &table.chains[1]);
  EXPECT_EQ(table.FindChain("nope"), nullptr);
}

TEST(RuleModel, RendersIptablesSaveSyntax) {
  EXPECT_EQ(
      RenderRule(Backend::kIptablesLegacy, Family::kIpv4, "ISTIO_PRERT", IstioInboundRedirect()),
      "-A ISTIO_PRERT ! -d 127.0.0.1/32 -p tcp -m tcp ! --dport 15008 -m mark ! --mark "
      "0x539/0xfff -j REDIRECT --to-ports 15006");
  Rule restore;
  restore.sem.matches = {{MatchKind::kConnmark, false, 0x111, 0xfff, ""}};
  restore.sem.action = {ActionKind::kRestoreConnmark, 0xffffffff, 0xffffffff, 0, ""};
  EXPECT_EQ(RenderRule(Backend::kIptablesNft, Family::kIpv4, "ISTIO_OUTPUT", restore),
            "-A ISTIO_OUTPUT -m connmark --mark 0x111/0xfff -j CONNMARK --restore-mark --nfmask "
            "0xffffffff --ctmask 0xffffffff");
  Rule snat;
  snat.sem.matches = {{MatchKind::kProtocol, false, 6, 0, ""},
                      {MatchKind::kSet, false, 0, 0, "istio-inpod-probes-v4 dst"},
                      {MatchKind::kSocketExists, false, 0, 0, ""}};
  snat.sem.action = {ActionKind::kSnat, 0, 0, 0, "169.254.7.127"};
  snat.comment = "probe snat";
  EXPECT_EQ(RenderRule(Backend::kIptablesLegacy, Family::kIpv4, "ISTIO_POSTRT", snat),
            "-A ISTIO_POSTRT -p tcp -m set --match-set istio-inpod-probes-v4 dst -m owner "
            "--socket-exists -m comment --comment \"probe snat\" -j SNAT --to-source "
            "169.254.7.127");
  EXPECT_EQ(RenderMatch(Backend::kIptablesLegacy, Family::kIpv4,
                        {MatchKind::kMark, false, 0x539, 0xffffffff, ""}),
            "-m mark --mark 0x539");
  EXPECT_EQ(RenderAction(Backend::kIptablesLegacy, Family::kIpv4,
                         {ActionKind::kSetConnmark, 0x111, 0xfff, 0, ""}),
            "-j CONNMARK --set-xmark 0x111/0xfff");
  EXPECT_EQ(RenderAction(Backend::kIptablesLegacy, Family::kIpv4, {ActionKind::kCtZone, 1}),
            "-j CT --zone 1");
}

TEST(RuleModel, RendersNftListSyntax) {
  EXPECT_EQ(RenderRule(Backend::kNft, Family::kInet, "istio-prerouting", IstioInboundRedirect()),
            "ip daddr != 127.0.0.1 tcp dport != 15008 meta mark & 0x00000fff != 0x00000539 "
            "redirect to :15006");
  Rule rule;
  rule.has_counter = true;
  rule.sem.matches = {{MatchKind::kOutIface, true, 0, 0, "lo"},
                      {MatchKind::kDstAddr, true, 0, 0, "::1/128"}};
  rule.sem.action = {ActionKind::kAccept};
  Canonicalize(rule.sem);
  EXPECT_EQ(RenderRule(Backend::kNft, Family::kInet, "c", rule),
            "ip6 daddr != ::1 oifname != \"lo\" counter accept");
  EXPECT_EQ(
      RenderAction(Backend::kNft, Family::kInet, {ActionKind::kSetConnmark, 0x111, 0xfff, 0, ""}),
      "ct mark set ct mark & 0xfffff000 | 0x00000111");
  EXPECT_EQ(RenderAction(Backend::kNft, Family::kInet,
                         {ActionKind::kRestoreConnmark, 0xffffffff, 0xffffffff, 0, ""}),
            "meta mark set ct mark");
  EXPECT_EQ(RenderAction(Backend::kNft, Family::kInet, {ActionKind::kSnat, 0, 0, 0, "fd00::1"}),
            "snat ip6 to fd00::1");
  EXPECT_EQ(RenderMatch(Backend::kNft, Family::kInet, {MatchKind::kSet, false, 0, 0, "p-v6 dst"}),
            "ip6 daddr @p-v6");
  EXPECT_EQ(RenderMatch(Backend::kNft, Family::kInet, {MatchKind::kCtState, false, 6, 0, ""}),
            "ct state related,established");
}

}  // namespace
}  // namespace ad
