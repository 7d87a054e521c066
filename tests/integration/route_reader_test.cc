// Istio's in-pod policy routing (fwmark rule + local route in table 100) read back over rtnetlink.
#include "sources/route/route_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "netns_test_util.h"
#include "sources/netns/netns_guard.h"

namespace ad {
namespace {

using testing::ScopedNetns;

class RouteReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

Result<RoutingState> ReadInside(const std::string& path) {
  auto guard = NetnsGuard::Enter(path);
  if (!guard.ok()) return guard.error();
  return ReadRouting({100});
}

TEST_F(RouteReaderTest, IstioPolicyRoutingReadsBack) {
  ScopedNetns netns("route");
  ASSERT_TRUE(netns.ok());
  ASSERT_EQ(netns.Exec("ip link set lo up"), 0);
  ASSERT_EQ(netns.Exec("ip rule add fwmark 0x111/0xfff pref 32764 lookup 100"), 0);
  ASSERT_EQ(netns.Exec("ip route add local 0.0.0.0/0 dev lo table 100"), 0);
  ASSERT_EQ(netns.Exec("ip -6 rule add fwmark 0x111/0xfff pref 32764 lookup 100"), 0);
  ASSERT_EQ(netns.Exec("ip -6 route add local ::/0 dev lo table 100"), 0);
  ASSERT_EQ(netns.Exec("ip link add eth0 type veth peer name peer0"), 0);
  ASSERT_EQ(netns.Exec("ip addr add 10.244.1.5/24 dev eth0"), 0);
  ASSERT_EQ(netns.Exec("ip route add 10.9.0.0/16 dev lo table 200"), 0);  // not requested

  auto state = ReadInside(netns.path());
  ASSERT_TRUE(state.ok()) << state.error().message;

  auto has_rule = [&](Family family) {
    return std::any_of(state->rules.begin(), state->rules.end(), [&](const PolicyRule& r) {
      return r.family == family && r.priority == 32764 && r.fwmark == 0x111 && r.fwmask == 0xfff &&
             r.table == 100 && r.action == "lookup";
    });
  };
  EXPECT_TRUE(has_rule(Family::kIpv4));
  EXPECT_TRUE(has_rule(Family::kIpv6));
  // The default rules are there too (local/main/default lookups).
  EXPECT_TRUE(std::any_of(state->rules.begin(), state->rules.end(), [](const PolicyRule& r) {
    return r.family == Family::kIpv4 && r.table == 254 && r.priority == 32766;
  }));

  auto has_route = [&](Family family, const std::string& dst) {
    return std::any_of(state->routes.begin(), state->routes.end(), [&](const RouteEntry& r) {
      return r.family == family && r.table == 100 && r.type == "local" && r.dst == dst &&
             r.dev == "lo";
    });
  };
  EXPECT_TRUE(has_route(Family::kIpv4, "0.0.0.0/0"));
  EXPECT_TRUE(has_route(Family::kIpv6, "::/0"));
  for (const RouteEntry& r : state->routes) {
    EXPECT_EQ(r.table, 100u) << r.dst;  // only the requested table
  }

  auto pod_ip = std::find_if(state->addresses.begin(), state->addresses.end(),
                             [](const InterfaceAddress& a) { return a.address == "10.244.1.5"; });
  ASSERT_NE(pod_ip, state->addresses.end());
  EXPECT_EQ(pod_ip->ifname, "eth0");
  EXPECT_EQ(pod_ip->prefix_len, 24);
  EXPECT_TRUE(pod_ip->global_scope);
  auto loopback = std::find_if(state->addresses.begin(), state->addresses.end(),
                               [](const InterfaceAddress& a) { return a.address == "127.0.0.1"; });
  ASSERT_NE(loopback, state->addresses.end());
  EXPECT_EQ(loopback->ifname, "lo");
  EXPECT_FALSE(loopback->global_scope);
  EXPECT_FALSE(state->ipv6_disabled);
}

TEST_F(RouteReaderTest, Ipv6DisabledFollowsTheReadingThreadsNetns) {
  ScopedNetns disabled("route");
  ScopedNetns enabled("route");
  ASSERT_TRUE(disabled.ok() && enabled.ok());
  ASSERT_EQ(disabled.Exec("sh -c 'echo 1 > /proc/sys/net/ipv6/conf/lo/disable_ipv6'"), 0);

  // Worker threads, like the scanner's: setns is per thread, the process stays on the host.
  bool disabled_seen = false;
  bool enabled_seen = true;
  std::thread([&] {
    auto a = ReadInside(disabled.path());
    ASSERT_TRUE(a.ok()) << a.error().message;
    disabled_seen = a->ipv6_disabled;
    auto b = ReadInside(enabled.path());
    ASSERT_TRUE(b.ok()) << b.error().message;
    enabled_seen = b->ipv6_disabled;
  }).join();
  EXPECT_TRUE(disabled_seen);
  EXPECT_FALSE(enabled_seen);
}

TEST_F(RouteReaderTest, EmptyNetnsHasNoTable100) {
  ScopedNetns netns("route");
  ASSERT_TRUE(netns.ok());
  auto state = ReadInside(netns.path());
  ASSERT_TRUE(state.ok()) << state.error().message;
  EXPECT_TRUE(state->routes.empty());
  EXPECT_TRUE(std::none_of(state->rules.begin(), state->rules.end(),
                           [](const PolicyRule& r) { return r.table == 100; }));
}

}  // namespace
}  // namespace ad
