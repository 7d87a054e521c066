// The IPT_SO_GET_ENTRIES decoder on hand-built blobs: a valid table decodes, and every corrupt
// layout gives an error (never a crash or an out-of-bounds read). No root needed.
// clang-format off
#include <netinet/in.h>  // before the linux uapi headers, which skip what libc defines
// clang-format on

#include <gtest/gtest.h>
#include <linux/netfilter/x_tables.h>
#include <linux/netfilter/xt_tcpudp.h>
#include <linux/netfilter_ipv4/ip_tables.h>

#include <cstring>
#include <vector>

#include "sources/netfilter/legacy_reader.h"

namespace ad::legacy {
namespace {

class BlobBuilder {
 public:
  // Appends an entry; returns its offset. `matches` are complete xt_entry_match records.
  uint32_t Add(const ipt_ip& ip, const std::vector<uint8_t>& matches,
               const std::vector<uint8_t>& target) {
    const uint32_t offset = static_cast<uint32_t>(blob_.size());
    ipt_entry entry{};
    entry.ip = ip;
    entry.target_offset = static_cast<uint16_t>(sizeof(ipt_entry) + matches.size());
    entry.next_offset = static_cast<uint16_t>(entry.target_offset + target.size());
    Append(&entry, sizeof(entry));
    blob_.insert(blob_.end(), matches.begin(), matches.end());
    blob_.insert(blob_.end(), target.begin(), target.end());
    ++count_;
    return offset;
  }
  void Append(const void* data, size_t size) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    blob_.insert(blob_.end(), bytes, bytes + size);
  }
  std::vector<uint8_t>& blob() { return blob_; }
  uint32_t count() const { return count_; }

 private:
  std::vector<uint8_t> blob_;
  uint32_t count_ = 0;
};

std::vector<uint8_t> StandardTarget(int verdict) {
  xt_standard_target target{};
  target.target.u.target_size = XT_ALIGN(sizeof(xt_standard_target));
  target.verdict = verdict;
  std::vector<uint8_t> bytes(XT_ALIGN(sizeof(xt_standard_target)));
  std::memcpy(bytes.data(), &target, sizeof(target));
  return bytes;
}

std::vector<uint8_t> ErrorTarget(const char* name) {
  xt_error_target target{};
  target.target.u.user.target_size = XT_ALIGN(sizeof(xt_error_target));
  std::strcpy(target.target.u.user.name, XT_ERROR_TARGET);
  std::strncpy(target.errorname, name, sizeof(target.errorname) - 1);
  std::vector<uint8_t> bytes(XT_ALIGN(sizeof(xt_error_target)));
  std::memcpy(bytes.data(), &target, sizeof(target));
  return bytes;
}

std::vector<uint8_t> TcpDportMatch(uint16_t port) {
  const size_t size = XT_ALIGN(sizeof(xt_entry_match) + sizeof(xt_tcp));
  std::vector<uint8_t> bytes(size);
  xt_entry_match header{};
  header.u.user.match_size = static_cast<uint16_t>(size);
  std::strcpy(header.u.user.name, "tcp");
  xt_tcp tcp{};
  tcp.spts[1] = 0xffff;
  tcp.dpts[0] = tcp.dpts[1] = port;
  std::memcpy(bytes.data(), &header, sizeof(header));
  std::memcpy(bytes.data() + sizeof(header), &tcp, sizeof(tcp));
  return bytes;
}

// PREROUTING: "-p tcp --dport 80 -j USER", policy ACCEPT; user chain USER: "-j DROP".
struct Sample {
  std::vector<uint8_t> blob;
  TableLayout layout;
};

Sample MakeSample() {
  BlobBuilder b;
  ipt_ip tcp{};
  tcp.proto = IPPROTO_TCP;
  const size_t rule_size = sizeof(ipt_entry) + TcpDportMatch(80).size() + StandardTarget(0).size();
  const size_t policy_size = sizeof(ipt_entry) + StandardTarget(0).size();
  const size_t head_size = sizeof(ipt_entry) + ErrorTarget("x").size();
  const uint32_t user_first_rule = static_cast<uint32_t>(rule_size + policy_size + head_size);
  const uint32_t rule = b.Add(tcp, TcpDportMatch(80), StandardTarget(user_first_rule));
  const uint32_t policy = b.Add({}, {}, StandardTarget(-NF_ACCEPT - 1));
  b.Add({}, {}, ErrorTarget("USER"));
  b.Add({}, {}, StandardTarget(-NF_DROP - 1));
  b.Add({}, {}, StandardTarget(XT_RETURN));
  b.Add({}, {}, ErrorTarget("ERROR"));
  Sample s;
  s.blob = b.blob();
  s.layout.valid_hooks = 1u << NF_INET_PRE_ROUTING;
  s.layout.hook_entry[NF_INET_PRE_ROUTING] = rule;
  s.layout.underflow[NF_INET_PRE_ROUTING] = policy;
  s.layout.num_entries = b.count();
  s.layout.size = static_cast<uint32_t>(s.blob.size());
  return s;
}

Result<Table> Decode(const Sample& s) {
  return DecodeTableBlob(Family::kIpv4, "mangle", s.layout, s.blob, ReadLimits{}, nullptr);
}

TEST(LegacyBlob, ValidBlobDecodes) {
  Sample s = MakeSample();
  auto table = Decode(s);
  ASSERT_TRUE(table.ok()) << table.error().message;
  ASSERT_EQ(table->chains.size(), 2u);
  const Chain& pre = table->chains[0];
  EXPECT_EQ(pre.name, "PREROUTING");
  EXPECT_EQ(pre.policy, "accept");
  EXPECT_EQ(pre.priority, -150);
  ASSERT_EQ(pre.rules.size(), 1u);
  RuleSemantics expected;
  expected.matches = {{MatchKind::kProtocol, false, 6, 0, ""},
                      {MatchKind::kDstPort, false, 80, 80, ""}};
  expected.action = {ActionKind::kJump, 0, 0, 0, "USER"};
  Canonicalize(expected);
  EXPECT_EQ(pre.rules[0].sem, expected);
  const Chain& user = table->chains[1];
  EXPECT_EQ(user.name, "USER");
  EXPECT_FALSE(user.is_base);
  ASSERT_EQ(user.rules.size(), 1u);
  EXPECT_EQ(user.rules[0].sem.action.kind, ActionKind::kDrop);
}

TEST(LegacyBlob, EveryByteCorruptionIsSafe) {
  const Sample original = MakeSample();
  for (size_t i = 0; i < original.blob.size(); ++i) {
    for (uint8_t value : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x7f}}) {
      Sample s = original;
      s.blob[i] = value;
      auto table = Decode(s);  // ok or error; must not crash (run under ASan to check bounds)
      (void)table;
    }
  }
}

TEST(LegacyBlob, TruncatedBlobsAreErrors) {
  const Sample original = MakeSample();
  for (size_t length = 0; length < original.blob.size(); ++length) {
    Sample s = original;
    s.blob.resize(length);
    s.layout.size = static_cast<uint32_t>(length);
    EXPECT_FALSE(Decode(s).ok()) << "length " << length;
  }
}

TEST(LegacyBlob, SpecificCorruptionsAreErrors) {
  {
    Sample s = MakeSample();
    s.layout.size += 8;  // announced size disagrees with the blob
    EXPECT_FALSE(Decode(s).ok());
  }
  {
    Sample s = MakeSample();
    s.layout.hook_entry[NF_INET_PRE_ROUTING] = 4;  // not an entry boundary
    EXPECT_FALSE(Decode(s).ok());
  }
  {
    Sample s = MakeSample();
    s.layout.underflow[NF_INET_PRE_ROUTING] = 1u << 30;
    EXPECT_FALSE(Decode(s).ok());
  }
  {
    Sample s = MakeSample();
    ipt_entry first;
    std::memcpy(&first, s.blob.data(), sizeof(first));
    first.next_offset = 0;  // would loop forever
    std::memcpy(s.blob.data(), &first, sizeof(first));
    EXPECT_FALSE(Decode(s).ok());
  }
  {
    Sample s = MakeSample();
    xt_entry_match header;
    std::memcpy(&header, s.blob.data() + sizeof(ipt_entry), sizeof(header));
    header.u.match_size = 0;  // would loop forever
    std::memcpy(s.blob.data() + sizeof(ipt_entry), &header, sizeof(header));
    EXPECT_FALSE(Decode(s).ok());
  }
  {
    Sample s = MakeSample();
    ipt_entry first;
    std::memcpy(&first, s.blob.data(), sizeof(first));
    const int bogus = 12345;  // jump into the middle of nowhere
    std::memcpy(s.blob.data() + first.target_offset + sizeof(xt_entry_target), &bogus,
                sizeof(bogus));
    EXPECT_FALSE(Decode(s).ok());
  }
  {
    Sample s = MakeSample();
    s.layout.num_entries += 1;
    EXPECT_FALSE(Decode(s).ok());
  }
  {
    Sample s = MakeSample();
    ReadLimits limits;
    limits.max_rules_per_netns = 2;
    EXPECT_TRUE(DecodeTableBlob(Family::kIpv4, "mangle", s.layout, s.blob, limits, nullptr).ok());
    limits.max_rules_per_netns = 1;
    EXPECT_FALSE(DecodeTableBlob(Family::kIpv4, "mangle", s.layout, s.blob, limits, nullptr).ok());
  }
}

}  // namespace
}  // namespace ad::legacy
