#include "sources/sockdiag/inet_diag.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>

#include "sources/sockdiag/netlink_messages.h"
#include "sources/sockdiag/sock_diag_socket.h"

namespace ad {
namespace {

std::string DumpName(int family, uint8_t protocol) {
  return std::string(protocol == IPPROTO_UDP ? "udp" : "tcp") +
         (family == AF_INET6 ? "/ipv6" : "/ipv4");
}

std::optional<std::string> DecodeOne(std::span<const uint8_t> payload, uint8_t protocol,
                                     std::vector<ListeningSocket>* listeners) {
  inet_diag_msg message{};
  if (payload.size() < sizeof(message)) {
    return "inet_diag_msg of " + std::to_string(payload.size()) + " bytes is too short";
  }
  std::memcpy(&message, payload.data(), sizeof(message));
  ListeningSocket listener;
  listener.protocol = protocol;
  listener.port = ntohs(message.id.idiag_sport);
  listener.inode = message.idiag_inode;
  char text[INET6_ADDRSTRLEN] = {};
  if (message.idiag_family == AF_INET) {
    listener.family = Family::kIpv4;
    ::inet_ntop(AF_INET, &message.id.idiag_src[0], text, sizeof(text));
  } else if (message.idiag_family == AF_INET6) {
    listener.family = Family::kIpv6;
    ::inet_ntop(AF_INET6, &message.id.idiag_src[0], text, sizeof(text));
  } else {
    return "inet_diag_msg family " + std::to_string(message.idiag_family) + " is not inet";
  }
  listener.address = text;
  std::optional<std::string> problem;
  std::optional<std::string> walk = WalkAttributes(
      payload.subspan(std::min(payload.size(), size_t{NLMSG_ALIGN(sizeof(message))})),
      [&](uint16_t type, std::span<const uint8_t> value) {
        if (type != INET_DIAG_MARK) return;
        if (value.size() < sizeof(uint32_t)) {
          problem = "short INET_DIAG_MARK";
          return;
        }
        std::memcpy(&listener.mark, value.data(), sizeof(listener.mark));
        listener.mark_known = true;
      });
  if (walk) return walk;
  if (problem) return problem;
  listeners->push_back(std::move(listener));
  return std::nullopt;
}

}  // namespace

Result<std::vector<ListeningSocket>> DecodeInetDiagMessages(std::span<const uint8_t> bytes,
                                                            uint8_t protocol,
                                                            uint16_t message_type) {
  std::vector<ListeningSocket> listeners;
  if (std::optional<SourceError> error = WalkSockDiagDump(
          bytes,
          [&](std::span<const uint8_t> payload) {
            return DecodeOne(payload, protocol, &listeners);
          },
          message_type)) {
    error->message = "inet " + error->message;
    return *error;
  }
  return listeners;
}

std::vector<uint8_t> ListenerDumpRequest(int family, uint8_t protocol) {
  inet_diag_req_v2 request{};
  request.sdiag_family = static_cast<uint8_t>(family);
  request.sdiag_protocol = protocol;
  // A bound UDP socket without a peer sits in TCP_CLOSE; a connected one would be ESTABLISHED.
  request.idiag_states = protocol == IPPROTO_UDP ? (1u << TCP_CLOSE) : (1u << TCP_LISTEN);
  // The mark needs no idiag_ext bit: the kernel adds INET_DIAG_MARK for CAP_NET_ADMIN readers.
  const auto* bytes = reinterpret_cast<const uint8_t*>(&request);
  return std::vector<uint8_t>(bytes, bytes + sizeof(request));
}

std::vector<uint8_t> TcpListenerDumpRequest() {
  inet_diag_req request{};
  request.idiag_states = 1u << TCP_LISTEN;
  const auto* bytes = reinterpret_cast<const uint8_t*>(&request);
  return std::vector<uint8_t>(bytes, bytes + sizeof(request));
}

Result<std::vector<uint8_t>> DumpInetDiagRaw(int family, uint8_t protocol) {
  auto socket = OpenSockDiagSocket();
  if (!socket.ok()) return socket.error();
  return DumpSockDiag(*socket, ListenerDumpRequest(family, protocol), DumpName(family, protocol));
}

ListenerDump ReadListeningSockets(bool include_udp) {
  ListenerDump dump;
  auto socket = OpenSockDiagSocket();
  if (!socket.ok()) {
    dump.errors.push_back(socket.error());
    return dump;
  }
  // With `record_failure` false, a failed dump records nothing and returns false.
  auto collect = [&](const std::string& what, std::span<const uint8_t> request, uint8_t protocol,
                     uint16_t message_type, bool record_failure = true) {
    auto raw = DumpSockDiag(*socket, request, what, kMaxSockDiagDumpBytes, message_type);
    if (!raw.ok()) {
      if (!record_failure) return false;
      dump.errors.push_back(raw.error());
      return true;
    }
    auto decoded = DecodeInetDiagMessages(*raw, protocol, message_type);
    if (!decoded.ok()) {
      if (!record_failure) return false;
      SourceError error = decoded.error();
      error.message = what + ": " + error.message;
      dump.errors.push_back(std::move(error));
      return true;
    }
    for (ListeningSocket& listener : *decoded) {
      if (listener.port != 0) {  // an unbound UDP socket has no port to listen on
        dump.listeners.push_back(std::move(listener));
      }
    }
    return true;
  };
  // When the one-walk request fails (a kernel without it answers NLMSG_ERROR), one
  // SOCK_DIAG_BY_FAMILY dump per family instead; their failures are the ones reported.
  if (!collect("tcp", TcpListenerDumpRequest(), IPPROTO_TCP, TCPDIAG_GETSOCK,
               /*record_failure=*/false)) {
    for (int family : {AF_INET, AF_INET6}) {
      collect(DumpName(family, IPPROTO_TCP), ListenerDumpRequest(family, IPPROTO_TCP), IPPROTO_TCP,
              SOCK_DIAG_BY_FAMILY);
    }
  }
  if (include_udp) {
    for (int family : {AF_INET, AF_INET6}) {
      collect(DumpName(family, IPPROTO_UDP), ListenerDumpRequest(family, IPPROTO_UDP), IPPROTO_UDP,
              SOCK_DIAG_BY_FAMILY);
    }
  }
  std::stable_sort(dump.listeners.begin(), dump.listeners.end(),
                   [](const ListeningSocket& a, const ListeningSocket& b) {
                     return std::tie(a.protocol, a.port, a.family, a.address) <
                            std::tie(b.protocol, b.port, b.family, b.address);
                   });
  return dump;
}

Result<std::vector<uint64_t>> TcpSocketInodesInStates(uint32_t state_mask) {
  auto socket = OpenSockDiagSocket();
  if (!socket.ok()) return socket.error();
  std::vector<uint64_t> inodes;
  auto collect = [&](const std::string& what, std::span<const uint8_t> request,
                     uint16_t message_type) -> std::optional<SourceError> {
    auto raw = DumpSockDiag(*socket, request, what, kMaxSockDiagDumpBytes, message_type);
    if (!raw.ok()) return raw.error();
    auto decoded = DecodeInetDiagMessages(*raw, IPPROTO_TCP, message_type);
    if (!decoded.ok()) {
      SourceError error = decoded.error();
      error.message = what + ": " + error.message;
      return error;
    }
    for (const ListeningSocket& entry : *decoded) inodes.push_back(entry.inode);
    return std::nullopt;
  };
  inet_diag_req one_walk{};
  one_walk.idiag_states = state_mask;
  const auto* one_walk_bytes = reinterpret_cast<const uint8_t*>(&one_walk);
  if (collect("tcp", {one_walk_bytes, sizeof(one_walk)}, TCPDIAG_GETSOCK)) {
    inodes.clear();
    for (int family : {AF_INET, AF_INET6}) {
      inet_diag_req_v2 request{};
      request.sdiag_family = static_cast<uint8_t>(family);
      request.sdiag_protocol = IPPROTO_TCP;
      request.idiag_states = state_mask;
      const auto* bytes = reinterpret_cast<const uint8_t*>(&request);
      if (auto error = collect(DumpName(family, IPPROTO_TCP), {bytes, sizeof(request)},
                               SOCK_DIAG_BY_FAMILY)) {
        return *error;
      }
    }
  }
  return inodes;
}

}  // namespace ad
