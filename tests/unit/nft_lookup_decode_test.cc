// The nf_tables rule decoder on lookups built in user space (no kernel, no root): what a set
// lookup or verdict map keys on, with and without the set's key width at hand.
#include <gtest/gtest.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/rule.h"
#include "sources/netfilter/nft_reader_decode.h"

namespace ad::nft {
namespace {

struct RuleFree {
  void operator()(nftnl_rule* r) const { nftnl_rule_free(r); }
};
using RulePtr = std::unique_ptr<nftnl_rule, RuleFree>;

// Builds a rule expression by expression; the rule owns every expression added to it.
class RuleBuilder {
 public:
  RuleBuilder() : rule_(nftnl_rule_alloc()) {}

  RuleBuilder& Payload(uint32_t base, uint32_t offset, uint32_t len, uint32_t dreg) {
    nftnl_expr* e = Add("payload");
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
    return *this;
  }
  RuleBuilder& Meta(uint32_t key, uint32_t dreg) {
    nftnl_expr* e = Add("meta");
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
    return *this;
  }
  RuleBuilder& CmpByte(uint32_t sreg, uint8_t value) {
    nftnl_expr* e = Add("cmp");
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, sreg);
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
    nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, &value, sizeof(value));
    return *this;
  }
  RuleBuilder& Numgen(uint32_t modulus, uint32_t dreg) {
    nftnl_expr* e = Add("numgen");
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_TYPE, NFT_NG_RANDOM);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_MODULUS, modulus);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_DREG, dreg);
    return *this;
  }
  RuleBuilder& Lookup(const std::string& set, uint32_t sreg, bool verdict_map = false) {
    nftnl_expr* e = Add("lookup");
    nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set.c_str());
    nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
    if (verdict_map) nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_VERDICT);
    return *this;
  }
  RuleBuilder& Accept() {
    nftnl_expr* e = Add("immediate");
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, NF_ACCEPT);
    return *this;
  }

  nftnl_rule* get() const { return rule_.get(); }

 private:
  nftnl_expr* Add(const char* name) {
    nftnl_expr* e = nftnl_expr_alloc(name);
    nftnl_rule_add_expr(rule_.get(), e);
    return e;
  }
  RulePtr rule_;
};

const xt::SetNameResolver kNoIpsets = [](uint16_t) { return std::string(); };

constexpr uint32_t kNetwork = NFT_PAYLOAD_NETWORK_HEADER;
constexpr uint32_t kTransport = NFT_PAYLOAD_TRANSPORT_HEADER;

std::vector<std::string> SetTexts(const Rule& rule) {
  std::vector<std::string> out;
  for (const Match& m : rule.sem.matches) {
    out.push_back(m.kind == MatchKind::kSet ? m.text : "other: " + m.text);
  }
  return out;
}

TEST(NftLookupDecode, SingleKeys) {
  RuleBuilder ports;
  ports.Meta(NFT_META_L4PROTO, NFT_REG_1).CmpByte(NFT_REG_1, 6);
  ports.Payload(kTransport, 2, 2, NFT_REG_1).Lookup("__set0", NFT_REG_1).Accept();
  const DecodedRule decoded = DecodeRule(ports.get(), Family::kInet, kNoIpsets);
  ASSERT_EQ(decoded.rule.sem.matches.size(), 2u);
  EXPECT_EQ(decoded.rule.sem.matches[0], (Match{MatchKind::kProtocol, false, 6, 0, ""}));
  EXPECT_EQ(decoded.rule.sem.matches[1].text, "__set0 dport");
  EXPECT_EQ(decoded.rule.sem.action.kind, ActionKind::kAccept);

  for (const auto& [key, name] :
       std::vector<std::pair<uint32_t, std::string>>{{NFT_META_IIFNAME, "iifname"},
                                                     {NFT_META_OIF, "oif"},
                                                     {NFT_META_MARK, "mark"},
                                                     {NFT_META_SKUID, "skuid"},
                                                     {NFT_META_L4PROTO, "l4proto"}}) {
    RuleBuilder meta;
    meta.Meta(key, NFT_REG_1).Lookup("s", NFT_REG_1).Accept();
    EXPECT_EQ(SetTexts(DecodeRule(meta.get(), Family::kInet, kNoIpsets).rule),
              (std::vector<std::string>{"s " + name}));
  }
}

TEST(NftLookupDecode, ConcatenationWithoutKeyWidthFollowsWriteOrder) {
  // ip daddr . meta l4proto . th dport vmap @service-ips (kube-proxy), in an ip table.
  RuleBuilder rule;
  rule.Payload(kNetwork, 16, 4, NFT_REG32_00)
      .Meta(NFT_META_L4PROTO, NFT_REG32_01)
      .Payload(kTransport, 2, 2, NFT_REG32_02)
      .Lookup("service-ips", NFT_REG32_00, /*verdict_map=*/true);
  const DecodedRule decoded = DecodeRule(rule.get(), Family::kIpv4, kNoIpsets);
  EXPECT_TRUE(decoded.rule.sem.matches.empty());
  EXPECT_EQ(decoded.rule.sem.action.kind, ActionKind::kVerdictMap);
  EXPECT_EQ(decoded.rule.sem.action.text, "service-ips dst.l4proto.dport");
}

TEST(NftLookupDecode, LeftoverRegistersAreNotPartOfTheKey) {
  // "ip saddr . th dport @pairs ip daddr @single": slot 1 still holds the port of the first
  // lookup when the second loads slot 0 alone.
  RuleBuilder rule;
  rule.Payload(kNetwork, 12, 4, NFT_REG32_00)
      .Payload(kTransport, 2, 2, NFT_REG32_01)
      .Lookup("pairs", NFT_REG32_00)
      .Payload(kNetwork, 16, 4, NFT_REG_1)
      .Lookup("single", NFT_REG_1)
      .Accept();
  Rule decoded = DecodeRule(rule.get(), Family::kIpv4, kNoIpsets).rule;
  EXPECT_EQ(SetTexts(decoded), (std::vector<std::string>{"pairs src.dport", "single dst"}));
}

TEST(NftLookupDecode, KeyWidthDecidesWhenGiven) {
  // A fresher register next to a one-field key: only the set's key width tells it apart.
  RuleBuilder rule;
  rule.Meta(NFT_META_MARK, NFT_REG32_00).Meta(NFT_META_SKUID, NFT_REG32_01);
  rule.Lookup("marks", NFT_REG32_00).Accept();
  const SetKeyWidth widths = [](std::string_view set) -> uint32_t {
    return set == "marks" ? 4 : 0;
  };
  EXPECT_EQ(SetTexts(DecodeRule(rule.get(), Family::kInet, kNoIpsets, widths).rule),
            (std::vector<std::string>{"marks mark"}));
  EXPECT_EQ(SetTexts(DecodeRule(rule.get(), Family::kInet, kNoIpsets).rule),
            (std::vector<std::string>{"marks mark.skuid"}));
  // A width the registers cannot fill is not guessed at.
  const SetKeyWidth too_wide = [](std::string_view) -> uint32_t { return 12; };
  const Rule unknown = DecodeRule(rule.get(), Family::kInet, kNoIpsets, too_wide).rule;
  ASSERT_EQ(unknown.sem.matches.size(), 1u);
  EXPECT_EQ(unknown.sem.matches[0].kind, MatchKind::kUnknown);
}

TEST(NftLookupDecode, NumgenVerdictMap) {
  RuleBuilder rule;
  rule.Numgen(2, NFT_REG_1).Lookup("__map0", NFT_REG_1, /*verdict_map=*/true);
  const DecodedRule decoded = DecodeRule(rule.get(), Family::kIpv4, kNoIpsets);
  EXPECT_TRUE(decoded.rule.sem.matches.empty());
  EXPECT_EQ(decoded.rule.sem.action.text, "__map0 numgen-random-mod-2");
}

TEST(NftLookupDecode, UndecodableKeyStaysVisible) {
  RuleBuilder rule;
  rule.Meta(NFT_META_PRIORITY, NFT_REG_1).Lookup("prio", NFT_REG_1, /*verdict_map=*/true);
  const DecodedRule decoded = DecodeRule(rule.get(), Family::kInet, kNoIpsets);
  EXPECT_EQ(decoded.rule.sem.action.kind, ActionKind::kUnknown);
  EXPECT_NE(decoded.rule.sem.action.text.find("@prio"), std::string::npos);
}

}  // namespace
}  // namespace ad::nft
