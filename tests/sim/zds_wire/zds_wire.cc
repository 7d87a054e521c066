#include "zds_wire/zds_wire.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace ad::zds {
namespace {

constexpr SourceKind kSource = SourceKind::kLab;

Result<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return SourceError{kSource, "socket path '" + path + "' is empty or too long", ENAMETOOLONG};
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

}  // namespace

Result<UniqueFd> ListenSeqpacket(const std::string& path, int backlog) {
  Result<sockaddr_un> address = UnixAddress(path);
  if (!address.ok()) return address.error();
  UniqueFd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return ErrnoError(kSource, "socket(AF_UNIX, SOCK_SEQPACKET)");
  // Like istio-cni: a socket file left by an earlier run would make bind fail.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(kSource, "unlink(" + path + ")");
  }
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
    return ErrnoError(kSource, "bind(" + path + ")");
  }
  if (::listen(listener.get(), backlog) != 0) return ErrnoError(kSource, "listen(" + path + ")");
  return listener;
}

Result<UniqueFd> ConnectSeqpacket(const std::string& path) {
  Result<sockaddr_un> address = UnixAddress(path);
  if (!address.ok()) return address.error();
  UniqueFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!socket.valid()) return ErrnoError(kSource, "socket(AF_UNIX, SOCK_SEQPACKET)");
  if (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) !=
      0) {
    return ErrnoError(kSource, "connect(" + path + ")");
  }
  return socket;
}

Result<std::monostate> SendRecord(int socket, std::string_view bytes, int fd_to_pass) {
  if (bytes.size() > kMaxMessageBytes) {
    return SourceError{kSource,
                       "message of " + std::to_string(bytes.size()) + " bytes exceeds the " +
                           std::to_string(kMaxMessageBytes) + "-byte limit",
                       EMSGSIZE};
  }
  iovec data{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
  if (fd_to_pass >= 0) {
    message.msg_control = control.data();
    message.msg_controllen = control.size();
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd_to_pass, sizeof(int));
  }
  for (;;) {
    const ssize_t sent = ::sendmsg(socket, &message, MSG_NOSIGNAL);
    if (sent >= 0) break;
    if (errno != EINTR) return ErrnoError(kSource, "sendmsg");
  }
  return std::monostate{};
}

Result<Record> ReceiveRecord(int socket, int timeout_ms, size_t max_fds) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    pollfd readable{socket, POLLIN, 0};
    const int ready = ::poll(&readable, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return ErrnoError(kSource, "poll");
    if (ready == 0) return SourceError{kSource, "timed out waiting for a message", ETIMEDOUT};
    break;
  }
  // One byte more than the limit so an oversized record is reported even without MSG_TRUNC.
  std::array<char, kMaxMessageBytes + 1> buffer{};
  iovec data{buffer.data(), buffer.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(max_fds, 1)));
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  ssize_t received = -1;
  do {
    received = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received < 0) return ErrnoError(kSource, "recvmsg");

  Record record;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      record.fds.emplace_back(fd);
    }
  }
  if ((message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
      static_cast<size_t>(received) > kMaxMessageBytes) {
    return SourceError{
        kSource,
        (message.msg_flags & MSG_CTRUNC) != 0 ? "control message truncated" : "message truncated",
        EMSGSIZE};
  }
  if (received == 0 && record.fds.empty()) {
    record.eof = true;
    return record;
  }
  record.bytes.assign(buffer.data(), static_cast<size_t>(received));
  return record;
}

bool IsNetnsFd(int fd) { return ::ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNET; }

std::string HexBytes(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (unsigned char byte : bytes) {
    if (!text.empty()) text += ' ';
    text += kDigits[byte >> 4];
    text += kDigits[byte & 0xf];
  }
  return text;
}

}  // namespace ad::zds
