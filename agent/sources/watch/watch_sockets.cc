#include "sources/watch/watch_sockets.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace ad::watch {
namespace {

// One receive size per socket, never below 32 KiB: the kernel sizes netlink skbs after the
// largest buffer a socket has used, and a smaller later recv would truncate datagrams.
constexpr size_t kReceiveSize = 64 * 1024;

Result<UniqueFd> OpenNetlink(int protocol, uint32_t groups, int receive_buffer, SourceKind kind,
                             const char* what) {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol));
  if (!fd.valid()) return ErrnoError(kind, std::string("socket(") + what + ")");
  if (receive_buffer > 0 &&
      ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer)) != 0) {
    return ErrnoError(kind, std::string("setsockopt(") + what + ", SO_RCVBUF)");
  }
  sockaddr_nl address{};
  address.nl_family = AF_NETLINK;
  address.nl_groups = groups;
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return ErrnoError(kind, std::string("bind(") + what + ")");
  }
  return fd;
}

struct NewGenAttributes {
  const nlattr* id = nullptr;
  const nlattr* pid = nullptr;
  const nlattr* name = nullptr;
};

int CollectNewGenAttribute(const nlattr* attribute, void* data) {
  auto* out = static_cast<NewGenAttributes*>(data);
  switch (mnl_attr_get_type(attribute)) {
    case NFTA_GEN_ID:
      if (mnl_attr_validate(attribute, MNL_TYPE_U32) >= 0) out->id = attribute;
      break;
    case NFTA_GEN_PROC_PID:
      if (mnl_attr_validate(attribute, MNL_TYPE_U32) >= 0) out->pid = attribute;
      break;
    case NFTA_GEN_PROC_NAME:
      if (mnl_attr_validate(attribute, MNL_TYPE_NUL_STRING) >= 0) out->name = attribute;
      break;
    default:
      break;
  }
  return MNL_CB_OK;
}

NftCommit DecodeNewGen(const nlmsghdr* message) {
  NewGenAttributes attributes;
  mnl_attr_parse(message, sizeof(nfgenmsg), CollectNewGenAttribute, &attributes);
  NftCommit commit;
  if (attributes.id != nullptr) commit.generation = ntohl(mnl_attr_get_u32(attributes.id));
  if (attributes.pid != nullptr) commit.committer_pid = ntohl(mnl_attr_get_u32(attributes.pid));
  if (attributes.name != nullptr) commit.committer_name = mnl_attr_get_str(attributes.name);
  return commit;
}

constexpr uint16_t NftMessageType(uint16_t message) {
  return static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | message);
}

}  // namespace

Result<NftEventSocket> NftEventSocket::Open(int receive_buffer) {
  Result<UniqueFd> fd = OpenNetlink(NETLINK_NETFILTER, 1u << (NFNLGRP_NFTABLES - 1), receive_buffer,
                                    SourceKind::kNftables, "NFNLGRP_NFTABLES");
  if (!fd.ok()) return fd.error();
  return NftEventSocket(std::move(fd).value());
}

// Reads every queued datagram of a non-blocking netlink event socket and hands each message to
// `on_message`. ENOBUFS (events lost) sets *overflow once and reading goes on: what is queued after
// it is fresh. Any other error also counts as an overflow (unknown state) and ends the drain.
template <typename OnMessage>
Status DrainNetlink(int fd, SourceKind kind, const char* what, bool* overflow,
                    OnMessage on_message) {
  std::array<char, kReceiveSize> buffer;
  for (;;) {
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return OkStatus();
      if (errno == ENOBUFS) {
        *overflow = true;
        continue;
      }
      *overflow = true;
      return ErrnoError(kind, std::string("recv(") + what + ")");
    }
    int remaining = static_cast<int>(n);
    for (auto* message = reinterpret_cast<const nlmsghdr*>(buffer.data());
         mnl_nlmsg_ok(message, remaining); message = mnl_nlmsg_next(message, &remaining)) {
      on_message(message);
    }
  }
}

NftDrain NftEventSocket::Drain() {
  NftDrain drain;
  Status drained = DrainNetlink(fd_.get(), SourceKind::kNftables, "NFNLGRP_NFTABLES",
                                &drain.overflow, [&drain](const nlmsghdr* message) {
                                  if (message->nlmsg_type == NftMessageType(NFT_MSG_NEWGEN)) {
                                    if (drain.commits.size() < kMaxCommitsPerDrain) {
                                      drain.commits.push_back(DecodeNewGen(message));
                                    } else {
                                      ++drain.commits_dropped;
                                    }
                                  } else if ((message->nlmsg_type >> 8) == NFNL_SUBSYS_NFTABLES) {
                                    ++drain.object_messages;
                                  }
                                });
  if (!drained.ok()) drain.error = drained.error();
  return drain;
}

Result<NftGenerationGate> NftGenerationGate::Open() {
  Result<UniqueFd> fd = OpenNetlink(NETLINK_NETFILTER, 0, 0, SourceKind::kNftables, "GETGEN");
  if (!fd.ok()) return fd.error();
  return NftGenerationGate(std::move(fd).value());
}

Result<uint32_t> NftGenerationGate::Generation() {
  std::array<char, 256> request{};
  nlmsghdr* header = mnl_nlmsg_put_header(request.data());
  header->nlmsg_type = NftMessageType(NFT_MSG_GETGEN);
  header->nlmsg_flags = NLM_F_REQUEST;
  header->nlmsg_seq = ++sequence_;
  auto* gen = static_cast<nfgenmsg*>(mnl_nlmsg_put_extra_header(header, sizeof(nfgenmsg)));
  gen->nfgen_family = AF_UNSPEC;
  gen->version = NFNETLINK_V0;
  gen->res_id = 0;
  if (::send(fd_.get(), header, header->nlmsg_len, 0) < 0) {
    return ErrnoError(SourceKind::kNftables, "send(NFT_MSG_GETGEN)");
  }
  std::array<char, kReceiveSize> buffer;
  for (;;) {
    // The socket is non-blocking; the reply is queued before send() returns.
    const ssize_t n = ::recv(fd_.get(), buffer.data(), buffer.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(SourceKind::kNftables, "recv(NFT_MSG_GETGEN)");
    }
    int remaining = static_cast<int>(n);
    for (auto* message = reinterpret_cast<const nlmsghdr*>(buffer.data());
         mnl_nlmsg_ok(message, remaining); message = mnl_nlmsg_next(message, &remaining)) {
      if (message->nlmsg_seq != sequence_) continue;  // a stale reply of an earlier call
      if (message->nlmsg_type == NLMSG_ERROR) {
        const auto* error = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(message));
        return ErrnoError(SourceKind::kNftables, "NFT_MSG_GETGEN", -error->error);
      }
      if (message->nlmsg_type == NftMessageType(NFT_MSG_NEWGEN)) {
        return DecodeNewGen(message).generation;
      }
    }
  }
}

Result<RouteEventSocket> RouteEventSocket::Open(int receive_buffer) {
  Result<UniqueFd> fd =
      OpenNetlink(NETLINK_ROUTE, 0, receive_buffer, SourceKind::kRoute, "NETLINK_ROUTE");
  if (!fd.ok()) return fd.error();
  for (int group : {RTNLGRP_IPV4_RULE, RTNLGRP_IPV6_RULE, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE}) {
    if (::setsockopt(fd->get(), SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) != 0) {
      return ErrnoError(SourceKind::kRoute,
                        "setsockopt(NETLINK_ADD_MEMBERSHIP " + std::to_string(group) + ")");
    }
  }
  return RouteEventSocket(std::move(fd).value());
}

// The table of a route message: RTA_TABLE when present (ids above 255), else rtm_table.
uint32_t RouteTable(const nlmsghdr* message) {
  const auto* route = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(message));
  uint32_t table = route->rtm_table;
  const auto* tail = static_cast<const char*>(mnl_nlmsg_get_payload_tail(message));
  for (auto* attribute =
           static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(message, sizeof(rtmsg)));
       mnl_attr_ok(attribute, static_cast<int>(tail - reinterpret_cast<const char*>(attribute)));
       attribute = mnl_attr_next(attribute)) {
    if (mnl_attr_get_type(attribute) == RTA_TABLE &&
        mnl_attr_validate(attribute, MNL_TYPE_U32) >= 0) {
      table = mnl_attr_get_u32(attribute);
    }
  }
  return table;
}

RouteDrain RouteEventSocket::Drain() {
  RouteDrain drain;
  Status drained = DrainNetlink(fd_.get(), SourceKind::kRoute, "NETLINK_ROUTE", &drain.overflow,
                                [&drain](const nlmsghdr* message) {
                                  switch (message->nlmsg_type) {
                                    case RTM_NEWRULE:
                                    case RTM_DELRULE:
                                      ++drain.rule_messages;
                                      break;
                                    case RTM_NEWROUTE:
                                    case RTM_DELROUTE:
                                      ++drain.route_messages;
                                      drain.route_tables.insert(RouteTable(message));
                                      break;
                                    default:
                                      break;
                                  }
                                });
  if (!drained.ok()) drain.error = drained.error();
  return drain;
}

}  // namespace ad::watch
