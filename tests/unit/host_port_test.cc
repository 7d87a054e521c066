// HOST:PORT as every listener flag takes it: literals only, brackets for IPv6, ports 1-65535 and
// 0 only where a listener may let the kernel pick.
#include "model/host_port.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

namespace ad {
namespace {

TEST(HostPort, LiteralsAndPorts) {
  auto v4 = ParseHostPort("0.0.0.0:9978");
  ASSERT_TRUE(v4.ok()) << v4.error().message;
  EXPECT_EQ(v4->host, "0.0.0.0");
  EXPECT_EQ(v4->family, AF_INET);
  EXPECT_EQ(v4->port, 9978);
  EXPECT_EQ(v4->ToString(), "0.0.0.0:9978");
  auto v6 = ParseHostPort("[fd00::1]:65535");
  ASSERT_TRUE(v6.ok()) << v6.error().message;
  EXPECT_EQ(v6->host, "fd00::1");
  EXPECT_EQ(v6->family, AF_INET6);
  EXPECT_EQ(v6->port, 65535);
  EXPECT_EQ(v6->ToString(), "[fd00::1]:65535");
  auto lowest = ParseHostPort("127.0.0.1:1");
  ASSERT_TRUE(lowest.ok());
  EXPECT_EQ(lowest->port, 1);
}

TEST(HostPort, PortZeroOnlyWhenAListenerMayPick) {
  auto refused = ParseHostPort("[::]:0");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("from 1 to 65535"), std::string::npos)
      << refused.error().message;
  auto picked = ParseHostPort("[::]:0", PortZero::kPickFree);
  ASSERT_TRUE(picked.ok()) << picked.error().message;
  EXPECT_EQ(picked->host, "::");
  EXPECT_EQ(picked->port, 0);
}

TEST(HostPort, EveryBadSpellingIsAClearError) {
  for (const char* bad :
       {"", "9978", ":9978", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:99999999999",
        "127.0.0.1:-1", "127.0.0.1:9x", "127.0.0.1:9978x", "127.0.0.1: 80", "::1:9978", "[::1]",
        "[127.0.0.1]:80", "1.2.3:80", "localhost:9978", "[::1]:x", "[]:80", "[::1:80"}) {
    for (PortZero zero : {PortZero::kRefuse, PortZero::kPickFree}) {
      auto parsed = ParseHostPort(bad, zero);
      ASSERT_FALSE(parsed.ok()) << bad;
      EXPECT_NE(parsed.error().message.find("IPV4:PORT or [IPV6]:PORT"), std::string::npos) << bad;
      EXPECT_NE(parsed.error().message.find(std::string("'") + bad + "'"), std::string::npos)
          << parsed.error().message;
    }
  }
}

}  // namespace
}  // namespace ad
