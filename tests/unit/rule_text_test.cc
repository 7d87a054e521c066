#include "text/rule_text.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "rule_golden_util.h"
#include "shared_corpus.h"

namespace ad {
namespace {

using golden::AddrFilter;

std::vector<Table> ParseIpt(const std::string& text, Family family = Family::kIpv4) {
  auto parsed = ParseIptablesText(text, Backend::kIptablesLegacy, family);
  EXPECT_TRUE(parsed.ok()) << parsed.error().message;
  return parsed.ok() ? std::move(parsed).value() : std::vector<Table>{};
}

std::vector<Table> ParseNft(const std::string& text) {
  auto parsed = ParseNftText(text);
  EXPECT_TRUE(parsed.ok()) << parsed.error().message;
  return parsed.ok() ? std::move(parsed).value() : std::vector<Table>{};
}

RuleSemantics IptSem(std::string_view spec, Family family = Family::kIpv4) {
  auto rule = ParseIptablesRuleSpec(spec, family);
  EXPECT_TRUE(rule.ok()) << spec;
  return rule.ok() ? rule->sem : RuleSemantics{};
}

RuleSemantics NftSem(std::string_view text) {
  auto rule = ParseNftRuleText(text, Family::kInet);
  EXPECT_TRUE(rule.ok()) << text;
  return rule.ok() ? rule->sem : RuleSemantics{};
}

// --- Single rules ------------------------------------------------------------------------------

TEST(IptablesRuleSpec, DecodesIstioRedirect) {
  const auto sem = IptSem(
      "! -d 127.0.0.1/32 -p tcp ! --dport 15008 -m mark ! --mark 0x539/0xfff -j REDIRECT "
      "--to-ports 15006");
  ASSERT_EQ(sem.matches.size(), 4u);
  EXPECT_EQ(sem.matches[0], (Match{MatchKind::kProtocol, false, 6, 0, ""}));
  EXPECT_EQ(sem.matches[1], (Match{MatchKind::kDstAddr, true, 0, 0, "127.0.0.1/32"}));
  EXPECT_EQ(sem.matches[2], (Match{MatchKind::kDstPort, true, 15008, 15008, ""}));
  EXPECT_EQ(sem.matches[3], (Match{MatchKind::kMark, true, 0x539, 0xfff, ""}));
  EXPECT_EQ(sem.action, (Action{ActionKind::kRedirect, 15006, 15006, 0, ""}));
}

TEST(IptablesRuleSpec, UnknownOptionsBecomeUnknownNotErrors) {
  const auto rule = ParseIptablesRuleSpec(
      "-p tcp -m multiport ! --dports 53,15008 -m frob --wibble 3 -j "
      "NFQUEUE --queue-num 3",
      Family::kIpv4);
  ASSERT_TRUE(rule.ok());
  int unknown = 0;
  for (const auto& m : rule->sem.matches) unknown += m.kind == MatchKind::kUnknown;
  EXPECT_EQ(unknown, 2);
  EXPECT_EQ(rule->sem.action.kind, ActionKind::kUnknown);
  EXPECT_EQ(rule->sem.action.text, "-j NFQUEUE --queue-num 3");
}

TEST(IptablesRuleSpec, TargetsAndMatches) {
  EXPECT_EQ(IptSem("-j MARK --set-mark 1337").action,
            (Action{ActionKind::kSetMark, 0x539, 0xffffffff, 0, ""}));
  EXPECT_EQ(IptSem("-j CONNMARK --save-mark").action,
            (Action{ActionKind::kSaveConnmark, 0xffffffff, 0xffffffff, 0, ""}));
  EXPECT_EQ(IptSem("-p tcp -j TPROXY --tproxy-mark 1337/0xffffffff --on-port 15006").action,
            (Action{ActionKind::kTproxy, 15006, 1337, 0xffffffff, ""}));
  EXPECT_EQ(IptSem("-j CT --notrack").action.kind, ActionKind::kNotrack);
  EXPECT_EQ(IptSem("-g ISTIO_X").action, (Action{ActionKind::kGoto, 0, 0, 0, "ISTIO_X"}));
  EXPECT_EQ(IptSem("-j REJECT --reject-with icmp-port-unreachable").action,
            IptSem("-j REJECT").action);
  const auto ct = IptSem("-p tcp -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT");
  EXPECT_EQ(ct.matches[1], (Match{MatchKind::kCtState, false, 6, 0, ""}));
  const auto range = IptSem("-p udp --sport 1000:2000 -j ACCEPT");
  EXPECT_EQ(range.matches[1], (Match{MatchKind::kSrcPort, false, 1000, 2000, ""}));
  const auto owner = IptSem("-m owner ! --uid-owner 1337 -m owner --gid-owner 7 -j RETURN");
  EXPECT_EQ(owner.matches[0], (Match{MatchKind::kSocketUid, true, 1337, 0, ""}));
  EXPECT_EQ(owner.matches[1], (Match{MatchKind::kSocketGid, false, 7, 0, ""}));
  const auto comment = ParseIptablesRuleSpec("-m comment --comment \"a b\" -j ACCEPT", {});
  ASSERT_TRUE(comment.ok());
  EXPECT_EQ(comment->comment, "a b");
  EXPECT_TRUE(comment->sem.matches.empty());
}

TEST(NftRuleText, UnknownTokensNeverFail) {
  for (std::string_view text :
       {"", "}", "{", "meta", "ct", "tcp dport", "ip daddr", "redirect to", "tproxy to", "mark and",
        "foo bar baz accept", "\"", "ct mark set", "tcp flags & (syn|ack) == syn counter drop"}) {
    const auto rule = ParseNftRuleText(text, Family::kInet);
    EXPECT_TRUE(rule.ok()) << text;
  }
  // A port set with a service name is not modelled (numeric port sets are: a kSet lookup).
  const auto sem = NftSem("tcp dport != { 53, domain } skuid 1337 counter accept");
  ASSERT_EQ(sem.matches.size(), 3u);
  EXPECT_EQ(sem.matches[0], (Match{MatchKind::kProtocol, false, 6, 0, ""}));
  EXPECT_EQ(sem.matches[2].kind, MatchKind::kUnknown);
  EXPECT_EQ(sem.matches[2].text, "tcp dport != { 53, domain }");
  const auto numeric = NftSem("tcp dport != { 53, 15008 } skuid 1337 counter accept");
  ASSERT_EQ(numeric.matches.size(), 3u);
  EXPECT_EQ(numeric.matches[1].kind, MatchKind::kSet);
  EXPECT_EQ(numeric.matches[1].elements, (std::vector<std::string>{"53", "15008"}));
}

TEST(NftRuleText, HandleCounterAndComment) {
  const auto rule = ParseNftRuleText(
      "meta l4proto tcp counter packets 3 bytes 180 accept comment \"x y\" # handle 12",
      Family::kInet);
  ASSERT_TRUE(rule.ok());
  EXPECT_TRUE(rule->has_counter);
  EXPECT_EQ(rule->handle, 12u);
  EXPECT_EQ(rule->comment, "x y");
  EXPECT_EQ(rule->sem.action.kind, ActionKind::kAccept);
}

// The equivalences the analysis relies on: iptables and nft spellings of the same rule.
TEST(Equivalence, IptablesAndNftSpellingsCompareEqual) {
  const std::vector<std::pair<std::string_view, std::string_view>> pairs = {
      {"-j CONNMARK --set-xmark 0x111/0xfff", "ct mark set ct mark & 0xfffff000 |  0x111"},
      {"-j CONNMARK --set-xmark 0x111/0xfff", "ct mark set ct mark & 0xfffff111 | 0x00000111"},
      {"-j CONNMARK --set-xmark 0x111/0xfff", "ct mark set ct mark xor 0x111 and 0xfffff000"},
      {"-j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff",
       "meta mark set ct mark"},
      {"-j CONNMARK --save-mark", "ct mark set mark"},
      {"-j CT --zone 1", "ct zone set 1"},
      {"-j REDIRECT --to-ports 15006", "redirect to :15006"},
      {"-j REDIRECT --to-port 15006", "redirect to :15006"},
      {"-m mark --mark 0x539/0xfff", "meta mark & 0xfff == 0x539"},
      {"-m mark --mark 0x539/0xfff", "mark and 0xfff == 0x539"},
      {"-m mark ! --mark 0x539/0xfff", "meta mark & 0x00000fff != 0x00000539"},
      {"-m mark --mark 1337", "mark 1337"},
      {"-m connmark --mark 0x111/0xfff", "ct mark and 0xfff == 0x111"},
      {"-s 169.254.7.127", "ip saddr 169.254.7.127"},
      {"! -d ::1/128", "ip6 daddr != ::1"},
      {"-p tcp", "meta l4proto tcp"},
      {"-p udp -m udp --dport 53", "udp dport 53"},
      {"-p tcp --dport 53", "meta l4proto tcp tcp dport 53"},
      {"-p tcp -m tcp ! --dport 15008", "tcp dport != 15008"},
      {"! -o lo", "oifname != lo"},
      {"! -o lo", "oifname != \"lo\""},
      {"-i eth+", "iifname \"eth*\""},
      {"-m set --match-set istio-inpod-probes-v4 dst", "ip daddr @istio-inpod-probes-v4"},
      {"-j SNAT --to-source 169.254.7.127", "snat to 169.254.7.127"},
      {"-j SNAT --to-source 169.254.7.127", "snat ip to 169.254.7.127"},
      {"-m owner --uid-owner 1000", "skuid 1000"},
      {"-m owner --gid-owner 1000", "meta skgid 1000"},
      {"-m conntrack --ctstate RELATED,ESTABLISHED", "ct state related,established"},
      {"-m conntrack ! --ctstate RELATED,ESTABLISHED", "ct state != established | related"},
      {"-m addrtype --dst-type LOCAL", "fib daddr type local"},
      {"-j MARK --set-mark 1338", "meta mark set 1338"},
      {"-p tcp -j TPROXY --tproxy-mark 1337/0xffffffff --on-port 15006",
       "meta l4proto tcp tproxy ip to :15006 meta mark set 1337 counter accept"},
      {"-j ACCEPT", "counter accept"},
      {"-j ISTIO_PRERT", "jump ISTIO_PRERT"},
      {"-j DNAT --to-destination 10.0.0.1:80", "dnat ip to 10.0.0.1:80"},
      {"-j MASQUERADE", "masquerade"},
      {"-j CT --notrack", "notrack"},
  };
  for (const auto& [ipt, nft] : pairs) {
    EXPECT_EQ(IptSem(ipt, ipt.find("::") != std::string_view::npos ? Family::kIpv6 : Family::kIpv4),
              NftSem(nft))
        << ipt << "  <->  " << nft;
  }
}

// --- iptables text ------------------------------------------------------------------------------

TEST(IptablesText, BuiltinChainsInsertAndPolicies) {
  const auto tables = ParseIpt(
      "iptables-save\n* nat\n:POSTROUTING DROP [1:2]\n-N ISTIO_POSTRT\n"
      "-A POSTROUTING -j RETURN\n-I POSTROUTING 1 -j ISTIO_POSTRT\n"
      "-I POSTROUTING 2 -p tcp -j ACCEPT\nCOMMIT\n");
  ASSERT_EQ(tables.size(), 1u);
  const Table& nat = tables[0];
  ASSERT_EQ(nat.chains.size(), 5u);
  EXPECT_EQ(nat.chains[0].name, "PREROUTING");
  EXPECT_EQ(nat.chains[4].name, "ISTIO_POSTRT");
  const Chain* post = nat.FindChain("POSTROUTING");
  ASSERT_NE(post, nullptr);
  EXPECT_TRUE(post->is_base);
  EXPECT_EQ(post->hook, "postrouting");
  EXPECT_EQ(post->priority, 100);
  EXPECT_EQ(post->type, "nat");
  EXPECT_EQ(post->policy, "drop");
  ASSERT_EQ(post->rules.size(), 3u);
  EXPECT_EQ(post->rules[0].sem.action.text, "ISTIO_POSTRT");
  EXPECT_EQ(post->rules[1].sem.action.kind, ActionKind::kAccept);
  EXPECT_EQ(post->rules[2].sem.action.kind, ActionKind::kReturn);
  EXPECT_FALSE(nat.FindChain("ISTIO_POSTRT")->is_base);
}

TEST(IptablesText, MangleOutputIsRouteAndRawPriority) {
  const auto tables = ParseIpt("*mangle\nCOMMIT\n*raw\nCOMMIT\n");
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0].FindChain("OUTPUT")->type, "route");
  EXPECT_EQ(tables[0].FindChain("OUTPUT")->priority, -150);
  EXPECT_EQ(tables[1].FindChain("PREROUTING")->priority, -300);
}

TEST(IptablesText, BadLineIsAnError) {
  EXPECT_FALSE(
      ParseIptablesText("*nat\n-A\nCOMMIT\n", Backend::kIptablesLegacy, Family::kIpv4).ok());
  EXPECT_FALSE(
      ParseIptablesText("*nat\nfrobnicate\n", Backend::kIptablesLegacy, Family::kIpv4).ok());
}

TEST(IptablesText, SplitsIpv6Golden) {
  const auto [v4, v6] = golden::SplitIptablesGolden("a\n* mangle\nx\n* nat\ny\n* mangle\nz\n");
  EXPECT_EQ(v4, "a\n* mangle\nx\n* nat\ny\n");
  EXPECT_EQ(v6, "* mangle\nz\n");
}

// --- nft text -----------------------------------------------------------------------------------

TEST(NftText, ScriptWithSetsElementsAndInsert) {
  const auto tables = ParseNft(
      "add table inet t\nflush table inet t\n"
      "add set inet t s4 { type ipv4_addr ; comment \"pods\" ; }\n"
      "add element inet t s4 { 10.0.0.5 comment \"uid-1\", 10.0.0.6 }\n"
      "add chain inet t post { type nat hook postrouting priority 100 ; }\n"
      "add rule inet t post meta l4proto tcp ip daddr @s4 counter snat to 169.254.7.127\n"
      "insert rule inet t post counter accept\n"
      "insert rule inet t post index 1 counter drop\n");
  ASSERT_EQ(tables.size(), 1u);
  const Table& t = tables[0];
  EXPECT_EQ(t.backend, Backend::kNft);
  EXPECT_EQ(t.family, Family::kInet);
  ASSERT_EQ(t.sets.size(), 1u);
  EXPECT_EQ(t.sets[0].key_type, "ipv4_addr");
  EXPECT_EQ(t.sets[0].comment, "pods");
  EXPECT_EQ(t.sets[0].elements, (std::vector<std::string>{"10.0.0.5", "10.0.0.6"}));
  const Chain* post = t.FindChain("post");
  ASSERT_NE(post, nullptr);
  EXPECT_TRUE(post->is_base);
  EXPECT_EQ(post->priority, 100);
  ASSERT_EQ(post->rules.size(), 3u);
  EXPECT_EQ(post->rules[0].sem.action.kind, ActionKind::kAccept);
  EXPECT_EQ(post->rules[1].sem.action.kind, ActionKind::kDrop);
  EXPECT_EQ(post->rules[2].sem.action, (Action{ActionKind::kSnat, 0, 0, 0, "169.254.7.127"}));
}

TEST(NftText, BlockSyntax) {
  const auto tables = ParseNft(
      "# Warning: table ip nat is managed by iptables-nft, do not touch!\n"
      "table ip nat {\n\tset s {\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.1,\n"
      "\t\t\t10.0.0.2 }\n\t}\n\n"
      "\tchain PREROUTING {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n"
      "\t\tcounter packets 0 bytes 0 jump ISTIO_PRERT # handle 4\n\t}\n}\n");
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].family, Family::kIpv4);
  ASSERT_EQ(tables[0].sets.size(), 1u);
  EXPECT_EQ(tables[0].sets[0].elements.size(), 2u);
  const Chain* pre = tables[0].FindChain("PREROUTING");
  ASSERT_NE(pre, nullptr);
  EXPECT_EQ(pre->priority, -100);
  EXPECT_EQ(pre->hook, "prerouting");
  EXPECT_EQ(pre->policy, "accept");
  ASSERT_EQ(pre->rules.size(), 1u);
  EXPECT_EQ(pre->rules[0].handle, 4u);
}

// --- Ambient goldens ----------------------------------------------------------------------------

struct AmbientParse {
  std::vector<Table> ipt_v4;
  std::vector<Table> ipt_v6;
  std::vector<Table> nft;
};

AmbientParse ParseAmbientCase(const std::string& name) {
  AmbientParse out;
  const auto [v4, v6] = golden::SplitIptablesGolden(
      golden::ReadText(golden::AmbientDir("iptables") + name + ".golden"));
  out.ipt_v4 = ParseIpt(v4, Family::kIpv4);
  if (!v6.empty()) out.ipt_v6 = ParseIpt(v6, Family::kIpv6);
  out.nft = ParseNft(golden::ReadText(golden::AmbientDir("nftables") + name + ".golden"));
  return out;
}

TEST(AmbientGoldens, AllParseWithoutUnknown) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  int files = 0;
  for (const auto& name : golden::AllAmbientCases()) {
    const AmbientParse p = ParseAmbientCase(name);
    std::string where;
    EXPECT_FALSE(golden::AnyUnknown(p.ipt_v4, &where)) << name << " iptables v4: " << where;
    EXPECT_FALSE(golden::AnyUnknown(p.ipt_v6, &where)) << name << " iptables v6: " << where;
    EXPECT_FALSE(golden::AnyUnknown(p.nft, &where)) << name << " nft: " << where;
    EXPECT_FALSE(p.ipt_v4.empty()) << name;
    EXPECT_FALSE(p.nft.empty()) << name;
    EXPECT_EQ(p.ipt_v6.empty(), name.find("_ipv6") == std::string::npos) << name;
    files += 2;
  }
  EXPECT_EQ(files, 28);
}

TEST(AmbientGoldens, IptablesAndNftAgreePerChainRole) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  for (const auto& name : golden::AllAmbientCases()) {
    if (name.starts_with("hostprobe")) continue;  // different design per backend, tested below
    const AmbientParse p = ParseAmbientCase(name);
    // nft rules with ip6 addresses belong to the ip6tables part, family-neutral ones to both.
    EXPECT_EQ(golden::ByRole(p.ipt_v4, AddrFilter::kAll),
              golden::ByRole(p.nft, AddrFilter::kNoIpv6))
        << name << " (ipv4)";
    if (!p.ipt_v6.empty()) {
      EXPECT_EQ(golden::ByRole(p.ipt_v6, AddrFilter::kAll),
                golden::ByRole(p.nft, AddrFilter::kNoIpv4))
          << name << " (ipv6)";
    }
  }
}

// Host probe SNAT: iptables matches "socket exists", nft matches kubelet's uid instead, and nft
// puts the rule straight into its base chain. Everything else must agree.
TEST(AmbientGoldens, HostprobeBackendsDifferOnlyInOwnerMatch) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  const AmbientParse p = ParseAmbientCase("hostprobe_ipv6");
  const auto strip_owner = [](RuleSemantics sem) {
    std::erase_if(sem.matches, [](const Match& m) {
      return m.kind == MatchKind::kSocketExists || m.kind == MatchKind::kSocketUid;
    });
    return sem;
  };
  const Chain* ipt4 = p.ipt_v4.at(0).FindChain("ISTIO_POSTRT");
  const Chain* ipt6 = p.ipt_v6.at(0).FindChain("ISTIO_POSTRT");
  const Chain* nft = p.nft.at(0).FindChain("postrouting");
  ASSERT_TRUE(ipt4 && ipt6 && nft);
  ASSERT_EQ(nft->rules.size(), 2u);
  ASSERT_EQ(ipt4->rules.size(), 1u);
  ASSERT_EQ(ipt6->rules.size(), 1u);
  EXPECT_EQ(strip_owner(ipt4->rules[0].sem), strip_owner(nft->rules[0].sem));
  // The nft v6 rule uses the test-only SNAT address, iptables the production default.
  RuleSemantics nft6 = strip_owner(nft->rules[1].sem);
  RuleSemantics ipt6_sem = strip_owner(ipt6->rules[0].sem);
  EXPECT_EQ(nft6.matches, ipt6_sem.matches);
  EXPECT_EQ(nft6.action.kind, ActionKind::kSnat);
  EXPECT_EQ(ipt6_sem.action.text, "fd16:9254:7127:1337:ffff:ffff:ffff:ffff");
  EXPECT_EQ(p.ipt_v4[0].FindChain("POSTROUTING")->rules.at(0).sem.action.text, "ISTIO_POSTRT");
  EXPECT_EQ(nft->rules[0].sem.matches.back(), (Match{MatchKind::kSocketUid, false, 1000, 0, ""}));
}

TEST(ObservedCorpus, SaveOutputsAndRestoreInputMatchGolden) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  const std::string observed = corpus::CorpusPath("netfilter-observed/").string();
  const auto expected =
      ParseIpt(golden::ReadText(golden::AmbientDir("iptables") + "default.golden"));
  ASSERT_EQ(expected.size(), 3u);
  for (const char* file :
       {"flip-iptables-nft-save.txt", "flip-iptables-legacy-save.txt", "default.restore"}) {
    std::string why;
    EXPECT_TRUE(golden::TablesEqual(ParseIpt(golden::ReadText(observed + file)), expected, &why))
        << file << ": " << why;
  }
}

TEST(ObservedCorpus, NftListingMatchesNativeScript) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  const auto listed = ParseNft(golden::ReadText(
      corpus::CorpusPath("netfilter-observed/native-nft-list-ruleset-default_ipv6.txt")));
  const auto script =
      ParseNft(golden::ReadText(golden::AmbientDir("nftables") + "default_ipv6.golden"));
  std::string why;
  EXPECT_TRUE(golden::TablesEqual(listed, script, &why)) << why;
}

// nft's view of the iptables-nft copy: everything but the untranslatable "xt target CT" agrees.
TEST(ObservedCorpus, NftListingOfIptablesNftCopy) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  const auto listed = ParseNft(
      golden::ReadText(corpus::CorpusPath("netfilter-observed/flip-nft-list-ruleset.txt")));
  const auto expected =
      ParseIpt(golden::ReadText(golden::AmbientDir("iptables") + "default.golden"));
  ASSERT_EQ(listed.size(), 3u);
  int compared = 0;
  for (const auto& table : listed) {
    const auto ipt = std::find_if(expected.begin(), expected.end(),
                                  [&](const Table& t) { return t.name == table.name; });
    ASSERT_NE(ipt, expected.end()) << table.name;
    for (const auto& chain : table.chains) {
      const Chain* ipt_chain = ipt->FindChain(chain.name);
      ASSERT_NE(ipt_chain, nullptr) << chain.name;
      ASSERT_EQ(chain.rules.size(), ipt_chain->rules.size()) << chain.name;
      EXPECT_EQ(chain.hook, ipt_chain->hook);
      EXPECT_EQ(chain.priority, ipt_chain->priority) << table.name << "/" << chain.name;
      for (size_t i = 0; i < chain.rules.size(); ++i) {
        const auto& sem = chain.rules[i].sem;
        if (sem.action.kind == ActionKind::kUnknown) {
          EXPECT_EQ(sem.action.text, "xt target CT");
          EXPECT_EQ(sem.matches, ipt_chain->rules[i].sem.matches);
          continue;
        }
        EXPECT_EQ(sem, ipt_chain->rules[i].sem) << table.name << "/" << chain.name << " #" << i;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 16);
}

// --- Sidecar goldens and round trips ------------------------------------------------------------

std::vector<std::filesystem::path> GoldenFiles(const std::string& relative_dir) {
  std::vector<std::filesystem::path> out;
  const std::filesystem::path dir = corpus::CorpusPath("istio-golden/" + relative_dir);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SidecarGoldens, ParseWithoutCrash) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  size_t files = 0;
  for (const char* dir : {"tools/istio-iptables/pkg/capture/testdata", "cni/pkg/plugin/testdata"}) {
    for (const auto& path : GoldenFiles(dir)) {
      const auto [v4, v6] = golden::SplitIptablesGolden(golden::ReadText(path));
      EXPECT_FALSE(ParseIpt(v4).empty() && !v4.empty()) << path;
      ParseIpt(v6, Family::kIpv6);
      ++files;
    }
  }
  for (const auto& path : GoldenFiles("tools/istio-nftables/pkg/capture/testdata")) {
    ParseNft(golden::ReadText(path));
    ++files;
  }
  EXPECT_EQ(files, 27u + 9u + 28u);
}

void ExpectIptablesRoundTrip(const std::string& text, Family family, const std::string& what) {
  const auto first = ParseIpt(text, family);
  const std::string rendered = RenderIptablesRestore(first);
  const auto second = ParseIpt(rendered, family);
  std::string why;
  EXPECT_TRUE(golden::TablesEqual(first, second, &why)) << what << ": " << why << "\n" << rendered;
}

void ExpectNftRoundTrip(const std::string& text, const std::string& what) {
  const auto first = ParseNft(text);
  const std::string rendered = RenderNftScript(first);
  const auto second = ParseNft(rendered);
  std::string why;
  EXPECT_TRUE(golden::TablesEqual(first, second, &why)) << what << ": " << why << "\n" << rendered;
}

TEST(RenderRoundTrip, AmbientGoldens) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  for (const auto& name : golden::AllAmbientCases()) {
    const auto [v4, v6] = golden::SplitIptablesGolden(
        golden::ReadText(golden::AmbientDir("iptables") + name + ".golden"));
    ExpectIptablesRoundTrip(v4, Family::kIpv4, name);
    if (!v6.empty()) ExpectIptablesRoundTrip(v6, Family::kIpv6, name + " v6");
    ExpectNftRoundTrip(golden::ReadText(golden::AmbientDir("nftables") + name + ".golden"), name);
  }
}

TEST(RenderRoundTrip, SidecarGoldens) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  for (const char* dir : {"tools/istio-iptables/pkg/capture/testdata", "cni/pkg/plugin/testdata"}) {
    for (const auto& path : GoldenFiles(dir)) {
      const auto [v4, v6] = golden::SplitIptablesGolden(golden::ReadText(path));
      ExpectIptablesRoundTrip(v4, Family::kIpv4, path.string());
      if (!v6.empty()) ExpectIptablesRoundTrip(v6, Family::kIpv6, path.string() + " v6");
    }
  }
  for (const auto& path : GoldenFiles("tools/istio-nftables/pkg/capture/testdata")) {
    ExpectNftRoundTrip(golden::ReadText(path), path.string());
  }
}

}  // namespace
}  // namespace ad
