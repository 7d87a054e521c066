// ZDS transport shared by the emulators and their tests: AF_UNIX SOCK_SEQPACKET, one protobuf
// message per record (no length prefix), at most 1024 bytes, a netns fd in SCM_RIGHTS with each
// AddWorkload. Truncation of data or control data is an error on both sides, as in Istio.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad::zds {

inline constexpr size_t kMaxMessageBytes = 1024;
inline constexpr uint32_t kZtunnelPacketMark = 0x539;  // ztunnel's default SO_MARK (1337)

// One received record. `eof` is set (and nothing else) when the peer closed the connection.
struct Record {
  bool eof = false;
  std::string bytes;
  std::vector<UniqueFd> fds;
};

// Unlinks a stale socket file, binds and listens (SEQPACKET, CLOEXEC).
Result<UniqueFd> ListenSeqpacket(const std::string& path, int backlog = 16);

// Connects a SEQPACKET client to `path`.
Result<UniqueFd> ConnectSeqpacket(const std::string& path);

// Sends one record; `fd_to_pass` >= 0 travels in SCM_RIGHTS in the same sendmsg. MSG_NOSIGNAL:
// a closed peer is EPIPE, never SIGPIPE.
Result<std::monostate> SendRecord(int socket, std::string_view bytes, int fd_to_pass = -1);

// Receives one record with room for `max_fds` fds (received with MSG_CMSG_CLOEXEC). Waits at most
// `timeout_ms` (negative: forever); a timeout is an error with error_number ETIMEDOUT. MSG_TRUNC
// or MSG_CTRUNC is an error (any fds that did arrive are closed).
Result<Record> ReceiveRecord(int socket, int timeout_ms, size_t max_fds = 1);

// True when `fd` is a network namespace (ioctl NS_GET_NSTYPE == CLONE_NEWNET).
bool IsNetnsFd(int fd);

// "08 01" style rendering for logs and test messages.
std::string HexBytes(std::string_view bytes);

}  // namespace ad::zds
