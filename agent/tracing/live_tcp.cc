#include "tracing/live_tcp.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "sources/netns/discovery.h"
#include "sources/netns/netns_guard.h"
#include "sources/netns/netns_workers.h"
#include "sources/sockdiag/netlink_messages.h"
#include "sources/sockdiag/sock_diag_socket.h"

namespace ad {
namespace {

// TCP states (include/net/tcp_states.h).
constexpr uint32_t kOpenStates =
    (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4) | (1u << 5) | (1u << 8) | (1u << 9) | (1u << 11);

FlowAddress AddressOf(const uint32_t (&raw)[4], uint8_t family) {
  FlowAddress address;
  uint8_t bytes[16];
  std::memcpy(bytes, raw, sizeof(bytes));
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (family == AF_INET6 && std::memcmp(bytes, kMapped, sizeof(kMapped)) != 0) {
    address.ipv6 = true;
    std::memcpy(address.bytes.data(), bytes, 16);
  } else if (family == AF_INET6) {
    std::memcpy(address.bytes.data(), bytes + 12, 4);
  } else {
    std::memcpy(address.bytes.data(), bytes, 4);
  }
  return address;
}

std::vector<uint8_t> Request(int family) {
  inet_diag_req_v2 request{};
  request.sdiag_family = static_cast<uint8_t>(family);
  request.sdiag_protocol = IPPROTO_TCP;
  request.idiag_states = kOpenStates;
  request.idiag_ext = 1u << (INET_DIAG_INFO - 1);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&request);
  return std::vector<uint8_t>(bytes, bytes + sizeof(request));
}

}  // namespace

Result<std::vector<LiveSocketStats>> DecodeLiveTcpSockets(std::span<const uint8_t> bytes,
                                                          uint32_t netns_inode,
                                                          const std::vector<uint16_t>& ports) {
  std::vector<LiveSocketStats> sockets;
  auto traced = [&ports](uint16_t port) {
    return std::find(ports.begin(), ports.end(), port) != ports.end();
  };
  Status walked =
      WalkSockDiagDump(bytes, [&](std::span<const uint8_t> payload) -> std::optional<std::string> {
        inet_diag_msg message{};
        if (payload.size() < sizeof(message)) return "short inet_diag_msg";
        std::memcpy(&message, payload.data(), sizeof(message));
        LiveSocketStats socket;
        socket.netns_inode = netns_inode;
        socket.tuple.src = AddressOf(message.id.idiag_src, message.idiag_family);
        socket.tuple.dst = AddressOf(message.id.idiag_dst, message.idiag_family);
        socket.tuple.src_port = ntohs(message.id.idiag_sport);
        socket.tuple.dst_port = ntohs(message.id.idiag_dport);
        socket.cookie =
            uint64_t{message.id.idiag_cookie[0]} | (uint64_t{message.id.idiag_cookie[1]} << 32);
        if (!traced(socket.tuple.src_port) && !traced(socket.tuple.dst_port)) return std::nullopt;
        std::optional<std::string> walk = WalkAttributes(
            payload.subspan(std::min(payload.size(), size_t{NLMSG_ALIGN(sizeof(message))})),
            [&](uint16_t type, std::span<const uint8_t> value) {
              if (type != INET_DIAG_INFO) return;
              tcp_info info{};  // an older kernel sends a shorter struct: the rest stays 0
              std::memcpy(&info, value.data(), std::min(value.size(), sizeof(info)));
              socket.bytes_sent = info.tcpi_bytes_sent;
              socket.bytes_received = info.tcpi_bytes_received;
              socket.srtt_us = info.tcpi_rtt;
              socket.retransmits = info.tcpi_total_retrans;
            });
        if (walk) return walk;
        sockets.push_back(socket);
        return std::nullopt;
      });
  if (!walked.ok()) return walked.error();
  return sockets;
}

Result<std::vector<LiveSocketStats>> ReadLiveTcpSockets(const std::string& netns_path,
                                                        const std::vector<uint16_t>& ports) {
  struct stat st {};
  if (::stat(netns_path.c_str(), &st) != 0) {
    return ErrnoError(SourceKind::kSockDiag, "stat " + netns_path);
  }
  const auto inode = static_cast<uint32_t>(st.st_ino);
  std::optional<Result<std::vector<LiveSocketStats>>> result;
  NetnsWorkers::Shared().Run([&] {
    Result<NetnsGuard> guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) {
      result.emplace(guard.error());
      return;
    }
    Result<UniqueFd> socket = OpenSockDiagSocket();
    if (!socket.ok()) {
      result.emplace(socket.error());
      return;
    }
    std::vector<LiveSocketStats> all;
    for (int family : {AF_INET, AF_INET6}) {
      const std::string what = family == AF_INET ? "tcp-info/ipv4" : "tcp-info/ipv6";
      Result<std::vector<uint8_t>> raw = DumpSockDiag(*socket, Request(family), what);
      if (!raw.ok()) {
        result.emplace(raw.error());
        return;
      }
      Result<std::vector<LiveSocketStats>> decoded = DecodeLiveTcpSockets(*raw, inode, ports);
      if (!decoded.ok()) {
        result.emplace(decoded.error());
        return;
      }
      all.insert(all.end(), decoded->begin(), decoded->end());
    }
    result.emplace(std::move(all));
  });
  return std::move(*result);
}

std::map<uint32_t, std::string> NetnsPathsByInode(const DiscoveryOptions& discovery,
                                                  std::vector<SourceError>* warnings) {
  std::map<uint32_t, std::string> paths;
  for (const NetnsRecord& record : DiscoverNetns(discovery, warnings)) {
    paths.emplace(static_cast<uint32_t>(record.inode), record.PrimaryPath());
  }
  return paths;
}

LiveNetnsRead ReadLiveTcpOfNetns(const std::set<uint32_t>& inodes,
                                 const std::map<uint32_t, std::string>& paths,
                                 const std::vector<uint16_t>& ports,
                                 const std::function<void()>& after_each) {
  LiveNetnsRead read;
  for (uint32_t inode : inodes) {
    auto it = paths.find(inode);
    if (it == paths.end()) continue;
    ++read.netns_read;
    Result<std::vector<LiveSocketStats>> sockets = ReadLiveTcpSockets(it->second, ports);
    if (sockets.ok()) {
      read.sockets.insert(read.sockets.end(), sockets->begin(), sockets->end());
    } else {
      read.errors.push_back(it->second + ": " + sockets.error().message);
    }
    if (after_each) after_each();
  }
  return read;
}

NetnsPathCache::NetnsPathCache(DiscoveryOptions discovery, std::chrono::milliseconds retry_after)
    : discovery_(std::move(discovery)), retry_after_(retry_after) {}

std::map<uint32_t, std::string> NetnsPathCache::Resolve(const std::set<uint32_t>& inodes) {
  const auto now = std::chrono::steady_clock::now();
  auto still_names = [](const std::string& path, uint32_t inode) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && static_cast<uint32_t>(st.st_ino) == inode;
  };
  bool discover = false;
  for (uint32_t inode : inodes) {
    if (auto it = known_.find(inode); it != known_.end()) {
      if (still_names(it->second, inode)) continue;
      known_.erase(it);  // the process left, or the bind mount went: look again
    }
    auto unnamed = unnamed_.find(inode);
    if (unnamed == unnamed_.end() || now - unnamed->second >= retry_after_) discover = true;
  }
  if (discover) {
    std::vector<SourceError> warnings;  // unreadable processes: their netns stay unnamed
    known_ = NetnsPathsByInode(discovery_, &warnings);
    ++discoveries_;
    for (uint32_t inode : inodes) {
      if (!known_.contains(inode)) unnamed_[inode] = now;
    }
  }
  // A miss older than the retry period would be looked for again anyway: forget it.
  std::erase_if(unnamed_, [&](const auto& entry) { return now - entry.second >= retry_after_; });
  std::map<uint32_t, std::string> paths;
  for (uint32_t inode : inodes) {
    if (auto it = known_.find(inode); it != known_.end()) paths.emplace(inode, it->second);
  }
  return paths;
}

}  // namespace ad
