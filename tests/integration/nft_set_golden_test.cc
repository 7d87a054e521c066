// Set lookups and verdict maps, end to end: a ruleset with named and anonymous sets over many
// key types and a kube-proxy-nftables-like table with named and anonymous vmaps is loaded with
// the real `nft -f` into a throwaway netns, read back in-process, and our rendering of every rule
// (and every named set/map) is compared with what `nft list ruleset` prints there.
//
// Normalized on nft's side: "counter packets N bytes M" -> "counter", runs of blanks. Intentional
// differences, kept out of this ruleset and asserted separately below:
//  - match order: ours is canonical (RuleSemantics order), nft keeps the order rules were written
//    in; the rules here are written in canonical order.
//  - a one-element anonymous set: nft itself turns it into a plain compare when loading, so there
//    is nothing to inline.
//  - named set elements: nft prints them in the kernel's (hash) order, we sort them by value as
//    nft does for anonymous sets, so that two reads of the same set print the same; compared
//    here as sets of elements.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "model/rule.h"
#include "netns_test_util.h"
#include "sources/netfilter/readers.h"
#include "sources/netns/netns_guard.h"

namespace ad {
namespace {

using testing::IsRoot;
using testing::ScopedNetns;

// Written in our canonical match order (see the header comment).
constexpr char kRuleset[] = R"(table ip kube-proxy {
  comment "rules for kube-proxy"
  set cluster-ips { type ipv4_addr; comment "Active ClusterIPs"; }
  set nodeport-ips { type ipv4_addr; }
  map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"; }
  map service-nodeports { type inet_proto . inet_service : verdict; }
  map no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict; }
  chain mark-for-masquerade { meta mark set meta mark | 0x00004000; }
  chain masquerading {
    meta mark & 0x00004000 == 0x00000000 return
    meta mark set meta mark ^ 0x00004000
    masquerade
  }
  chain service-ULMVA6XW-ns1/svc1/tcp/p80 {
    ip saddr != 10.0.0.0/8 ip daddr 172.30.0.41 tcp dport 80 jump mark-for-masquerade
    numgen random mod 2 vmap { 0 : goto endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80, 1 : goto endpoint-ZYX-ns1/svc1/tcp/p80__10.180.0.2/80 }
  }
  chain endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 { meta l4proto tcp dnat to 10.180.0.1:80; }
  chain endpoint-ZYX-ns1/svc1/tcp/p80__10.180.0.2/80 { meta l4proto tcp dnat to 10.180.0.2:80; }
  chain services {
    ip daddr . meta l4proto . th dport vmap @service-ips
    ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
    ip daddr vmap { 10.0.0.1 : goto service-ULMVA6XW-ns1/svc1/tcp/p80, 10.0.0.2 : drop }
  }
  chain service-endpoints-check { ip daddr . meta l4proto . th dport vmap @no-endpoint-services; }
  chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; ct state new jump services; }
  chain filter-forward { type filter hook forward priority -110; policy accept; ct state new jump service-endpoints-check; }
}
add element ip kube-proxy cluster-ips { 172.30.0.41 }
add element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80, 172.30.0.42 . udp . 53 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }
add element ip kube-proxy service-nodeports { tcp . 30080 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }
add element ip kube-proxy no-endpoint-services { 172.30.0.43 . tcp . 80 : drop }
table inet mixed {
  set ports { type inet_service; elements = { 15008, 443 }; }
  set ifs { type ifname; elements = { "eth0", "lo" }; }
  set marks { type mark; elements = { 0x00000539, 0x00000002 }; }
  set users { type uid; elements = { 1337, 0 }; }
  set pods { type ipv6_addr; elements = { fd00::7 }; }
  set nets { type ipv4_addr; flags interval; elements = { 10.0.0.0/8, 192.168.0.0-192.168.0.9 }; }
  set pairs { type ipv4_addr . inet_service; elements = { 10.0.0.1 . 80 }; }
  set ranges { type ipv4_addr . inet_service; flags interval; elements = { 10.0.0.0/8 . 80-90, 192.168.0.1 . 443 }; }
  chain c {
    tcp dport { 8080, 9090 } counter accept
    tcp dport @ports accept
    udp sport { 53, 5353 } drop
    tcp dport { 1000-2000, 3000 } accept
    ip saddr { 10.0.0.1, 10.0.0.2 } accept
    ip6 daddr { fd00::1, fd00::2 } accept
    ip6 saddr @pods accept
    ip daddr @nets accept
    ip daddr != @nets drop
    ip daddr { 10.0.0.0/8, 192.168.0.0-192.168.0.9 } accept
    iifname { "eth0", "veth*" } accept
    oifname @ifs accept
    iif { "lo", "adt-v0" } accept
    meta mark { 0x00000001, 0x00000539 } accept
    meta mark @marks accept
    ct mark { 0x00000111, 0x00000222 } accept
    meta skuid { 0, 1337 } accept
    meta skuid @users accept
    meta l4proto { tcp, udp } accept
    ip saddr . tcp dport { 10.0.0.1 . 80, 10.0.0.2 . 443 } accept
    ip saddr . th dport @pairs accept
    ip daddr . tcp dport @ranges accept
    tcp dport vmap { 22 : accept, 23 : drop }
    meta l4proto . th dport vmap { tcp . 22 : accept, udp . 53 : jump dns }
    ip daddr vmap { 10.0.0.0/8 : accept, 192.168.0.1 : drop }
  }
  chain dns { return; }
}
)";

using testing::Capture;

std::string Trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::string NormalizeNft(std::string line) {
  line = std::regex_replace(line, std::regex(" packets [0-9]+ bytes [0-9]+"), "");
  line = std::regex_replace(line, std::regex("[ \t]+"), " ");
  return Trim(line);
}

// What `nft list ruleset` prints, by "<family> <table>": rules per chain and each named set's
// type line and elements line.
struct NftListing {
  std::map<std::string, std::vector<std::string>> rules;  // "<family> <table> <chain>"
  std::map<std::string, std::string> set_types;           // "<family> <table> <set>"
  std::map<std::string, std::string> set_elements;        // "{ a, b }" as printed
  std::map<std::string, std::string> set_flags;           // "interval"
};

NftListing ParseListing(const std::string& text) {
  NftListing out;
  std::istringstream in(text);
  std::string line, table, block;
  bool in_set = false;
  while (std::getline(in, line)) {
    const std::string t = NormalizeNft(line);
    if (t.empty() || t == "}") {
      if (t == "}") in_set = false, block.clear();
      continue;
    }
    if (t.rfind("table ", 0) == 0) {
      table = t.substr(6, t.size() - 8);  // "table ip kube-proxy {" -> "ip kube-proxy"
      continue;
    }
    if (t.rfind("chain ", 0) == 0 || t.rfind("set ", 0) == 0 || t.rfind("map ", 0) == 0) {
      in_set = t[0] != 'c';
      const size_t start = t.find(' ') + 1;
      block = table + " " + t.substr(start, t.size() - start - 2);
      if (!in_set) out.rules[block];
      continue;
    }
    if (block.empty()) continue;  // table comment
    if (in_set) {
      if (t.rfind("type ", 0) == 0) out.set_types[block] = t.substr(5);
      if (t.rfind("flags ", 0) == 0) out.set_flags[block] = t.substr(6);
      if (t.rfind("elements = ", 0) == 0) {
        std::string elements = t.substr(11);
        // nft wraps long element lists over several lines.
        while (elements.back() != '}' && std::getline(in, line))
          elements += " " + NormalizeNft(line);
        out.set_elements[block] = elements;
      }
      continue;
    }
    if (t.rfind("type ", 0) == 0) continue;  // base chain hook line
    out.rules[block].push_back(t);
  }
  return out;
}

// "{ a, b : goto x }" -> {"a", "b : goto x"}; element texts never contain ", ".
std::vector<std::string> SplitElements(const std::string& printed) {
  std::vector<std::string> out;
  if (printed.size() < 4) return out;
  const std::string body = printed.substr(2, printed.size() - 4);
  size_t start = 0;
  while (true) {
    const size_t comma = body.find(", ", start);
    out.push_back(body.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 2;
  }
}

std::vector<std::string> SortedElements(std::vector<std::string> elements) {
  std::sort(elements.begin(), elements.end());
  return elements;
}

class NftSetGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsRoot()) GTEST_SKIP() << "needs root to create network namespaces";
    if (ad::testing::Run("nft --version") != 0) GTEST_SKIP() << "nft binary not installed";
    netns_.emplace("nftset");
    ASSERT_TRUE(netns_->ok()) << "ip netns add " << netns_->name();
  }

  void Load(const std::string& script) {
    ASSERT_EQ(netns_->ExecWithInput("nft -f -", script), 0) << script;
  }

  std::vector<Table> Read() {
    std::optional<Result<std::vector<Table>>> tables;
    std::thread worker([&] {
      auto guard = NetnsGuard::Enter(netns_->path());
      if (!guard) {
        tables.emplace(guard.error());
        return;
      }
      tables.emplace(ReadNfTables(ReadLimits{}));
    });
    worker.join();
    EXPECT_TRUE(tables && tables->ok()) << (tables ? tables->error().message : "no result");
    return tables && tables->ok() ? std::move(*tables).value() : std::vector<Table>{};
  }

  std::string Listing() { return Capture("ip netns exec " + netns_->name() + " nft list ruleset"); }

  std::optional<ScopedNetns> netns_;
};

TEST_F(NftSetGoldenTest, RulesAndSetsRenderAsNftListsThem) {
  // iif sets hold interface indexes; both sides print the names of this netns' interfaces.
  ASSERT_EQ(netns_->Exec("ip link add adt-v0 type veth peer name adt-v1"), 0);
  Load(kRuleset);
  const std::string listing = Listing();
  const NftListing nft = ParseListing(listing);
  const std::vector<Table> tables = Read();
  ASSERT_EQ(tables.size(), 2u) << listing;

  size_t rules_compared = 0;
  size_t sets_compared = 0;
  for (const Table& table : tables) {
    const std::string prefix = std::string(NftFamilyKeyword(table.family)) + " " + table.name;
    EXPECT_EQ(table.backend, Backend::kNft) << prefix;
    for (const Chain& chain : table.chains) {
      auto it = nft.rules.find(prefix + " " + chain.name);
      ASSERT_NE(it, nft.rules.end()) << prefix << " " << chain.name << "\n" << listing;
      std::vector<std::string> ours;
      for (const Rule& rule : chain.rules) ours.push_back(RenderRule(table, chain.name, rule));
      EXPECT_EQ(ours, it->second) << prefix << " chain " << chain.name;
      rules_compared += ours.size();
    }
    // Anonymous sets live inside their rules; only the named ones are table sets.
    std::vector<std::string> named;
    for (const NftSet& set : table.sets) {
      named.push_back(set.name);
      const std::string key = prefix + " " + set.name;
      EXPECT_FALSE(set.anonymous) << key;
      const std::string type = set.key_type + (set.data_type.empty() ? "" : " : " + set.data_type);
      EXPECT_EQ(type, nft.set_types.count(key) ? nft.set_types.at(key) : "<absent>") << key;
      EXPECT_EQ(set.interval ? "interval" : "",
                nft.set_flags.count(key) ? nft.set_flags.at(key) : "")
          << key;
      const std::string printed = nft.set_elements.count(key) ? nft.set_elements.at(key) : "";
      EXPECT_EQ(SortedElements(set.elements), SortedElements(SplitElements(printed))) << key;
      ++sets_compared;
    }
    for (const std::string& name : named) EXPECT_NE(name.rfind("__", 0), 0u) << name;
  }
  EXPECT_EQ(rules_compared, 40u);
  EXPECT_EQ(sets_compared, 13u);
}

TEST_F(NftSetGoldenTest, LookupsCarryTheirRealKeysAndVerdicts) {
  ASSERT_EQ(netns_->Exec("ip link add adt-v0 type veth peer name adt-v1"), 0);
  Load(kRuleset);
  const std::vector<Table> tables = Read();
  const Table* kube = nullptr;
  const Table* mixed = nullptr;
  for (const Table& t : tables) (t.name == "kube-proxy" ? kube : mixed) = &t;
  ASSERT_TRUE(kube && mixed);

  const Chain* services = kube->FindChain("services");
  ASSERT_TRUE(services && services->rules.size() == 3u);
  EXPECT_EQ(services->rules[0].sem.action.kind, ActionKind::kVerdictMap);
  EXPECT_EQ(services->rules[0].sem.action.text, "service-ips dst.l4proto.dport");
  EXPECT_EQ(services->rules[2].sem.action.text, "{} dst");
  EXPECT_EQ(services->rules[2].sem.action.elements,
            (std::vector<std::string>{"10.0.0.1 : goto service-ULMVA6XW-ns1/svc1/tcp/p80",
                                      "10.0.0.2 : drop"}));

  // Named set elements come sorted by value (not text, not kernel order).
  std::map<std::string, std::vector<std::string>> elements;
  for (const NftSet& set : mixed->sets) elements[set.name] = set.elements;
  EXPECT_EQ(elements["ports"], (std::vector<std::string>{"443", "15008"}));
  EXPECT_EQ(elements["users"], (std::vector<std::string>{"0", "1337"}));
  EXPECT_EQ(elements["marks"], (std::vector<std::string>{"0x00000002", "0x00000539"}));
  EXPECT_EQ(elements["ifs"], (std::vector<std::string>{"\"eth0\"", "\"lo\""}));
  EXPECT_EQ(elements["nets"], (std::vector<std::string>{"10.0.0.0/8", "192.168.0.0-192.168.0.9"}));

  const Chain* c = mixed->FindChain("c");
  ASSERT_TRUE(c && !c->rules.empty());
  const Rule& first = c->rules[0];
  ASSERT_EQ(first.sem.matches.size(), 2u);
  EXPECT_EQ(first.sem.matches[0], (Match{MatchKind::kProtocol, false, 6, 0, ""}));
  EXPECT_EQ(first.sem.matches[1].text, "{} dport");
  EXPECT_EQ(first.sem.matches[1].elements, (std::vector<std::string>{"8080", "9090"}));
}

TEST_F(NftSetGoldenTest, EqualRulesOverDifferentAnonymousSetsCompareEqual) {
  // The kernel names the two anonymous sets __set0 and __set1; by meaning the rules are equal.
  Load(
      "table inet twins {\n"
      "  chain a {\n"
      "    tcp dport { 80, 443 } accept\n"
      "  }\n"
      "  chain b {\n"
      "    meta l4proto tcp th dport { 443, 80 } accept\n"
      "    tcp dport { 80, 444 } accept\n"
      "  }\n"
      "}\n");
  const std::vector<Table> tables = Read();
  ASSERT_EQ(tables.size(), 1u);
  const Chain* a = tables[0].FindChain("a");
  const Chain* b = tables[0].FindChain("b");
  ASSERT_TRUE(a && b && a->rules.size() == 1u && b->rules.size() == 2u);
  EXPECT_EQ(a->rules[0].sem, b->rules[0].sem);
  EXPECT_NE(a->rules[0].sem, b->rules[1].sem);
}

TEST_F(NftSetGoldenTest, MatchOrderIsCanonicalNotAsWritten) {
  // Intentional difference: the same rule written in another order prints in canonical order.
  Load(
      "table ip t {\n"
      "  chain c {\n"
      "    ip daddr 10.0.0.1 tcp dport { 80, 443 } ip saddr 10.0.0.2 drop\n"
      "  }\n"
      "}\n");
  const std::string listing = Listing();
  const std::vector<Table> tables = Read();
  ASSERT_EQ(tables.size(), 1u);
  const Chain* c = tables[0].FindChain("c");
  ASSERT_TRUE(c && c->rules.size() == 1u);
  EXPECT_NE(listing.find("ip daddr 10.0.0.1 tcp dport { 80, 443 } ip saddr 10.0.0.2 drop"),
            std::string::npos)
      << listing;
  EXPECT_EQ(RenderRule(tables[0], "c", c->rules[0]),
            "ip saddr 10.0.0.2 ip daddr 10.0.0.1 tcp dport { 80, 443 } drop");
}

}  // namespace
}  // namespace ad
