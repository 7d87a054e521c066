// ReadNfTables against real kernels: every Istio ambient golden loaded with nft / iptables-nft into
// a throwaway netns, read back in-process from a thread inside that netns.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lab/rules.h"
#include "model/rule.h"
#include "netns_test_util.h"
#include "shared_corpus.h"
#include "sources/netfilter/readers.h"
#include "sources/netns/netns_guard.h"
#include "text/rule_text.h"

namespace ad {
namespace {

// Istio's goldens; tests that load them skip first when the corpus is absent.
std::string GoldenDir() { return corpus::CorpusPath("istio-golden/cni/pkg/").string(); }

const std::vector<std::string> kCases = {"default",
                                         "default_ipv6",
                                         "dns_pod_disabled_and_on_globally",
                                         "dns_pod_disabled_and_on_globally_ipv6",
                                         "dns_pod_enabled_and_off_globally",
                                         "dns_pod_enabled_and_off_globally_ipv6",
                                         "hostprobe",
                                         "hostprobe_ipv6",
                                         "ingress",
                                         "ingress_and_virtual_interfaces",
                                         "ingress_and_virtual_interfaces_ipv6",
                                         "ingress_ipv6",
                                         "virtual_interfaces",
                                         "virtual_interfaces_ipv6"};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

using testing::Capture;

std::string WriteTemp(const std::string& text) {
  static std::atomic<int> counter{0};
  std::string path =
      "/tmp/adt-nft-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".in";
  std::ofstream(path) << text;
  return path;
}

// Splits an iptables golden into its iptables-restore and ip6tables-restore inputs: the 2-line
// command log is dropped, and the v6 input starts where the first table header repeats.
std::pair<std::string, std::string> SplitIptablesGolden(const std::string& golden) {
  std::istringstream in(golden);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  size_t start = 0;
  while (start < lines.size() && lines[start].rfind("*", 0) != 0) ++start;
  std::string first_header = start < lines.size() ? lines[start] : "";
  size_t split = lines.size();
  for (size_t i = start + 1; i < lines.size(); ++i) {
    if (lines[i] == first_header) {
      split = i;
      break;
    }
  }
  std::string v4, v6;
  for (size_t i = start; i < lines.size(); ++i) (i < split ? v4 : v6) += lines[i] + "\n";
  return {v4, v6};
}

std::string Describe(const Table& table) {
  std::string out = "table " + std::string(FamilyName(table.family)) + " " + table.name + " [" +
                    std::string(BackendName(table.backend)) + "]\n";
  for (const Chain& chain : table.chains) {
    out +=
        "  chain " + chain.name +
        (chain.is_base ? " (base " + chain.hook + " " + std::to_string(chain.priority) + ")" : "") +
        "\n";
    for (const Rule& rule : chain.rules) {
      out += "    " + RenderRule(table.backend, table.family, chain.name, rule) + "\n";
    }
  }
  return out;
}

std::string Describe(const std::vector<Table>& tables) {
  std::string out;
  for (const Table& t : tables) out += Describe(t);
  return out;
}

const Table* FindTable(const std::vector<Table>& tables, Family family, const std::string& name) {
  for (const Table& t : tables) {
    if (t.family == family && t.name == name) return &t;
  }
  return nullptr;
}

class NftReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root to create network namespaces";
    }
    static std::atomic<int> counter{0};
    netns_ = "adt-nft-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    ASSERT_EQ(ad::testing::Run("ip netns add " + netns_), 0) << "ip netns add " << netns_;
  }

  void TearDown() override {
    if (!netns_.empty()) {
      ad::testing::Run("ip netns del " + netns_);
    }
    for (const std::string& path : temp_files_) std::filesystem::remove(path);
  }

  std::string Exec(const std::string& command) const {
    return "ip netns exec " + netns_ + " " + command;
  }

  void LoadNft(const std::string& script) {
    std::string path = WriteTemp(script);
    temp_files_.push_back(path);
    ASSERT_EQ(ad::testing::Run(Exec("nft -f " + path)), 0) << script;
  }

  void Restore(const std::string& tool, const std::string& input) {
    std::string path = WriteTemp(input);
    temp_files_.push_back(path);
    ASSERT_EQ(ad::testing::Run(Exec(tool + " --noflush " + path)), 0) << input;
  }

  template <typename Fn>
  auto InNetns(Fn fn) -> decltype(fn()) {
    std::optional<decltype(fn())> out;
    std::string error;
    std::thread worker([&] {
      auto guard = NetnsGuard::Enter("/run/netns/" + netns_);
      if (!guard) {
        error = guard.error().message;
        return;
      }
      out.emplace(fn());
    });
    worker.join();
    if (!out) {
      ADD_FAILURE() << "entering netns failed: " << error;
      out.emplace(SourceError{SourceKind::kNetns, error, 0});
    }
    return std::move(*out);
  }

  std::vector<Table> ReadTables(const ReadLimits& limits = ReadLimits{}) {
    auto tables = InNetns([&] { return ReadNfTables(limits); });
    EXPECT_TRUE(tables.ok()) << tables.error().message;
    return tables.ok() ? std::move(tables).value() : std::vector<Table>{};
  }

  void LoadNftGolden(const std::string& name) {
    std::string golden = ReadFile(GoldenDir() + "nftables/testdata/" + name + ".golden");
    ASSERT_FALSE(golden.empty()) << name << " missing from the corpus";
    if (name.rfind("hostprobe", 0) == 0) {
      // The host sets are created by the agent's set manager, not by the golden transaction.
      golden =
          "add table inet istio-ambient-nat\n"
          "add set inet istio-ambient-nat istio-inpod-probes-v4 { type ipv4_addr; }\n"
          "add set inet istio-ambient-nat istio-inpod-probes-v6 { type ipv6_addr; }\n" +
          golden;
    }
    LoadNft(golden);
  }

  void LoadIptablesGolden(const std::string& name) {
    std::string golden = ReadFile(GoldenDir() + "iptables/testdata/" + name + ".golden");
    ASSERT_FALSE(golden.empty()) << name << " missing from the corpus";
    auto [v4, v6] = SplitIptablesGolden(golden);
    if (name.rfind("hostprobe", 0) == 0) {
      ASSERT_EQ(ad::testing::Run(Exec("ipset create istio-inpod-probes-v4 hash:ip")), 0);
      ASSERT_EQ(ad::testing::Run(Exec("ipset create istio-inpod-probes-v6 hash:ip family inet6")),
                0);
    }
    Restore("iptables-nft-restore", v4);
    if (!v6.empty()) {
      Restore("ip6tables-nft-restore", v6);
    }
  }

  std::string netns_;
  std::vector<std::string> temp_files_;
};

bool IsIstioChain(const std::string& name) {
  return name.rfind("ISTIO_", 0) == 0 || name.rfind("istio-", 0) == 0 || name == "PREROUTING" ||
         name == "OUTPUT" || name == "POSTROUTING" || name == "prerouting" || name == "output" ||
         name == "postrouting";
}

void ExpectNoUnknown(const std::vector<Table>& tables) {
  for (const Table& table : tables) {
    for (const Chain& chain : table.chains) {
      if (!IsIstioChain(chain.name)) continue;
      for (const Rule& rule : chain.rules) {
        for (const Match& m : rule.sem.matches) {
          EXPECT_NE(m.kind, MatchKind::kUnknown)
              << table.name << "/" << chain.name << ": " << m.text;
        }
        EXPECT_NE(rule.sem.action.kind, ActionKind::kUnknown)
            << table.name << "/" << chain.name << ": " << rule.sem.action.text;
      }
    }
  }
}

// --- expected semantics of the in-pod rules (same for iptables-nft and native nft) ----------

Match M(MatchKind kind, uint32_t value = 0, uint32_t value2 = 0, bool negated = false,
        std::string text = "") {
  return Match{kind, negated, value, value2, std::move(text)};
}

RuleSemantics Sem(std::vector<Match> matches, Action action) {
  RuleSemantics sem{std::move(matches), std::move(action)};
  Canonicalize(sem);
  return sem;
}

Action Redirect(uint32_t port) { return Action{ActionKind::kRedirect, port, port, 0, ""}; }
Action Verdict(ActionKind kind, std::string text = "") { return Action{kind, 0, 0, 0, text}; }

Match Proto(uint32_t p) { return M(MatchKind::kProtocol, p); }
Match NotMark539() { return M(MatchKind::kMark, 0x539, 0xfff, true); }
Match NotDst(const std::string& prefix) { return M(MatchKind::kDstAddr, 0, 0, true, prefix); }

std::vector<RuleSemantics> Sems(const Chain* chain) {
  std::vector<RuleSemantics> out;
  if (chain != nullptr) {
    for (const Rule& r : chain->rules) out.push_back(r.sem);
  }
  return out;
}

// nat output chain of default.golden (v4) in rule order.
std::vector<RuleSemantics> DefaultNatOutputV4() {
  return {
      Sem({Proto(6), M(MatchKind::kDstAddr, 0, 0, false, "169.254.7.127/32")},
          Verdict(ActionKind::kAccept)),
      Sem({M(MatchKind::kOutIface, 0, 0, true, "lo"), Proto(17), NotMark539(),
           M(MatchKind::kDstPort, 53, 53)},
          Redirect(15053)),
      Sem({NotDst("127.0.0.1/32"), Proto(6), M(MatchKind::kDstPort, 53, 53), NotMark539()},
          Redirect(15053)),
      Sem({Proto(6), M(MatchKind::kMark, 0x111, 0xfff)}, Verdict(ActionKind::kAccept)),
      Sem({NotDst("127.0.0.1/32"), M(MatchKind::kOutIface, 0, 0, false, "lo")},
          Verdict(ActionKind::kAccept)),
      Sem({NotDst("127.0.0.1/32"), Proto(6), NotMark539()}, Redirect(15001)),
  };
}

std::vector<RuleSemantics> DefaultNatPreroutingV4() {
  return {
      Sem({Proto(6), M(MatchKind::kSrcAddr, 0, 0, false, "169.254.7.127/32")},
          Verdict(ActionKind::kAccept)),
      Sem({NotDst("127.0.0.1/32"), Proto(6), M(MatchKind::kDstPort, 15008, 15008, true),
           NotMark539()},
          Redirect(15006)),
  };
}

std::vector<RuleSemantics> DefaultMangle(bool prerouting) {
  if (prerouting) {
    return {Sem({M(MatchKind::kMark, 0x539, 0xfff)},
                Action{ActionKind::kSetConnmark, 0x111, 0xfff, 0, ""})};
  }
  return {Sem({M(MatchKind::kConnmark, 0x111, 0xfff)},
              Action{ActionKind::kRestoreConnmark, 0xffffffff, 0xffffffff, 0, ""})};
}

std::vector<RuleSemantics> DefaultRaw(bool prerouting) {
  Action zone1{ActionKind::kCtZone, 1, 0, 0, ""};
  if (prerouting) {
    return {Sem({Proto(17), M(MatchKind::kSrcPort, 53, 53), NotMark539()}, zone1)};
  }
  return {
      Sem({Proto(17), M(MatchKind::kDstPort, 53, 53), M(MatchKind::kMark, 0x539, 0xfff)}, zone1)};
}

TEST_F(NftReaderTest, EmptyNetnsGivesEmptyVectors) {
  auto tables = ReadTables();
  EXPECT_TRUE(tables.empty()) << Describe(tables);
}

TEST_F(NftReaderTest, NativeDefaultGoldenDecodesToExpectedSemantics) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  LoadNftGolden("default");
  auto tables = ReadTables();
  const Table* nat = FindTable(tables, Family::kInet, "istio-ambient-nat");
  const Table* mangle = FindTable(tables, Family::kInet, "istio-ambient-mangle");
  const Table* raw = FindTable(tables, Family::kInet, "istio-ambient-raw");
  ASSERT_TRUE(nat && mangle && raw) << Describe(tables);
  EXPECT_EQ(nat->backend, Backend::kNft);
  EXPECT_EQ(Sems(nat->FindChain("istio-output")), DefaultNatOutputV4()) << Describe(*nat);
  EXPECT_EQ(Sems(nat->FindChain("istio-prerouting")), DefaultNatPreroutingV4()) << Describe(*nat);
  EXPECT_EQ(Sems(mangle->FindChain("istio-prerouting")), DefaultMangle(true)) << Describe(*mangle);
  EXPECT_EQ(Sems(mangle->FindChain("istio-output")), DefaultMangle(false)) << Describe(*mangle);
  EXPECT_EQ(Sems(raw->FindChain("istio-prerouting")), DefaultRaw(true)) << Describe(*raw);
  EXPECT_EQ(Sems(raw->FindChain("istio-output")), DefaultRaw(false)) << Describe(*raw);

  const Chain* prerouting = nat->FindChain("prerouting");
  ASSERT_NE(prerouting, nullptr);
  EXPECT_TRUE(prerouting->is_base);
  EXPECT_EQ(prerouting->hook, "prerouting");
  EXPECT_EQ(prerouting->priority, -100);
  EXPECT_EQ(prerouting->type, "nat");
  EXPECT_EQ(prerouting->policy, "accept");
  ASSERT_EQ(prerouting->rules.size(), 1u);
  EXPECT_EQ(prerouting->rules[0].sem, Sem({}, Verdict(ActionKind::kJump, "istio-prerouting")));
  EXPECT_TRUE(prerouting->rules[0].has_counter == false);
  const Chain* mangle_output = mangle->FindChain("output");
  ASSERT_NE(mangle_output, nullptr);
  EXPECT_EQ(mangle_output->type, "route");
  EXPECT_EQ(mangle_output->priority, -150);
  EXPECT_FALSE(nat->FindChain("istio-output")->is_base);
  for (const Rule& r : nat->FindChain("istio-output")->rules) {
    EXPECT_TRUE(r.has_counter);
    EXPECT_NE(r.handle, 0u);
  }
}

TEST_F(NftReaderTest, IptablesNftDefaultGoldenDecodesToExpectedSemantics) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  LoadIptablesGolden("default");
  auto tables = ReadTables();
  const Table* nat = FindTable(tables, Family::kIpv4, "nat");
  const Table* mangle = FindTable(tables, Family::kIpv4, "mangle");
  const Table* raw = FindTable(tables, Family::kIpv4, "raw");
  ASSERT_TRUE(nat && mangle && raw) << Describe(tables);
  for (const Table* t : {nat, mangle, raw}) {
    EXPECT_EQ(t->backend, Backend::kIptablesNft) << t->name;
  }
  EXPECT_EQ(Sems(nat->FindChain("ISTIO_OUTPUT")), DefaultNatOutputV4()) << Describe(*nat);
  EXPECT_EQ(Sems(nat->FindChain("ISTIO_PRERT")), DefaultNatPreroutingV4()) << Describe(*nat);
  EXPECT_EQ(Sems(mangle->FindChain("ISTIO_PRERT")), DefaultMangle(true)) << Describe(*mangle);
  EXPECT_EQ(Sems(mangle->FindChain("ISTIO_OUTPUT")), DefaultMangle(false)) << Describe(*mangle);
  EXPECT_EQ(Sems(raw->FindChain("ISTIO_PRERT")), DefaultRaw(true)) << Describe(*raw);
  EXPECT_EQ(Sems(raw->FindChain("ISTIO_OUTPUT")), DefaultRaw(false)) << Describe(*raw);
  const Chain* postrouting = nat->FindChain("POSTROUTING");
  if (postrouting != nullptr) {
    EXPECT_EQ(postrouting->priority, 100);
  }
  const Chain* nat_prerouting = nat->FindChain("PREROUTING");
  ASSERT_NE(nat_prerouting, nullptr);
  EXPECT_EQ(nat_prerouting->hook, "prerouting");
  EXPECT_EQ(nat_prerouting->priority, -100);
  for (const Rule& r : nat->FindChain("ISTIO_OUTPUT")->rules) EXPECT_TRUE(r.has_counter);
}

TEST_F(NftReaderTest, HostprobeGoldensDecodeSetAndSnat) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  LoadNftGolden("hostprobe_ipv6");
  auto tables = ReadTables();
  const Table* nat = FindTable(tables, Family::kInet, "istio-ambient-nat");
  ASSERT_NE(nat, nullptr) << Describe(tables);
  const Chain* post = nat->FindChain("postrouting");
  ASSERT_NE(post, nullptr);
  EXPECT_EQ(post->priority, 100);
  EXPECT_EQ(post->hook, "postrouting");
  ASSERT_EQ(post->rules.size(), 2u);
  EXPECT_EQ(post->rules[0].sem, Sem({Proto(6), M(MatchKind::kSocketUid, 1000),
                                     M(MatchKind::kSet, 0, 0, false, "istio-inpod-probes-v4 dst")},
                                    Action{ActionKind::kSnat, 0, 0, 0, "169.254.7.127"}));
  EXPECT_EQ(post->rules[1].sem,
            Sem({Proto(6), M(MatchKind::kSocketUid, 1000),
                 M(MatchKind::kSet, 0, 0, false, "istio-inpod-probes-v6 dst")},
                Action{ActionKind::kSnat, 0, 0, 0, "e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164"}));
  ASSERT_EQ(nat->sets.size(), 2u);
  EXPECT_EQ(nat->sets[0].key_type == "ipv4_addr" || nat->sets[0].key_type == "ipv6_addr", true);
}

TEST_F(NftReaderTest, IptablesHostprobeResolvesIpsetNames) {
  if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  LoadIptablesGolden("hostprobe_ipv6");
  auto tables = ReadTables();
  const Table* nat4 = FindTable(tables, Family::kIpv4, "nat");
  const Table* nat6 = FindTable(tables, Family::kIpv6, "nat");
  ASSERT_TRUE(nat4 && nat6) << Describe(tables);
  EXPECT_EQ(nat4->backend, Backend::kIptablesNft);
  EXPECT_EQ(nat6->backend, Backend::kIptablesNft);
  const Chain* post4 = nat4->FindChain("ISTIO_POSTRT");
  const Chain* post6 = nat6->FindChain("ISTIO_POSTRT");
  ASSERT_TRUE(post4 && post6) << Describe(tables);
  ASSERT_EQ(post4->rules.size(), 1u);
  EXPECT_EQ(post4->rules[0].sem, Sem({M(MatchKind::kSocketExists), Proto(6),
                                      M(MatchKind::kSet, 0, 0, false, "istio-inpod-probes-v4 dst")},
                                     Action{ActionKind::kSnat, 0, 0, 0, "169.254.7.127"}))
      << Describe(*nat4);
  ASSERT_EQ(post6->rules.size(), 1u);
  EXPECT_EQ(post6->rules[0].sem,
            Sem({M(MatchKind::kSocketExists), Proto(6),
                 M(MatchKind::kSet, 0, 0, false, "istio-inpod-probes-v6 dst")},
                Action{ActionKind::kSnat, 0, 0, 0, "fd16:9254:7127:1337:ffff:ffff:ffff:ffff"}))
      << Describe(*nat6);
  const Chain* postrouting = nat4->FindChain("POSTROUTING");
  ASSERT_NE(postrouting, nullptr);
  ASSERT_EQ(postrouting->rules.size(), 1u);
  EXPECT_EQ(postrouting->rules[0].sem.action, Verdict(ActionKind::kJump, "ISTIO_POSTRT"));
}

// Every golden, both loaders: right backend tag, nothing undecoded in any Istio chain, and the
// kernel view equals the text parser's view of the same golden, chain by chain.
class GoldenTest : public NftReaderTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
    NftReaderTest::SetUp();
  }
};

void CrossCheck(const std::vector<Table>& kernel, const std::vector<Table>& parsed) {
  for (const Table& p : parsed) {
    const Table* k = FindTable(kernel, p.family, p.name);
    ASSERT_NE(k, nullptr) << "missing table " << p.name << "\n" << Describe(kernel);
    for (const Chain& pc : p.chains) {
      const Chain* kc = k->FindChain(pc.name);
      if (pc.rules.empty() && kc == nullptr) continue;
      ASSERT_NE(kc, nullptr) << p.name << "/" << pc.name;
      EXPECT_EQ(Sems(kc), Sems(&pc)) << p.name << "/" << pc.name << "\nkernel:\n"
                                     << Describe(*k) << "parsed:\n"
                                     << Describe(p);
    }
  }
}

TEST_P(GoldenTest, NativeNft) {
  LoadNftGolden(GetParam());
  auto tables = ReadTables();
  ASSERT_FALSE(tables.empty());
  for (const Table& t : tables) {
    EXPECT_EQ(t.backend, Backend::kNft) << t.name;
    EXPECT_EQ(t.family, Family::kInet) << t.name;
  }
  ExpectNoUnknown(tables);
  auto parsed = ParseNftText(ReadFile(GoldenDir() + "nftables/testdata/" + GetParam() + ".golden"));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  CrossCheck(tables, *parsed);
}

TEST_P(GoldenTest, IptablesNft) {
  LoadIptablesGolden(GetParam());
  auto tables = ReadTables();
  ASSERT_FALSE(tables.empty());
  for (const Table& t : tables) {
    EXPECT_EQ(t.backend, Backend::kIptablesNft) << t.name;
  }
  ExpectNoUnknown(tables);
  auto [v4, v6] =
      SplitIptablesGolden(ReadFile(GoldenDir() + "iptables/testdata/" + GetParam() + ".golden"));
  auto parsed4 = ParseIptablesText(v4, Backend::kIptablesNft, Family::kIpv4);
  ASSERT_TRUE(parsed4.ok()) << parsed4.error().message;
  CrossCheck(tables, *parsed4);
  if (!v6.empty()) {
    auto parsed6 = ParseIptablesText(v6, Backend::kIptablesNft, Family::kIpv6);
    ASSERT_TRUE(parsed6.ok()) << parsed6.error().message;
    CrossCheck(tables, *parsed6);
  }
}

INSTANTIATE_TEST_SUITE_P(Ambient, GoldenTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param; });

TEST_F(NftReaderTest, TenThousandNativeRules) {
  std::string script = "add table inet big\nadd chain inet big c\n";
  for (int i = 0; i < 10000; ++i) {
    script += "add rule inet big c tcp dport " + std::to_string(1 + i) + " counter accept\n";
  }
  LoadNft(script);
  auto tables = ReadTables();
  const Table* big = FindTable(tables, Family::kInet, "big");
  ASSERT_NE(big, nullptr);
  const Chain* c = big->FindChain("c");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->rules.size(), 10000u);
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(c->rules[i].sem,
              Sem({Proto(6), M(MatchKind::kDstPort, 1u + i, 1u + i)}, Verdict(ActionKind::kAccept)))
        << i;
  }
}

TEST_F(NftReaderTest, RuleLimitTruncatesVisibly) {
  std::string script = "add table inet big\nadd chain inet big c\n";
  for (int i = 0; i < 50; ++i) script += "add rule inet big c counter accept\n";
  LoadNft(script);
  ReadLimits limits;
  limits.max_rules_per_netns = 10;
  auto tables = ReadTables(limits);
  const Table* big = FindTable(tables, Family::kInet, "big");
  ASSERT_NE(big, nullptr);
  const Chain* c = big->FindChain("c");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->rules.size(), 11u);
  EXPECT_EQ(c->rules.back().sem.action.kind, ActionKind::kUnknown);
}

TEST_F(NftReaderTest, HundredsOfXtRules) {
  std::string restore = "*mangle\n:PREROUTING ACCEPT [0:0]\n-N X\n";
  for (int i = 0; i < 150; ++i) {
    restore += "-A X -p tcp -m tcp --sport " + std::to_string(1000 + i) + " -m mark --mark " +
               std::to_string(i) + "/0xff -m comment --comment \"r" + std::to_string(i) +
               "\" -j MARK --set-xmark 0x" + std::to_string(i) + "/0xffff\n";
  }
  restore += "COMMIT\n";
  Restore("iptables-nft-restore", restore);
  auto tables = ReadTables();
  const Table* mangle = FindTable(tables, Family::kIpv4, "mangle");
  ASSERT_NE(mangle, nullptr) << Describe(tables);
  EXPECT_EQ(mangle->backend, Backend::kIptablesNft);
  const Chain* x = mangle->FindChain("X");
  ASSERT_NE(x, nullptr);
  ASSERT_EQ(x->rules.size(), 150u);
  for (int i = 0; i < 150; ++i) {
    const Rule& r = x->rules[i];
    EXPECT_EQ(r.comment, "r" + std::to_string(i));
    uint32_t mark = std::stoul(std::to_string(i), nullptr, 16);
    EXPECT_EQ(r.sem, Sem({Proto(6), M(MatchKind::kSrcPort, 1000u + i, 1000u + i),
                          M(MatchKind::kMark, static_cast<uint32_t>(i), 0xff)},
                         Action{ActionKind::kSetMark, mark, 0xffff, 0, ""}))
        << RenderRule(mangle->backend, mangle->family, "X", r);
  }
}

TEST_F(NftReaderTest, XtTargetsAndMatchesBeyondIstio) {
  Restore("iptables-nft-restore",
          "*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
          "-A PREROUTING -p tcp -m multiport --dports 80:90 -j DNAT --to-destination "
          "10.0.0.1:8080\n"
          "-A POSTROUTING -o eth+ -j MASQUERADE\n"
          "-A POSTROUTING -s 10.1.0.0/16 -j SNAT --to-source 1.2.3.4-1.2.3.8\n"
          "COMMIT\n"
          "*mangle\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
          "-A PREROUTING -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n"
          "-A PREROUTING -j CONNMARK --save-mark --nfmask 0xff --ctmask 0xff00\n"
          "-A OUTPUT -m owner --socket-exists -j LOG\n"
          "COMMIT\n"
          "*raw\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -o lo -j CT --notrack\nCOMMIT\n"
          "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp --dport 9 -j REJECT\nCOMMIT\n");
  auto tables = ReadTables();
  ExpectNoUnknown(tables);
  const Table* nat = FindTable(tables, Family::kIpv4, "nat");
  const Table* mangle = FindTable(tables, Family::kIpv4, "mangle");
  const Table* raw = FindTable(tables, Family::kIpv4, "raw");
  ASSERT_TRUE(nat && mangle && raw) << Describe(tables);
  const Chain* post = nat->FindChain("POSTROUTING");
  ASSERT_TRUE(post && post->rules.size() == 2) << Describe(*nat);
  EXPECT_EQ(post->rules[0].sem,
            Sem({M(MatchKind::kOutIface, 0, 0, false, "eth+")}, Verdict(ActionKind::kMasquerade)));
  EXPECT_EQ(post->rules[1].sem, Sem({M(MatchKind::kSrcAddr, 0, 0, false, "10.1.0.0/16")},
                                    Action{ActionKind::kSnat, 0, 0, 0, "1.2.3.4-1.2.3.8"}));
  const Chain* pre = nat->FindChain("PREROUTING");
  ASSERT_TRUE(pre && pre->rules.size() == 1);
  EXPECT_EQ(pre->rules[0].sem, Sem({Proto(6), M(MatchKind::kDstPort, 80, 90)},
                                   Action{ActionKind::kDnat, 0, 0, 0, "10.0.0.1:8080"}));
  const Chain* mpre = mangle->FindChain("PREROUTING");
  ASSERT_TRUE(mpre && mpre->rules.size() == 2) << Describe(*mangle);
  EXPECT_EQ(mpre->rules[0].sem, Sem({M(MatchKind::kCtState, 6)}, Verdict(ActionKind::kAccept)));
  EXPECT_EQ(mpre->rules[1].sem, Sem({}, Action{ActionKind::kSaveConnmark, 0xff, 0xff00, 0, ""}));
  EXPECT_EQ(mangle->FindChain("OUTPUT")->rules.at(0).sem,
            Sem({M(MatchKind::kSocketExists)}, Verdict(ActionKind::kLog)));
  EXPECT_EQ(raw->FindChain("OUTPUT")->rules.at(0).sem,
            Sem({M(MatchKind::kOutIface, 0, 0, false, "lo")}, Verdict(ActionKind::kNotrack)));
}

TEST_F(NftReaderTest, UnknownExpressionsBecomeUnknownNotCrash) {
  LoadNft(
      "add table inet odd\n"
      "add chain inet odd c\n"
      "add rule inet odd c numgen inc mod 2 0 counter accept\n"
      "add rule inet odd c fib daddr type local counter drop\n"
      "add rule inet odd c limit rate 10/second accept\n"
      "add rule inet odd c ip saddr 10.0.0.0/8 tcp dport { 80, 443 } meta mark set 0x5 accept\n"
      "add rule inet odd c ct state established,related accept\n"
      "add rule inet odd c iifname \"veth*\" ip6 saddr fd00::/64 counter return\n"
      "add rule inet odd c tcp dport 1000-2000 counter dnat ip to 10.0.0.9:80\n"
      "add rule inet odd c meta mark set meta mark and 0xffff00ff or 0x100 counter\n"
      "add rule inet odd c ct mark set meta mark counter\n"
      "add rule inet odd c meta l4proto tcp tproxy ip to :15001 meta mark set 0x111 accept\n");
  auto tables = ReadTables();
  const Table* odd = FindTable(tables, Family::kInet, "odd");
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(odd->backend, Backend::kNft);
  const Chain* c = odd->FindChain("c");
  ASSERT_TRUE(c && c->rules.size() == 10) << Describe(*odd);
  auto has_unknown = [](const Rule& r) {
    for (const Match& m : r.sem.matches) {
      if (m.kind == MatchKind::kUnknown) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_unknown(c->rules[0])) << Describe(*odd);
  EXPECT_TRUE(has_unknown(c->rules[1]));
  EXPECT_TRUE(has_unknown(c->rules[2]));
  EXPECT_EQ(c->rules[0].sem.action.kind, ActionKind::kAccept);
  EXPECT_EQ(c->rules[1].sem.action.kind, ActionKind::kDrop);
  // A set mark followed by accept is two statements: reported, not merged silently.
  EXPECT_EQ(c->rules[3].sem.action.kind, ActionKind::kUnknown);
  EXPECT_EQ(c->rules[4].sem, Sem({M(MatchKind::kCtState, 6)}, Verdict(ActionKind::kAccept)));
  EXPECT_EQ(c->rules[5].sem, Sem({M(MatchKind::kInIface, 0, 0, false, "veth+"),
                                  M(MatchKind::kSrcAddr, 0, 0, false, "fd00::/64")},
                                 Verdict(ActionKind::kReturn)));
  EXPECT_EQ(c->rules[6].sem, Sem({Proto(6), M(MatchKind::kDstPort, 1000, 2000)},
                                 Action{ActionKind::kDnat, 0, 0, 0, "10.0.0.9:80"}));
  EXPECT_EQ(c->rules[7].sem, Sem({}, Action{ActionKind::kSetMark, 0x100, 0xff00, 0, ""}));
  EXPECT_EQ(c->rules[8].sem,
            Sem({}, Action{ActionKind::kSaveConnmark, 0xffffffff, 0xffffffff, 0, ""}));
  EXPECT_EQ(c->rules[9].sem,
            Sem({Proto(6)}, Action{ActionKind::kTproxy, 15001, 0x111, 0xffffffff, ""}));
}

TEST_F(NftReaderTest, NativeSetsWithElementsAndComment) {
  LoadNft(
      "add table inet s\n"
      "add set inet s v4 { type ipv4_addr; comment \"pods\"; }\n"
      "add element inet s v4 { 10.244.0.5, 10.244.0.6 }\n"
      "add set inet s v6 { type ipv6_addr; }\n"
      "add element inet s v6 { fd00::5 }\n"
      "add set inet s ports { type inet_service; }\n"
      "add element inet s ports { 15008 }\n"
      "add set inet s nets { type ipv4_addr; flags interval; }\n"
      "add element inet s nets { 10.0.0.0/8, 192.168.1.1 }\n");
  auto tables = ReadTables();
  const Table* s = FindTable(tables, Family::kInet, "s");
  ASSERT_NE(s, nullptr);
  std::map<std::string, NftSet> by_name;
  for (const NftSet& set : s->sets) by_name[set.name] = set;
  ASSERT_EQ(by_name.size(), 4u);
  EXPECT_EQ(by_name["v4"].key_type, "ipv4_addr");
  EXPECT_EQ(by_name["v4"].comment, "pods");
  auto v4 = by_name["v4"].elements;
  std::sort(v4.begin(), v4.end());
  EXPECT_EQ(v4, (std::vector<std::string>{"10.244.0.5", "10.244.0.6"}));
  EXPECT_EQ(by_name["v6"].elements, (std::vector<std::string>{"fd00::5"}));
  EXPECT_EQ(by_name["ports"].key_type, "inet_service");
  EXPECT_EQ(by_name["ports"].elements, (std::vector<std::string>{"15008"}));
  // Ranges that are one prefix print as nft prints them.
  EXPECT_EQ(by_name["nets"].elements, (std::vector<std::string>{"10.0.0.0/8", "192.168.1.1"}));
}

TEST_F(NftReaderTest, NativeIpFilterTableWithoutCountersIsNft) {
  LoadNft(
      "add table ip filter\n"
      "add chain ip filter INPUT { type filter hook input priority 0; }\n"
      "add rule ip filter INPUT tcp dport 22 accept\n");
  auto tables = ReadTables();
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].backend, Backend::kNft);
  EXPECT_EQ(tables[0].family, Family::kIpv4);
}

TEST_F(NftReaderTest, EmptyIptablesNftTableFromProbeIsIptablesNft) {
  // What Istio's kernel-support probe leaves behind (istio-redirect-rules.md §5.3).
  ASSERT_EQ(ad::testing::Run(Exec("iptables-nft -t nat -A INPUT -p 255 -j RETURN")), 0);
  ASSERT_EQ(ad::testing::Run(Exec("iptables-nft -t nat -D INPUT -p 255 -j RETURN")), 0);
  auto tables = ReadTables();
  ASSERT_EQ(tables.size(), 1u) << Describe(tables);
  EXPECT_EQ(tables[0].name, "nat");
  EXPECT_EQ(tables[0].backend, Backend::kIptablesNft);
}

// The lab's generators (equal to Istio's goldens, lab_rules_test) so this runs without the corpus.
TEST_F(NftReaderTest, ReadingNeverChangesTheRuleset) {
  LoadNft(lab::NftInpodScript({.dns_capture = true, .ipv6 = true}, lab::SnatConfig{}));
  Restore("iptables-nft-restore",
          lab::IptablesInpodRestore({.dns_capture = true}, Family::kIpv4, lab::SnatConfig{}));
  std::string before = Capture(Exec("nft list ruleset"));
  ASSERT_FALSE(before.empty());
  auto result = InNetns([] {
    for (int i = 0; i < 100; ++i) {
      auto tables = ReadNfTables(ReadLimits{});
      if (!tables.ok()) return tables;
    }
    return ReadNfTables(ReadLimits{});
  });
  ASSERT_TRUE(result.ok()) << result.error().message;
  std::string after = Capture(Exec("nft list ruleset"));
  EXPECT_EQ(before, after);
}

}  // namespace
}  // namespace ad
