// Listening sockets through the kernel inspector: ztunnel-like in-pod listeners (TCP 15001, 15006,
// 15008 with SO_MARK 0x539, DNS 15053 on TCP+UDP localhost) created by a forked process inside a
// test netns come back with family, address, port, mark and, after the ZDS source ran, their
// owner pid. Connected sockets are not listeners.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "child_process_util.h"
#include "netns_test_util.h"
#include "scan/inspector.h"
#include "scan/zds_node_source.h"
#include "sources/netns/netns_guard.h"
#include "sources/sockdiag/inet_diag.h"

namespace ad {
namespace {

using testing::ChildChannel;
using testing::ChildProcess;

constexpr uint32_t kZtunnelMark = 0x539;

// Child side: one socket of `type` bound to address:port, marked, listening for TCP.
bool OpenListener(int family, int type, const char* address, uint16_t port, bool marked) {
  const int fd = ::socket(family, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (marked && ::setsockopt(fd, SOL_SOCKET, SO_MARK, &kZtunnelMark, sizeof(kZtunnelMark)) != 0) {
    return false;
  }
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    ::inet_pton(AF_INET, address, &in->sin_addr);
    length = sizeof(*in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    ::inet_pton(AF_INET6, address, &in6->sin6_addr);
    length = sizeof(*in6);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0) return false;
  return type != SOCK_STREAM || ::listen(fd, 16) == 0;
}

// A connected TCP pair on 127.0.0.1:port (listener closed afterwards): neither end may show up.
bool OpenConnectedPair(uint16_t port) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener, 1) != 0) {
    return false;
  }
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return false;
  const int server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
  const int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);  // connected UDP: not bound-only
  return server >= 0 && ::connect(udp, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
}

const ListeningSocket* Find(const std::vector<ListeningSocket>& listeners, uint8_t protocol,
                            Family family, uint16_t port) {
  for (const ListeningSocket& listener : listeners) {
    if (listener.protocol == protocol && listener.family == family && listener.port == port) {
      return &listener;
    }
  }
  return nullptr;
}

TEST(SockDiagListeners, ZtunnelInPodListenersWithMarkAndOwner) {
  if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create network namespaces";
  testing::ScopedNetns pod("listen");
  ASSERT_TRUE(pod.ok());
  ASSERT_EQ(pod.Exec("ip link set lo up"), 0);
  const std::string netns = pod.path();
  ChildProcess ztunnel([netns](const ChildChannel& channel) {
    const bool ok =
        testing::EnterNetns(netns) && OpenListener(AF_INET6, SOCK_STREAM, "::", 15001, true) &&
        OpenListener(AF_INET6, SOCK_STREAM, "::", 15006, true) &&
        OpenListener(AF_INET, SOCK_STREAM, "0.0.0.0", 15008, true) &&
        OpenListener(AF_INET, SOCK_STREAM, "127.0.0.1", 15053, true) &&
        OpenListener(AF_INET, SOCK_DGRAM, "127.0.0.1", 15053, true) &&
        OpenListener(AF_INET6, SOCK_DGRAM, "::1", 15053, true) &&
        OpenListener(AF_INET, SOCK_STREAM, "127.0.0.1", 8080, false) && OpenConnectedPair(9000);
    channel.Signal(ok ? 'r' : 'x');
    channel.Linger();
  });
  ASSERT_EQ(ztunnel.Read(), 'r');

  NetnsRecord record;
  record.inode = testing::InodeOf(netns);
  record.paths = {netns};
  auto inspector = MakeKernelInspector(ReadLimits{});
  NodeSnapshot snapshot;
  snapshot.netns.push_back(inspector->Inspect(record));
  const NetnsSnapshot& pod_snapshot = snapshot.netns[0];
  for (const SourceError& error : pod_snapshot.errors) {
    if (error.source() == "sockdiag") ADD_FAILURE() << error.message;
  }
  // The node scan reads TCP, plus the UDP sockets on ztunnel's DNS port 15053 (a port-filtered
  // dump, only where ztunnel-port TCP listeners are): 5 TCP + 2 UDP. The reader can do all UDP.
  EXPECT_EQ(pod_snapshot.listeners.size(), 7u);
  EXPECT_EQ(pod_snapshot.reads.dns_udp, ReadStatus::kOk);
  ListenerDump with_udp;
  {
    auto guard = NetnsGuard::Enter(netns);
    ASSERT_TRUE(guard.ok()) << guard.error().message;
    with_udp = ReadListeningSockets(/*include_udp=*/true);
  }
  const std::vector<ListeningSocket>& listeners = with_udp.listeners;
  EXPECT_EQ(listeners.size(), 7u);  // not the connected TCP pair on 9000 nor the connected UDP

  struct Expected {
    uint8_t protocol;
    Family family;
    uint16_t port;
    const char* address;
    uint32_t mark;
  };
  for (const Expected& expected : {
           Expected{IPPROTO_TCP, Family::kIpv6, 15001, "::", kZtunnelMark},
           Expected{IPPROTO_TCP, Family::kIpv6, 15006, "::", kZtunnelMark},
           Expected{IPPROTO_TCP, Family::kIpv4, 15008, "0.0.0.0", kZtunnelMark},
           Expected{IPPROTO_TCP, Family::kIpv4, 15053, "127.0.0.1", kZtunnelMark},
           Expected{IPPROTO_UDP, Family::kIpv4, 15053, "127.0.0.1", kZtunnelMark},
           Expected{IPPROTO_UDP, Family::kIpv6, 15053, "::1", kZtunnelMark},
           Expected{IPPROTO_TCP, Family::kIpv4, 8080, "127.0.0.1", 0},
       }) {
    const ListeningSocket* found =
        Find(listeners, expected.protocol, expected.family, expected.port);
    ASSERT_NE(found, nullptr) << "port " << expected.port;
    EXPECT_EQ(found->address, expected.address) << expected.port;
    EXPECT_TRUE(found->mark_known) << expected.port;  // root has CAP_NET_ADMIN
    EXPECT_EQ(found->mark, expected.mark) << expected.port;
    EXPECT_NE(found->inode, 0u);
  }

  // The ZDS source names the owners of every listener from the /proc fd inventory.
  ZdsSourceOptions options;
  options.socket_path = "/nonexistent/adt-no-zds.sock";
  options.netns_path = "/proc/self/ns/net";
  ZdsNodeSource(options).Collect(snapshot);
  for (const ListeningSocket& listener : snapshot.netns[0].listeners) {
    EXPECT_EQ(listener.owner_pids, std::vector<int>{ztunnel.pid()}) << listener.port;
  }
}

TEST(SockDiagListeners, FreshNetnsHasNoneAndNoErrors) {
  if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create network namespaces";
  testing::ScopedNetns empty("listen");
  ASSERT_TRUE(empty.ok());
  NetnsRecord record;
  record.paths = {empty.path()};
  NetnsSnapshot snapshot = MakeKernelInspector(ReadLimits{})->Inspect(record);
  EXPECT_TRUE(snapshot.listeners.empty());
  for (const SourceError& error : snapshot.errors) {
    if (error.source() == "sockdiag") ADD_FAILURE() << error.message;
  }
}

}  // namespace
}  // namespace ad
