// --redact-ips on text: host addresses mapped consistently, everything else left as it was.
#include "capture/redact_ips.h"

#include <gtest/gtest.h>

#include <string>

namespace ad::capture {
namespace {

TEST(IpRedactor, SameAddressSameStandInEverywhere) {
  IpRedactor r({});
  const std::string a = r.Redact("pod 10.244.1.7 on eth0");
  const std::string b = r.Redact("-A X -d 10.244.1.7/32 -j DNAT --to-destination 10.244.1.7:15008");
  EXPECT_EQ(a, "pod 198.18.0.1 on eth0");
  EXPECT_EQ(b, "-A X -d 198.18.0.1/32 -j DNAT --to-destination 198.18.0.1:15008");
  EXPECT_EQ(r.Redact("10.244.1.8"), "198.18.0.2");
  EXPECT_EQ(r.Redact("fd00:10:244::7"), "2001:db8::1");
  EXPECT_EQ(r.Redact("[fd00:10:244:0::7]:15008"), "[2001:db8::1]:15008") << "canonical form";
  EXPECT_EQ(r.replaced(), 3u);
}

TEST(IpRedactor, LeavesWhatIsNotAPodsAddress) {
  IpRedactor r({"192.0.2.9"});
  for (const std::string text :
       {"127.0.0.1/32", "::1", "0.0.0.0", "169.254.7.127",
        "fd16:9254:7127:1337:ffff:ffff:ffff:ffff", "fe80::1%eth0", "224.0.0.1", "10.244.0.0/16",
        "fd00::/64", "192.0.2.9", "1.0.6", "12:34:56", "aa:bb:cc:dd:ee:ff", "deadbeef", "x10.1.2.3",
        "10.1.2", "10.1.2.300", "mark 0x539/0xfff", "ports 15001-15008"}) {
    EXPECT_EQ(r.Redact(text), text);
  }
  EXPECT_EQ(r.replaced(), 0u);
}

}  // namespace
}  // namespace ad::capture
