#include "sources/sockdiag/inet_diag.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
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
  Status walked = WalkSockDiagDump(
      bytes,
      [&](std::span<const uint8_t> payload) { return DecodeOne(payload, protocol, &listeners); },
      message_type);
  if (!walked.ok()) {
    SourceError error = walked.error();
    error.message = "inet " + error.message;
    return error;
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

std::vector<uint8_t> UdpPortDumpRequest(int family, uint16_t port) {
  std::vector<uint8_t> request = ListenerDumpRequest(family, IPPROTO_UDP);
  inet_diag_req_v2 header{};
  std::memcpy(&header, request.data(), sizeof(header));
  header.id.idiag_sport = htons(port);  // udp_dump skips other ports before running the filter
  std::memcpy(request.data(), &header, sizeof(header));
  // Bytecode: each op jumps `yes` bytes on a match, `no` bytes otherwise; landing on the end of
  // the program accepts, landing 4 bytes past it rejects. A port comparison's operand is the
  // `no` field of the op that follows it.
  constexpr uint16_t kOp = sizeof(inet_diag_bc_op);
  constexpr uint16_t kLength = 4 * kOp;
  const inet_diag_bc_op program[4] = {
      {INET_DIAG_BC_S_GE, 2 * kOp, kLength + 4},  // at 0: sport >= port, else reject
      {INET_DIAG_BC_NOP, 0, port},
      {INET_DIAG_BC_S_LE, 2 * kOp, kLength - 2 * kOp + 4},  // at 8: sport <= port, else reject
      {INET_DIAG_BC_NOP, 0, port},
  };
  rtattr attribute{};
  attribute.rta_type = INET_DIAG_REQ_BYTECODE;
  attribute.rta_len = static_cast<unsigned short>(RTA_LENGTH(sizeof(program)));
  const size_t offset = request.size();
  request.resize(offset + RTA_SPACE(sizeof(program)));
  std::memcpy(request.data() + offset, &attribute, sizeof(attribute));
  std::memcpy(request.data() + offset + RTA_LENGTH(0), program, sizeof(program));
  return request;
}

std::vector<uint8_t> UdpLoopbackLookupRequest(int family, uint16_t port) {
  inet_diag_req_v2 request{};
  request.sdiag_family = static_cast<uint8_t>(family);
  request.sdiag_protocol = IPPROTO_UDP;
  request.idiag_states = ~0u;
  // udp_dump_one looks up (src, sport) -> (dst, dport) like an arriving datagram: the local end
  // is idiag_dst:idiag_dport. Source = destination = loopback, as for a redirected query.
  request.id.idiag_dport = htons(port);
  if (family == AF_INET6) {
    const in6_addr loopback = IN6ADDR_LOOPBACK_INIT;
    std::memcpy(request.id.idiag_dst, &loopback, sizeof(loopback));
    std::memcpy(request.id.idiag_src, &loopback, sizeof(loopback));
  } else {
    request.id.idiag_dst[0] = htonl(INADDR_LOOPBACK);
    request.id.idiag_src[0] = htonl(INADDR_LOOPBACK);
  }
  request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  const auto* bytes = reinterpret_cast<const uint8_t*>(&request);
  return std::vector<uint8_t>(bytes, bytes + sizeof(request));
}

namespace {

// The reply of one exact-socket request: its socket message, then the ACK, or an NLMSG_ERROR.
// ENOENT (nothing bound there) and EAFNOSUPPORT (no IPv6) are "no socket".
Result<std::vector<ListeningSocket>> DecodeLookupReply(std::span<const uint8_t> reply,
                                                       const std::string& what) {
  std::vector<uint8_t> messages;
  size_t offset = 0;
  while (offset + sizeof(nlmsghdr) <= reply.size()) {
    nlmsghdr header{};
    std::memcpy(&header, reply.data() + offset, sizeof(header));
    if (header.nlmsg_len < sizeof(nlmsghdr) || header.nlmsg_len > reply.size() - offset) {
      return DecodeError(what, "message length " + std::to_string(header.nlmsg_len));
    }
    if (header.nlmsg_type == NLMSG_ERROR) {
      int32_t error = 0;
      if (header.nlmsg_len < NLMSG_HDRLEN + sizeof(error)) {
        return DecodeError(what, "truncated NLMSG_ERROR");
      }
      std::memcpy(&error, reply.data() + offset + NLMSG_HDRLEN, sizeof(error));
      const int err = error < 0 ? -error : error;
      if (err == ENOENT || err == EAFNOSUPPORT) return std::vector<ListeningSocket>{};
      if (err != 0) {
        return SourceError{kSockDiagSource, what + ": kernel answered " + std::strerror(err), err};
      }
      break;  // the ACK after the socket
    }
    if (header.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      messages.insert(messages.end(), reply.begin() + static_cast<std::ptrdiff_t>(offset),
                      reply.begin() + static_cast<std::ptrdiff_t>(offset + header.nlmsg_len));
      messages.resize((messages.size() + 3) & ~size_t{3});
    }
    offset += NLMSG_ALIGN(header.nlmsg_len);
  }
  // Decoded by the dump decoder: the messages, then the NLMSG_DONE a dump would end with.
  nlmsghdr done{};
  done.nlmsg_len = NLMSG_LENGTH(sizeof(int));
  done.nlmsg_type = NLMSG_DONE;
  const size_t at = messages.size();
  messages.resize(at + done.nlmsg_len);
  std::memcpy(messages.data() + at, &done, sizeof(done));
  return DecodeInetDiagMessages(messages, IPPROTO_UDP);
}

}  // namespace

ListenerDump ReadUdpSocketsOnPort(uint16_t port) {
  ListenerDump dump;
  auto socket = OpenSockDiagSocket();
  if (!socket.ok()) {
    dump.errors.push_back(socket.error());
    return dump;
  }
  for (int family : {AF_INET, AF_INET6}) {
    const std::string what =
        DumpName(family, IPPROTO_UDP) + " lookup of port " + std::to_string(port);
    auto raw = DumpSockDiag(*socket, UdpLoopbackLookupRequest(family, port), what,
                            kMaxSockDiagDumpBytes, SOCK_DIAG_BY_FAMILY, NLM_F_ACK);
    if (!raw.ok()) {
      dump.errors.push_back(raw.error());
      continue;
    }
    auto decoded = DecodeLookupReply(*raw, what);
    if (!decoded.ok()) {
      dump.errors.push_back(decoded.error());
      continue;
    }
    for (ListeningSocket& listener : *decoded) {
      if (listener.port == port) dump.listeners.push_back(std::move(listener));
    }
  }
  return dump;
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
                     uint16_t message_type) -> Status {
    auto raw = DumpSockDiag(*socket, request, what, kMaxSockDiagDumpBytes, message_type);
    if (!raw.ok()) return raw.error();
    auto decoded = DecodeInetDiagMessages(*raw, IPPROTO_TCP, message_type);
    if (!decoded.ok()) {
      SourceError error = decoded.error();
      error.message = what + ": " + error.message;
      return error;
    }
    for (const ListeningSocket& entry : *decoded) inodes.push_back(entry.inode);
    return OkStatus();
  };
  inet_diag_req one_walk{};
  one_walk.idiag_states = state_mask;
  const auto* one_walk_bytes = reinterpret_cast<const uint8_t*>(&one_walk);
  // When the one-walk request fails (a kernel without it answers NLMSG_ERROR), one
  // SOCK_DIAG_BY_FAMILY dump per family instead; their failures are the ones reported.
  if (Status one_walk_dumped = collect("tcp", {one_walk_bytes, sizeof(one_walk)}, TCPDIAG_GETSOCK);
      !one_walk_dumped.ok()) {
    inodes.clear();
    for (int family : {AF_INET, AF_INET6}) {
      inet_diag_req_v2 request{};
      request.sdiag_family = static_cast<uint8_t>(family);
      request.sdiag_protocol = IPPROTO_TCP;
      request.idiag_states = state_mask;
      const auto* bytes = reinterpret_cast<const uint8_t*>(&request);
      if (Status dumped =
              collect(DumpName(family, IPPROTO_TCP), {bytes, sizeof(request)}, SOCK_DIAG_BY_FAMILY);
          !dumped.ok()) {
        return dumped.error();
      }
    }
  }
  return inodes;
}

}  // namespace ad
