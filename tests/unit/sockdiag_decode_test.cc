// sock_diag decoders over hand-built netlink bytes: every field lands where the kernel puts it,
// and malformed input (truncation at any byte, bad lengths, kernel errors) is a decode error,
// never a crash or a guess. No root needed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "sources/sockdiag/inet_diag.h"
#include "sources/sockdiag/unix_diag.h"

namespace ad {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
void Append(Bytes* out, const T& value) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
  out->insert(out->end(), bytes, bytes + sizeof(value));
}

void Pad(Bytes* out) { out->resize((out->size() + 3) & ~size_t{3}); }

void Attribute(Bytes* out, uint16_t type, const void* value, size_t size) {
  const uint16_t length = static_cast<uint16_t>(4 + size);
  Append(out, length);
  Append(out, type);
  const auto* bytes = static_cast<const uint8_t*>(value);
  out->insert(out->end(), bytes, bytes + size);
  Pad(out);
}

// One netlink message around `payload`.
Bytes Message(uint16_t type, const Bytes& payload) {
  Bytes out;
  nlmsghdr header{};
  header.nlmsg_len = static_cast<uint32_t>(NLMSG_HDRLEN + payload.size());
  header.nlmsg_type = type;
  header.nlmsg_flags = NLM_F_MULTI;
  Append(&out, header);
  out.insert(out.end(), payload.begin(), payload.end());
  Pad(&out);
  return out;
}

Bytes Done() { return Message(NLMSG_DONE, Bytes(4, 0)); }

Bytes Concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

struct UnixSpec {
  uint8_t type = SOCK_SEQPACKET;
  uint8_t state = 1;
  uint32_t inode = 0;
  std::string name;  // raw bytes as the kernel sends them ("" = no attribute)
  uint32_t vfs_inode = 0;
  uint32_t vfs_dev_kernel = 0;
  uint32_t peer = 0;
  bool with_icons = false;
  std::vector<uint32_t> icons;
  uint32_t rqueue = 0;
  uint32_t wqueue = 0;
};

Bytes UnixMessage(const UnixSpec& spec) {
  Bytes payload;
  unix_diag_msg message{};
  message.udiag_family = AF_UNIX;
  message.udiag_type = spec.type;
  message.udiag_state = spec.state;
  message.udiag_ino = spec.inode;
  Append(&payload, message);
  if (!spec.name.empty()) Attribute(&payload, UNIX_DIAG_NAME, spec.name.data(), spec.name.size());
  if (spec.vfs_inode != 0) {
    unix_diag_vfs vfs{.udiag_vfs_ino = spec.vfs_inode, .udiag_vfs_dev = spec.vfs_dev_kernel};
    Attribute(&payload, UNIX_DIAG_VFS, &vfs, sizeof(vfs));
  }
  Attribute(&payload, UNIX_DIAG_PEER, &spec.peer, sizeof(spec.peer));
  if (spec.with_icons) {
    Attribute(&payload, UNIX_DIAG_ICONS, spec.icons.data(), spec.icons.size() * 4);
  }
  unix_diag_rqlen queues{.udiag_rqueue = spec.rqueue, .udiag_wqueue = spec.wqueue};
  Attribute(&payload, UNIX_DIAG_RQLEN, &queues, sizeof(queues));
  return Message(SOCK_DIAG_BY_FAMILY, payload);
}

const std::string kPath = "/var/run/ztunnel/ztunnel.sock";

Bytes ZdsDump() {
  const std::string name = kPath + std::string(1, '\0');  // path names carry their NUL
  return Concat({
      UnixMessage({.state = 10,
                   .inode = 100,
                   .name = name,
                   .vfs_inode = 77,
                   .vfs_dev_kernel = (254u << 20) | 1,
                   .with_icons = true,
                   .icons = {300},
                   .rqueue = 1,
                   .wqueue = 16}),
      UnixMessage({.inode = 101,
                   .name = name,
                   .vfs_inode = 77,
                   .vfs_dev_kernel = (254u << 20) | 1,
                   .peer = 200,
                   .rqueue = 2,
                   .wqueue = 0}),
      UnixMessage(
          {.type = SOCK_STREAM, .state = 10, .inode = 102, .name = std::string("\0abstract", 9)}),
      Done(),
  });
}

TEST(UnixDiagDecode, DecodesListenerAcceptedAndAbstractSockets) {
  auto sockets = DecodeUnixDiagMessages(ZdsDump());
  ASSERT_TRUE(sockets.ok()) << sockets.error().message;
  ASSERT_EQ(sockets->size(), 3u);
  const UnixSocket& listener = (*sockets)[0];
  EXPECT_EQ(listener.inode, 100u);
  EXPECT_EQ(listener.type, static_cast<uint32_t>(SOCK_SEQPACKET));
  EXPECT_EQ(listener.state, kUnixStateListen);
  EXPECT_EQ(listener.path, kPath);
  EXPECT_EQ(listener.vfs_inode, 77u);
  EXPECT_EQ(listener.vfs_dev, makedev(254, 1));  // kernel dev_t re-encoded like st_dev
  EXPECT_EQ(listener.pending_client_inodes, std::vector<uint64_t>{300});
  EXPECT_EQ(listener.receive_queue, 1u);  // backlog length
  EXPECT_EQ(listener.send_queue, 0u);     // the kernel's backlog limit is not a queue
  const UnixSocket& accepted = (*sockets)[1];
  EXPECT_EQ(accepted.peer_inode, 200u);
  EXPECT_EQ(accepted.receive_queue, 2u);
  EXPECT_EQ(accepted.state, kUnixStateEstablished);
  EXPECT_EQ((*sockets)[2].path, "@abstract");
  EXPECT_EQ((*sockets)[2].type, static_cast<uint32_t>(SOCK_STREAM));
}

TEST(UnixDiagDecode, EmptyDumpIsNoSockets) {
  auto sockets = DecodeUnixDiagMessages(Done());
  ASSERT_TRUE(sockets.ok());
  EXPECT_TRUE(sockets->empty());
}

TEST(UnixDiagDecode, EveryTruncationIsAnErrorNotACrash) {
  const Bytes full = ZdsDump();
  for (size_t size = 0; size < full.size(); ++size) {
    auto sockets = DecodeUnixDiagMessages(std::span(full.data(), size));
    ASSERT_FALSE(sockets.ok()) << "prefix of " << size << " bytes decoded";
    EXPECT_EQ(sockets.error().source(), "sockdiag");
    EXPECT_EQ(sockets.error().error_number, EBADMSG);
  }
}

TEST(UnixDiagDecode, KernelErrorCarriesItsErrno) {
  Bytes payload;
  Append(&payload, int32_t{-EPERM});
  auto sockets = DecodeUnixDiagMessages(Message(NLMSG_ERROR, payload));
  ASSERT_FALSE(sockets.ok());
  EXPECT_EQ(sockets.error().error_number, EPERM);
  EXPECT_NE(sockets.error().message.find("Operation not permitted"), std::string::npos);
}

TEST(UnixDiagDecode, RejectsLengthsThatDoNotFit) {
  Bytes bad_header = ZdsDump();
  bad_header[0] = 0xff;  // nlmsg_len beyond the buffer
  EXPECT_FALSE(DecodeUnixDiagMessages(bad_header).ok());

  Bytes tiny_header = ZdsDump();
  std::memset(tiny_header.data(), 0, 4);  // nlmsg_len 0 would loop forever if accepted
  EXPECT_FALSE(DecodeUnixDiagMessages(tiny_header).ok());

  Bytes bad_attribute = ZdsDump();
  const size_t first_attribute = NLMSG_HDRLEN + sizeof(unix_diag_msg);
  bad_attribute[first_attribute] = 0xff;  // rta_len beyond the message
  bad_attribute[first_attribute + 1] = 0x7f;
  auto sockets = DecodeUnixDiagMessages(bad_attribute);
  ASSERT_FALSE(sockets.ok());
  EXPECT_NE(sockets.error().message.find("does not fit"), std::string::npos);
}

TEST(UnixDiagDecode, RejectsShortFixedSizeAttributes) {
  Bytes payload;
  unix_diag_msg message{};
  message.udiag_family = AF_UNIX;
  Append(&payload, message);
  const uint16_t short_peer = 7;
  Attribute(&payload, UNIX_DIAG_PEER, &short_peer, sizeof(short_peer));
  auto sockets = DecodeUnixDiagMessages(Concat({Message(SOCK_DIAG_BY_FAMILY, payload), Done()}));
  ASSERT_FALSE(sockets.ok());
  EXPECT_NE(sockets.error().message.find("short UNIX_DIAG_PEER"), std::string::npos);
}

TEST(UnixDiagDecode, RejectsWrongFamilyAndUnknownMessageTypes) {
  Bytes payload;
  unix_diag_msg message{};
  message.udiag_family = AF_INET;
  Append(&payload, message);
  EXPECT_FALSE(
      DecodeUnixDiagMessages(Concat({Message(SOCK_DIAG_BY_FAMILY, payload), Done()})).ok());
  EXPECT_FALSE(DecodeUnixDiagMessages(Concat({Message(0x1234, Bytes(8, 0)), Done()})).ok());
}

TEST(UnixDiagDecode, IgnoresUnknownAttributes) {
  Bytes payload;
  unix_diag_msg message{};
  message.udiag_family = AF_UNIX;
  message.udiag_ino = 5;
  Append(&payload, message);
  const uint64_t future = 42;
  Attribute(&payload, 99, &future, sizeof(future));
  auto sockets = DecodeUnixDiagMessages(Concat({Message(SOCK_DIAG_BY_FAMILY, payload), Done()}));
  ASSERT_TRUE(sockets.ok());
  ASSERT_EQ(sockets->size(), 1u);
  EXPECT_EQ((*sockets)[0].inode, 5u);
}

Bytes InetMessage(int family, const char* address, uint16_t port, uint32_t inode,
                  std::optional<uint32_t> mark, uint16_t type = SOCK_DIAG_BY_FAMILY) {
  Bytes payload;
  inet_diag_msg message{};
  message.idiag_family = static_cast<uint8_t>(family);
  message.idiag_state = TCP_LISTEN;
  message.id.idiag_sport = htons(port);
  ::inet_pton(family, address, &message.id.idiag_src[0]);
  message.idiag_inode = inode;
  Append(&payload, message);
  if (mark) Attribute(&payload, INET_DIAG_MARK, &*mark, sizeof(*mark));
  return Message(type, payload);
}

TEST(InetDiagDecode, DecodesAddressesPortsAndMarks) {
  const Bytes dump = Concat({InetMessage(AF_INET, "0.0.0.0", 15001, 11, 0x539),
                             InetMessage(AF_INET6, "::", 15008, 12, 0x539),
                             InetMessage(AF_INET6, "::1", 15053, 13, std::nullopt), Done()});
  auto listeners = DecodeInetDiagMessages(dump, IPPROTO_TCP);
  ASSERT_TRUE(listeners.ok()) << listeners.error().message;
  ASSERT_EQ(listeners->size(), 3u);
  EXPECT_EQ((*listeners)[0].family, Family::kIpv4);
  EXPECT_EQ((*listeners)[0].address, "0.0.0.0");
  EXPECT_EQ((*listeners)[0].port, 15001);
  EXPECT_EQ((*listeners)[0].protocol, IPPROTO_TCP);
  EXPECT_EQ((*listeners)[0].inode, 11u);
  EXPECT_EQ((*listeners)[0].mark, 0x539u);
  EXPECT_TRUE((*listeners)[0].mark_known);
  EXPECT_EQ((*listeners)[1].family, Family::kIpv6);
  EXPECT_EQ((*listeners)[1].address, "::");
  EXPECT_EQ((*listeners)[2].address, "::1");
  EXPECT_FALSE((*listeners)[2].mark_known);  // no CAP_NET_ADMIN: no attribute, not "mark 0"
}

TEST(InetDiagDecode, EveryTruncationIsAnErrorNotACrash) {
  const Bytes full = Concat({InetMessage(AF_INET, "127.0.0.1", 15053, 1, 0x539), Done()});
  for (size_t size = 0; size < full.size(); ++size) {
    EXPECT_FALSE(DecodeInetDiagMessages(std::span(full.data(), size), IPPROTO_UDP).ok()) << size;
  }
}

TEST(InetDiagDecode, RejectsNonInetFamily) {
  Bytes message = InetMessage(AF_INET, "1.2.3.4", 1, 1, std::nullopt);
  message[NLMSG_HDRLEN] = AF_UNIX;
  EXPECT_FALSE(DecodeInetDiagMessages(Concat({message, Done()}), IPPROTO_TCP).ok());
}

TEST(InetDiagDecode, RequestFiltersStatesInTheKernel) {
  inet_diag_req_v2 tcp{};
  const Bytes tcp_bytes = ListenerDumpRequest(AF_INET6, IPPROTO_TCP);
  ASSERT_EQ(tcp_bytes.size(), sizeof(tcp));
  std::memcpy(&tcp, tcp_bytes.data(), sizeof(tcp));
  EXPECT_EQ(tcp.sdiag_family, AF_INET6);
  EXPECT_EQ(tcp.idiag_states, 1u << TCP_LISTEN);
  inet_diag_req_v2 udp{};
  std::memcpy(&udp, ListenerDumpRequest(AF_INET, IPPROTO_UDP).data(), sizeof(udp));
  EXPECT_EQ(udp.sdiag_protocol, IPPROTO_UDP);
  EXPECT_EQ(udp.idiag_states, 1u << TCP_CLOSE);
}

TEST(InetDiagDecode, OneWalkTcpDumpHoldsBothFamiliesUnderItsRequestType) {
  const Bytes dump =
      Concat({InetMessage(AF_INET, "0.0.0.0", 15001, 11, 0x539, TCPDIAG_GETSOCK),
              InetMessage(AF_INET6, "::", 15008, 12, 0x539, TCPDIAG_GETSOCK), Done()});
  auto listeners = DecodeInetDiagMessages(dump, IPPROTO_TCP, TCPDIAG_GETSOCK);
  ASSERT_TRUE(listeners.ok()) << listeners.error().message;
  ASSERT_EQ(listeners->size(), 2u);
  EXPECT_EQ((*listeners)[0].family, Family::kIpv4);
  EXPECT_EQ((*listeners)[1].family, Family::kIpv6);
  EXPECT_EQ((*listeners)[1].port, 15008);
  // Each reply type is accepted only where it was asked for.
  EXPECT_FALSE(DecodeInetDiagMessages(dump, IPPROTO_TCP).ok());
  const Bytes by_family = Concat({InetMessage(AF_INET, "0.0.0.0", 15001, 11, 0x539), Done()});
  EXPECT_FALSE(DecodeInetDiagMessages(by_family, IPPROTO_TCP, TCPDIAG_GETSOCK).ok());
}

TEST(InetDiagDecode, OneWalkTcpRequestAsksForListenersOfAnyFamily) {
  inet_diag_req request{};
  const Bytes bytes = TcpListenerDumpRequest();
  ASSERT_EQ(bytes.size(), sizeof(request));
  std::memcpy(&request, bytes.data(), sizeof(request));
  EXPECT_EQ(request.idiag_family, AF_UNSPEC);
  EXPECT_EQ(request.idiag_states, 1u << TCP_LISTEN);
}

}  // namespace
}  // namespace ad
