// Set lookups and verdict maps in the rule model: rendered by their real key, as `nft list
// ruleset` prints them, and compared by meaning (anonymous set names do not matter).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/rule.h"
#include "text/rule_text.h"

namespace ad {
namespace {

Match SetMatch(std::string text, std::vector<std::string> elements = {}, bool negated = false) {
  Match m;
  m.kind = MatchKind::kSet;
  m.negated = negated;
  m.text = std::move(text);
  m.elements = std::move(elements);
  return m;
}

Match Protocol(uint32_t number) { return Match{MatchKind::kProtocol, false, number, 0, ""}; }

Action VerdictMap(std::string text, std::vector<std::string> elements = {}) {
  Action a;
  a.kind = ActionKind::kVerdictMap;
  a.text = std::move(text);
  a.elements = std::move(elements);
  return a;
}

Rule MakeRule(std::vector<Match> matches, Action action, bool counter = false) {
  Rule rule;
  rule.sem.matches = std::move(matches);
  rule.sem.action = std::move(action);
  rule.has_counter = counter;
  Canonicalize(rule.sem);
  return rule;
}

std::string Nft(Family family, const Rule& rule) {
  return RenderRule(Backend::kNft, family, "c", rule);
}

const Action kAccept{ActionKind::kAccept};

TEST(SetLookupRender, AnonymousPortSetTakesTheProtocolName) {
  // The rule from the noisy node: it used to print "meta l4proto tcp ip daddr @__set0".
  const Rule rule = MakeRule({Protocol(6), SetMatch("{} dport", {"8080", "9090"})}, kAccept, true);
  EXPECT_EQ(Nft(Family::kInet, rule), "tcp dport { 8080, 9090 } counter accept");
  const Rule udp =
      MakeRule({Protocol(17), SetMatch("{} sport", {"53", "5353"})}, Action{ActionKind::kDrop});
  EXPECT_EQ(Nft(Family::kInet, udp), "udp sport { 53, 5353 } drop");
}

TEST(SetLookupRender, NamedSetsByKey) {
  EXPECT_EQ(Nft(Family::kInet, MakeRule({Protocol(6), SetMatch("ports dport")}, kAccept)),
            "tcp dport @ports accept");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({SetMatch("ifs oifname")}, kAccept)),
            "oifname @ifs accept");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({SetMatch("ifs iif")}, kAccept)), "iif @ifs accept");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({SetMatch("marks mark")}, kAccept)),
            "meta mark @marks accept");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({SetMatch("zones ctmark", {}, true)}, kAccept)),
            "ct mark != @zones accept");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({SetMatch("users skuid")}, kAccept)),
            "meta skuid @users accept");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({SetMatch("protos l4proto")}, kAccept)),
            "meta l4proto @protos accept");
  // A port lookup without a protocol match reads the transport header as such.
  EXPECT_EQ(Nft(Family::kInet, MakeRule({SetMatch("ports dport")}, kAccept)),
            "th dport @ports accept");
}

TEST(SetLookupRender, AddressFamilyFromTableElementsOrSetType) {
  EXPECT_EQ(Nft(Family::kIpv4, MakeRule({SetMatch("pods src")}, kAccept)), "ip saddr @pods accept");
  EXPECT_EQ(Nft(Family::kIpv6, MakeRule({SetMatch("pods dst")}, kAccept)),
            "ip6 daddr @pods accept");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({SetMatch("{} dst", {"fd00::1", "fd00::2"})}, kAccept)),
            "ip6 daddr { fd00::1, fd00::2 } accept");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({SetMatch("{} dst", {"10.0.0.0/8"}, true)}, kAccept)),
            "ip daddr != { 10.0.0.0/8 } accept");

  // In an inet table only the named set's key type tells ip6 from ip.
  Table table;
  table.family = Family::kInet;
  table.sets.push_back(NftSet{"pods", "ipv6_addr", "", {}, "", false});
  const Rule rule = MakeRule({SetMatch("pods src")}, kAccept);
  EXPECT_EQ(RenderRule(table, "c", rule), "ip6 saddr @pods accept");
  EXPECT_EQ(Nft(Family::kInet, rule), "ip saddr @pods accept");  // no table: ip unless "-v6"
}

TEST(SetLookupRender, Concatenations) {
  const Rule rule = MakeRule(
      {Protocol(6), SetMatch("{} src.dport", {"10.0.0.1 . 80", "10.0.0.2 . 443"})}, kAccept);
  EXPECT_EQ(Nft(Family::kInet, rule),
            "ip saddr . tcp dport { 10.0.0.1 . 80, 10.0.0.2 . 443 } accept");
  Table table;
  table.family = Family::kInet;
  table.sets.push_back(NftSet{"svc", "ipv6_addr . inet_proto . inet_service", "", {}, "", false});
  EXPECT_EQ(RenderRule(table, "c", MakeRule({SetMatch("svc dst.l4proto.dport")}, kAccept)),
            "ip6 daddr . meta l4proto . th dport @svc accept");
}

TEST(SetLookupRender, VerdictMapsOfKubeProxy) {
  EXPECT_EQ(Nft(Family::kIpv4, MakeRule({}, VerdictMap("service-ips dst.l4proto.dport"))),
            "ip daddr . meta l4proto . th dport vmap @service-ips");
  EXPECT_EQ(Nft(Family::kIpv4, MakeRule({SetMatch("nodeport-ips dst")},
                                        VerdictMap("service-nodeports l4proto.dport"))),
            "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports");
  EXPECT_EQ(
      Nft(Family::kIpv4, MakeRule({}, VerdictMap("{} numgen-random-mod-2",
                                                 {"0 : goto endpoint-a", "1 : goto endpoint-b"}))),
      "numgen random mod 2 vmap { 0 : goto endpoint-a, 1 : goto endpoint-b }");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({}, VerdictMap("{} numgen-inc-mod-3-1", {"1 : drop"}))),
            "numgen inc mod 3 offset 1 vmap { 1 : drop }");
  // The key's address family comes from the elements, even behind a " : verdict".
  EXPECT_EQ(Nft(Family::kInet,
                MakeRule({}, VerdictMap("{} dst", {"fd00::1 : goto svc-x", "fd00::2 : drop"}))),
            "ip6 daddr vmap { fd00::1 : goto svc-x, fd00::2 : drop }");
  EXPECT_EQ(Nft(Family::kInet, MakeRule({Protocol(6)}, VerdictMap("{} dport", {"22 : accept"}))),
            "tcp dport vmap { 22 : accept }");
}

TEST(SetLookupRender, KubeProxyMarkWrites) {
  // mark = (mark & ~mask) ^ value, in the bit-set / toggle / clear forms nft prints.
  EXPECT_EQ(RenderAction(Backend::kNft, Family::kIpv4, {ActionKind::kSetMark, 0x4000, 0x4000}),
            "meta mark set meta mark | 0x00004000");
  EXPECT_EQ(RenderAction(Backend::kNft, Family::kIpv4, {ActionKind::kSetMark, 0x4000, 0}),
            "meta mark set meta mark ^ 0x00004000");
  EXPECT_EQ(RenderAction(Backend::kNft, Family::kIpv4, {ActionKind::kSetMark, 0, 0x4000}),
            "meta mark set meta mark & 0xffffbfff");
  EXPECT_EQ(RenderAction(Backend::kNft, Family::kIpv4, {ActionKind::kSetConnmark, 0x111, 0xfff}),
            "ct mark set ct mark & 0xfffff000 | 0x00000111");
}

TEST(SetLookupRender, EqualByMeaningNotByAnonymousName) {
  // Two reads inline the same elements into the same text, whatever __setN the kernel chose.
  const Rule a = MakeRule({Protocol(6), SetMatch("{} dport", {"80", "443"})}, kAccept);
  const Rule b = MakeRule({SetMatch("{} dport", {"80", "443"}), Protocol(6)}, kAccept);
  EXPECT_EQ(a.sem, b.sem);
  const Rule other = MakeRule({Protocol(6), SetMatch("{} dport", {"80", "8443"})}, kAccept);
  EXPECT_NE(a.sem, other.sem);
  // A different key over the same elements is a different rule.
  const Rule sport = MakeRule({Protocol(6), SetMatch("{} sport", {"80", "443"})}, kAccept);
  EXPECT_NE(a.sem, sport.sem);
  EXPECT_NE(MakeRule({}, VerdictMap("{} dst", {"10.0.0.1 : accept"})).sem,
            MakeRule({}, VerdictMap("{} dst", {"10.0.0.1 : drop"})).sem);
}

TEST(SetLookupRender, IptablesRenderingIsUnchanged) {
  const Rule rule = MakeRule({Protocol(6), SetMatch("istio-inpod-probes-v4 dst"),
                              Match{MatchKind::kSocketExists, false, 0, 0, ""}},
                             Action{ActionKind::kSnat, 0, 0, 0, "169.254.7.127"});
  EXPECT_EQ(RenderRule(Backend::kIptablesNft, Family::kIpv4, "ISTIO_POSTRT", rule),
            "-A ISTIO_POSTRT -p tcp -m set --match-set istio-inpod-probes-v4 dst -m owner "
            "--socket-exists -j SNAT --to-source 169.254.7.127");
  Table table;
  table.backend = Backend::kIptablesNft;
  table.family = Family::kIpv4;
  EXPECT_EQ(RenderRule(table, "ISTIO_POSTRT", rule),
            RenderRule(Backend::kIptablesNft, Family::kIpv4, "ISTIO_POSTRT", rule));
  EXPECT_EQ(RenderMatch(Backend::kIptablesLegacy, Family::kIpv4, SetMatch("pair src,dst")),
            "-m set --match-set pair src,dst");
}

TEST(SetLookupRender, NftTextPortSetsMeanWhatTheReaderReads) {
  // The text parser models a port set lookup as the reader does, so text and kernel compare.
  auto inline_set =
      ParseNftRuleText("tcp dport { 9090, 8080, 1000-2000 } counter accept", Family::kInet);
  ASSERT_TRUE(inline_set.ok()) << inline_set.error().message;
  EXPECT_EQ(
      inline_set->sem,
      MakeRule({Protocol(6), SetMatch("{} dport", {"1000-2000", "8080", "9090"})}, kAccept).sem);
  EXPECT_EQ(Nft(Family::kInet, *inline_set), "tcp dport { 1000-2000, 8080, 9090 } counter accept");
  auto named = ParseNftRuleText("udp sport != @dns drop", Family::kInet);
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_EQ(
      named->sem,
      MakeRule({Protocol(17), SetMatch("dns sport", {}, true)}, Action{ActionKind::kDrop}).sem);
}

TEST(SetLookupRender, NftTextNamedLookupsOnMetaAndCtKeys) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"iifname @ifs accept", "ifs iifname"},
      {"oifname != @ifs accept", "ifs oifname"},
      {"meta mark @marks accept", "marks mark"},
      {"ct mark @zones accept", "zones ctmark"},
      {"meta skuid @users accept", "users skuid"},
      {"meta l4proto @protos accept", "protos l4proto"},
  };
  for (const auto& [text, lookup] : cases) {
    auto rule = ParseNftRuleText(text, Family::kInet);
    ASSERT_TRUE(rule.ok()) << text;
    ASSERT_EQ(rule->sem.matches.size(), 1u) << text;
    EXPECT_EQ(rule->sem.matches[0].kind, MatchKind::kSet) << text;
    EXPECT_EQ(rule->sem.matches[0].text, lookup) << text;
    EXPECT_EQ(rule->sem.matches[0].negated, text.find("!=") != std::string::npos) << text;
    EXPECT_EQ(Nft(Family::kInet, *rule), text);  // and it prints back as nft wrote it
  }
}

TEST(SetLookupRender, NftTextMapsAndIntervalSetsLikeTheReader) {
  auto tables = ParseNftText(
      "table ip kube-proxy {\n"
      "\tmap service-ips {\n"
      "\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n"
      "\t}\n"
      "\tset nets {\n"
      "\t\ttype ipv4_addr\n"
      "\t\tflags constant,interval\n"
      "\t}\n"
      "}\n");
  ASSERT_TRUE(tables.ok()) << tables.error().message;
  ASSERT_EQ(tables->size(), 1u);
  ASSERT_EQ((*tables)[0].sets.size(), 2u);
  const NftSet& map = (*tables)[0].sets[0];
  EXPECT_EQ(map.key_type, "ipv4_addr . inet_proto . inet_service");
  EXPECT_EQ(map.data_type, "verdict");
  EXPECT_FALSE(map.interval);
  EXPECT_TRUE((*tables)[0].sets[1].interval);
  EXPECT_EQ((*tables)[0].sets[1].data_type, "");
  // And back to a script nft accepts: the map keeps its verdict type, the set its flag.
  const std::string script = RenderNftScript(*tables);
  EXPECT_NE(script.find("add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . "
                        "inet_service : verdict ; }"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("add set ip kube-proxy nets { type ipv4_addr ; flags interval ; }"),
            std::string::npos)
      << script;
}

TEST(SetLookupRender, ParseSetLookup) {
  EXPECT_EQ(ParseSetLookup("ports dport").set, "ports");
  EXPECT_EQ(ParseSetLookup("ports dport").key, "dport");
  EXPECT_EQ(ParseSetLookup("{} dst.l4proto.dport").set, kInlineSet);
  EXPECT_EQ(ParseSetLookup("{} dst.l4proto.dport").key, "dst.l4proto.dport");
  EXPECT_EQ(ParseSetLookup("lonely").key, "");
}

}  // namespace
}  // namespace ad
