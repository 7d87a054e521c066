// DecodeTableUserdata on hand-built TLV bytes (no root, no kernel): the creator version and build
// time newer nftables writes, a comment, unknown entries, and malformed input named, never a crash.
#include "sources/netfilter/nft_table_userdata.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace ad::nft {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes Tlv(uint8_t type, const Bytes& value) {
  Bytes out = {type, static_cast<uint8_t>(value.size())};
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

Bytes Concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// 2025-08-13T17:08:38Z, big-endian as nft writes it.
const Bytes kBuildTime = {0, 0, 0, 0, 0x68, 0x9c, 0xc6, 0x46};

TEST(TableUserdata, CreatorVersionAndBuildTime) {
  const NftTableUserdata u =
      DecodeTableUserdata(Concat({Tlv(1, {1, 1, 5, 0}), Tlv(2, kBuildTime)}));
  EXPECT_EQ(u.error, "");
  EXPECT_EQ(u.creator_version, "1.1.5");
  EXPECT_EQ(u.creator_build_time, 0x689cc646);
  EXPECT_EQ(u.comment, "");
}

TEST(TableUserdata, StableReleaseIsAFourthComponent) {
  EXPECT_EQ(DecodeTableUserdata(Tlv(1, {1, 0, 6, 2})).creator_version, "1.0.6.2");
}

TEST(TableUserdata, CommentAndUnknownEntriesAndEmpty) {
  const NftTableUserdata u = DecodeTableUserdata(
      Concat({Tlv(0, {'i', 's', 't', 'i', 'o', 0}), Tlv(9, {1, 2, 3}), Tlv(1, {1, 1, 1, 0})}));
  EXPECT_EQ(u.error, "");
  EXPECT_EQ(u.comment, "istio");
  EXPECT_EQ(u.creator_version, "1.1.1");
  EXPECT_EQ(u.creator_build_time, -1);
  const NftTableUserdata empty = DecodeTableUserdata({});
  EXPECT_EQ(empty, NftTableUserdata{});  // what Debian 12's nft writes without a comment
}

TEST(TableUserdata, WrongLengthsAreNamed) {
  NftTableUserdata u = DecodeTableUserdata(Tlv(1, {1, 1, 5}));
  EXPECT_EQ(u.error, "userdata creator version has 3 bytes, expected 4");
  EXPECT_EQ(u.creator_version, "");
  u = DecodeTableUserdata(Concat({Tlv(1, {1, 1, 5, 0}), Tlv(2, {0, 1, 2})}));
  EXPECT_EQ(u.error, "userdata creator build time has 3 bytes, expected 8");
  EXPECT_EQ(u.creator_version, "1.1.5");  // what came before is kept
  u = DecodeTableUserdata(Tlv(0, {'a', 'b'}));
  EXPECT_EQ(u.error, "userdata comment is not NUL-terminated");
}

TEST(TableUserdata, TruncationIsNamed) {
  NftTableUserdata u = DecodeTableUserdata(Bytes{1, 4, 1, 1});  // claims 4, has 2
  EXPECT_NE(u.error.find("claims 4 bytes, 2 left"), std::string::npos) << u.error;
  u = DecodeTableUserdata(Concat({Tlv(1, {1, 1, 5, 0}), Bytes{2}}));  // a lone type byte
  EXPECT_NE(u.error.find("entry header at byte 6 of 7"), std::string::npos) << u.error;
  EXPECT_EQ(u.creator_version, "1.1.5");
}

TEST(TableUserdata, EveryPrefixAndEveryByteValueDecodesWithoutCrashing) {
  const Bytes full = Concat({Tlv(0, {'x', 0}), Tlv(1, {1, 1, 5, 0}), Tlv(2, kBuildTime)});
  for (size_t n = 0; n <= full.size(); ++n) {
    (void)DecodeTableUserdata({full.data(), n});
  }
  Bytes flipped = full;
  for (size_t i = 0; i < flipped.size(); ++i) {
    for (int v = 0; v < 256; ++v) {
      flipped[i] = static_cast<uint8_t>(v);
      (void)DecodeTableUserdata(flipped);
    }
    flipped[i] = full[i];
  }
  (void)DecodeTableUserdata(Tlv(2, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(DecodeTableUserdata(Tlv(2, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}))
                .creator_build_time,
            -1);
}

}  // namespace
}  // namespace ad::nft
