// The nf_tables rule decoder on rules built in user space with libnftnl (no kernel, no root):
// inputs the kernel would not send must decode to kUnknown, never out of bounds.
#include <gtest/gtest.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter/nf_tables.h>

#include <array>
#include <cstdint>
#include <memory>

#include "sources/netfilter/nft_reader_decode.h"

namespace ad::nft {
namespace {

struct RuleDeleter {
  void operator()(nftnl_rule* rule) const { nftnl_rule_free(rule); }
};
using RulePtr = std::unique_ptr<nftnl_rule, RuleDeleter>;

// "ip daddr 127.0.0.1" as a payload load at `offset` (4 bytes) and an equality compare.
RulePtr DaddrRule(uint32_t offset) {
  RulePtr rule(nftnl_rule_alloc());
  nftnl_expr* payload = nftnl_expr_alloc("payload");
  nftnl_expr_set_u32(payload, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
  nftnl_expr_set_u32(payload, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
  nftnl_expr_set_u32(payload, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
  nftnl_expr_set_u32(payload, NFTNL_EXPR_PAYLOAD_LEN, 4);
  nftnl_rule_add_expr(rule.get(), payload);  // the rule owns it from here
  nftnl_expr* cmp = nftnl_expr_alloc("cmp");
  nftnl_expr_set_u32(cmp, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
  nftnl_expr_set_u32(cmp, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
  const std::array<uint8_t, 4> loopback = {127, 0, 0, 1};
  nftnl_expr_set(cmp, NFTNL_EXPR_CMP_DATA, loopback.data(), loopback.size());
  nftnl_rule_add_expr(rule.get(), cmp);
  return rule;
}

TEST(NftDecode, DestinationAddressCompare) {
  RulePtr rule = DaddrRule(16);
  DecodedRule decoded = DecodeRule(rule.get(), Family::kIpv4, nullptr);
  ASSERT_EQ(decoded.rule.sem.matches.size(), 1u);
  EXPECT_EQ(decoded.rule.sem.matches[0].kind, MatchKind::kDstAddr);
  EXPECT_EQ(decoded.rule.sem.matches[0].text, "127.0.0.1/32");
}

// Found while writing nft_rule_fuzz: offset + len wrapped past 2^32 into the address field and
// the address bytes were written about 4 GiB before a 16-byte stack array.
TEST(NftDecode, PayloadOffsetNearTwoToThe32IsNotAnAddress) {
  for (uint32_t offset : {0xfffffffdu, 0xfffffffcu, 0xffffffffu}) {
    RulePtr rule = DaddrRule(offset);
    DecodedRule decoded = DecodeRule(rule.get(), Family::kIpv4, nullptr);
    ASSERT_EQ(decoded.rule.sem.matches.size(), 1u) << offset;
    EXPECT_EQ(decoded.rule.sem.matches[0].kind, MatchKind::kUnknown) << offset;
  }
}

}  // namespace
}  // namespace ad::nft
