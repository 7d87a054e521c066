// xt payload decoders on hand-built and truncated payloads (no root, no kernel).
#include "sources/netfilter/xt_compat.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/xt_CONNMARK.h>
#include <linux/netfilter/xt_CT.h>
#include <linux/netfilter/xt_MARK.h>
#include <linux/netfilter/xt_TPROXY.h>
#include <linux/netfilter/xt_comment.h>
#include <linux/netfilter/xt_mark.h>
#include <linux/netfilter/xt_owner.h>
#include <linux/netfilter/xt_set.h>
#include <linux/netfilter/xt_tcpudp.h>
#include <netinet/in.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace ad::xt {
namespace {

template <typename T>
std::vector<uint8_t> Bytes(const T& value, size_t pad_to = 0) {
  std::vector<uint8_t> out(std::max(sizeof(T), pad_to), 0);
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

std::vector<Match> Matches(std::string_view name, uint32_t rev, const std::vector<uint8_t>& p,
                           std::string* comment = nullptr) {
  std::vector<Match> out;
  std::string ignored;
  DecodeMatch(
      Family::kIpv4, name, rev, p, [](uint16_t i) { return i == 3 ? "probes" : ""; }, &out,
      comment ? comment : &ignored);
  return out;
}

TEST(XtCompat, BareTcpMatchIsNoOp) {
  xt_tcp tcp{};
  tcp.spts[1] = 0xffff;
  tcp.dpts[1] = 0xffff;
  EXPECT_TRUE(Matches("tcp", 0, Bytes(tcp)).empty());
}

TEST(XtCompat, TcpInvertedDport) {
  xt_tcp tcp{};
  tcp.spts[1] = 0xffff;
  tcp.dpts[0] = tcp.dpts[1] = 15008;
  tcp.invflags = XT_TCP_INV_DSTPT;
  auto m = Matches("tcp", 0, Bytes(tcp));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], (Match{MatchKind::kDstPort, true, 15008, 15008, ""}));
}

TEST(XtCompat, MarkConnmarkComment) {
  xt_mark_mtinfo1 mark{0x539, 0xfff, 1};
  EXPECT_EQ(Matches("mark", 1, Bytes(mark)),
            (std::vector<Match>{Match{MatchKind::kMark, true, 0x539, 0xfff, ""}}));
  EXPECT_EQ(Matches("connmark", 1, Bytes(mark)),
            (std::vector<Match>{Match{MatchKind::kConnmark, true, 0x539, 0xfff, ""}}));
  xt_comment_info comment{};
  std::memset(comment.comment, 'x', sizeof(comment.comment));  // no NUL: must stay bounded
  std::string text;
  EXPECT_TRUE(Matches("comment", 0, Bytes(comment), &text).empty());
  EXPECT_EQ(text.size(), sizeof(comment.comment));
}

TEST(XtCompat, OwnerAndSet) {
  xt_owner_match_info owner{};
  owner.match = XT_OWNER_SOCKET;
  EXPECT_EQ(Matches("owner", 1, Bytes(owner)),
            (std::vector<Match>{Match{MatchKind::kSocketExists, false, 0, 0, ""}}));
  xt_set_info_match_v1 set{};
  set.match_set.index = 3;
  set.match_set.dim = 1;
  EXPECT_EQ(Matches("set", 1, Bytes(set)),
            (std::vector<Match>{Match{MatchKind::kSet, false, 0, 0, "probes dst"}}));
  set.match_set.index = 9;
  set.match_set.flags = IPSET_DIM_ONE_SRC | IPSET_INV_MATCH;
  EXPECT_EQ(Matches("set", 1, Bytes(set)),
            (std::vector<Match>{Match{MatchKind::kSet, true, 0, 0, "index:9 src"}}));
}

TEST(XtCompat, Targets) {
  nf_nat_ipv4_multi_range_compat redirect{};
  redirect.rangesize = 1;
  redirect.range[0].flags = NF_NAT_RANGE_PROTO_SPECIFIED;
  redirect.range[0].min.all = htons(15001);
  redirect.range[0].max.all = htons(15001);
  EXPECT_EQ(DecodeTarget(Family::kIpv4, "REDIRECT", 0, Bytes(redirect)),
            (Action{ActionKind::kRedirect, 15001, 15001, 0, ""}));

  nf_nat_range2 dnat{};
  dnat.flags = NF_NAT_RANGE_MAP_IPS | NF_NAT_RANGE_PROTO_SPECIFIED;
  inet_pton(AF_INET6, "fd00::1", &dnat.min_addr);
  dnat.max_addr = dnat.min_addr;
  dnat.min_proto.all = dnat.max_proto.all = htons(80);
  EXPECT_EQ(DecodeTarget(Family::kIpv6, "DNAT", 2, Bytes(dnat)),
            (Action{ActionKind::kDnat, 0, 0, 0, "[fd00::1]:80"}));

  xt_connmark_tginfo2 set_xmark{0x111, 0xfff, 0, 0, 0, XT_CONNMARK_SET};
  EXPECT_EQ(DecodeTarget(Family::kIpv4, "CONNMARK", 2, Bytes(set_xmark)),
            (Action{ActionKind::kSetConnmark, 0x111, 0xfff, 0, ""}));
  xt_connmark_tginfo1 restore{0, 0xffffffff, 0xffffffff, XT_CONNMARK_RESTORE};
  EXPECT_EQ(DecodeTarget(Family::kIpv4, "CONNMARK", 1, Bytes(restore)),
            (Action{ActionKind::kRestoreConnmark, 0xffffffff, 0xffffffff, 0, ""}));

  xt_mark_tginfo2 mark{0x539, 0xffffffff};
  EXPECT_EQ(DecodeTarget(Family::kIpv4, "MARK", 2, Bytes(mark)),
            (Action{ActionKind::kSetMark, 0x539, 0xffffffff, 0, ""}));

  xt_ct_target_info_v1 ct{};
  ct.zone = 1;
  EXPECT_EQ(DecodeTarget(Family::kIpv4, "CT", 2, Bytes(ct)),
            (Action{ActionKind::kCtZone, 1, 0, 0, ""}));
  ct.flags = XT_CT_NOTRACK;
  EXPECT_EQ(DecodeTarget(Family::kIpv4, "CT", 1, Bytes(ct)).kind, ActionKind::kNotrack);

  xt_tproxy_target_info_v1 tproxy{};
  tproxy.mark_mask = 0xfff;
  tproxy.mark_value = 0x111;
  tproxy.lport = htons(15008);
  EXPECT_EQ(DecodeTarget(Family::kIpv4, "TPROXY", 1, Bytes(tproxy)),
            (Action{ActionKind::kTproxy, 15008, 0x111, 0xfff, ""}));
  EXPECT_EQ(DecodeTarget(Family::kIpv4, "NFQUEUE", 3, {}).kind, ActionKind::kUnknown);
}

// Every known decoder on every truncation of a realistic payload, plus random bytes: the result
// is kUnknown (or a decoded value) but never a crash or an out-of-bounds read (run under ASan).
TEST(XtCompat, TruncatedAndRandomPayloadsNeverCrash) {
  const std::vector<std::pair<std::string, uint32_t>> matches = {
      {"tcp", 0},       {"udp", 0},       {"mark", 1},  {"connmark", 1},  {"comment", 0},
      {"owner", 1},     {"set", 1},       {"set", 3},   {"set", 4},       {"conntrack", 1},
      {"conntrack", 2}, {"conntrack", 3}, {"state", 0}, {"multiport", 1}, {"addrtype", 1},
      {"set", 0},       {"bogus", 7}};
  const std::vector<std::pair<std::string, uint32_t>> targets = {
      {"REDIRECT", 0}, {"DNAT", 0},     {"DNAT", 1}, {"DNAT", 2},  {"SNAT", 2}, {"MASQUERADE", 0},
      {"CONNMARK", 1}, {"CONNMARK", 2}, {"MARK", 2}, {"CT", 0},    {"CT", 1},   {"CT", 2},
      {"TPROXY", 0},   {"TPROXY", 1},   {"LOG", 0},  {"REJECT", 0}};
  std::mt19937 rng(1234);
  std::vector<uint8_t> full(512);
  for (int round = 0; round < 20; ++round) {
    for (auto& b : full) b = static_cast<uint8_t>(rng());
    for (size_t len = 0; len <= full.size(); len += (len < 64 ? 1 : 37)) {
      std::vector<uint8_t> payload(full.begin(), full.begin() + len);
      for (const auto& [name, rev] : matches) {
        for (Family family : {Family::kIpv4, Family::kIpv6}) {
          std::vector<Match> out;
          std::string comment;
          DecodeMatch(family, name, rev, payload, nullptr, &out, &comment);
          if (len < 4) {
            bool any_unknown = out.empty() || out[0].kind == MatchKind::kUnknown;
            EXPECT_TRUE(any_unknown || name == "comment") << name << " len " << len;
          }
        }
      }
      for (const auto& [name, rev] : targets) {
        for (Family family : {Family::kIpv4, Family::kIpv6}) {
          Action a = DecodeTarget(family, name, rev, payload);
          if (len == 0 && name != "LOG" && name != "REJECT") {
            EXPECT_EQ(a.kind, ActionKind::kUnknown) << name;
          }
        }
      }
    }
  }
}

TEST(XtCompat, PrefixText) {
  uint8_t addr[4] = {10, 1, 2, 3};
  uint8_t mask[4] = {255, 255, 0, 0};
  EXPECT_EQ(PrefixText(Family::kIpv4, addr, mask), "10.1.0.0/16");
  EXPECT_EQ(PrefixText(Family::kIpv4, addr, nullptr), "10.1.2.3/32");
  uint8_t odd[4] = {255, 0, 255, 0};
  EXPECT_EQ(PrefixText(Family::kIpv4, addr, odd), "10.0.2.0/255.0.255.0");
}

}  // namespace
}  // namespace ad::xt
