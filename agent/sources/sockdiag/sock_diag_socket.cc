#include "sources/sockdiag/sock_diag_socket.h"

#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <span>

#include "sources/sockdiag/netlink_messages.h"

namespace ad {
namespace {

// Big enough for any single dump datagram (the kernel fills up to 32 KiB per datagram).
constexpr size_t kReceiveBufferBytes = 64 * 1024;
constexpr int kReceiveTimeoutSeconds = 5;

uint32_t NextSequence() {
  static std::atomic<uint32_t> sequence{1};
  return sequence.fetch_add(1);
}

}  // namespace

Result<UniqueFd> OpenSockDiagSocket() {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!fd.valid()) {
    return ErrnoError(kSockDiagSource, "socket(AF_NETLINK, NETLINK_SOCK_DIAG)");
  }
  // A dump never blocks for long; a timeout keeps a wedged kernel path from hanging the scan.
  timeval timeout{.tv_sec = kReceiveTimeoutSeconds, .tv_usec = 0};
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) != 0) {
    return ErrnoError(kSockDiagSource, "setsockopt(NETLINK_SOCK_DIAG, SO_RCVTIMEO)");
  }
  return fd;
}

Result<std::vector<uint8_t>> DumpSockDiag(const UniqueFd& socket, std::span<const uint8_t> request,
                                          const std::string& what, size_t max_bytes,
                                          uint16_t message_type, uint16_t flags) {
  const std::string context = "sock_diag " + what + " dump";
  std::vector<uint8_t> message(NLMSG_LENGTH(request.size()));
  nlmsghdr header{};
  header.nlmsg_len = static_cast<uint32_t>(message.size());
  header.nlmsg_type = message_type;
  header.nlmsg_flags = NLM_F_REQUEST | flags;
  header.nlmsg_seq = NextSequence();
  std::memcpy(message.data(), &header, sizeof(header));
  std::memcpy(message.data() + NLMSG_HDRLEN, request.data(), request.size());

  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  ssize_t sent = 0;
  do {
    sent = ::sendto(socket.get(), message.data(), message.size(), 0,
                    reinterpret_cast<const sockaddr*>(&kernel), sizeof(kernel));
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    return ErrnoError(kSockDiagSource, "sendto(" + context + ")");
  }

  std::vector<uint8_t> reply;
  // One receive buffer per thread: a fresh zeroed 64 KiB per dump (page faults included) cost
  // about as much as the kernel's walk of the listening hash. Nothing here re-enters. Not zeroed:
  // only the pages the kernel writes become resident (small dumps stay small).
  thread_local const std::unique_ptr<uint8_t[]> buffer =
      std::make_unique_for_overwrite<uint8_t[]>(kReceiveBufferBytes);
  const std::span<uint8_t> datagram(buffer.get(), kReceiveBufferBytes);
  for (;;) {
    ssize_t received = 0;
    do {
      received = ::recv(socket.get(), datagram.data(), datagram.size(), MSG_TRUNC);
    } while (received < 0 && errno == EINTR);
    if (received < 0) {
      return ErrnoError(kSockDiagSource, "recv(" + context + ")");
    }
    if (static_cast<size_t>(received) > datagram.size()) {
      return SourceError{
          kSockDiagSource,
          "recv(" + context + "): datagram of " + std::to_string(received) + " bytes truncated",
          EMSGSIZE};
    }
    if (received == 0) {
      break;  // the decoder reports the missing NLMSG_DONE
    }
    if (reply.size() + static_cast<size_t>(received) > max_bytes) {
      return SourceError{kSockDiagSource,
                         context + ": reply exceeds " + std::to_string(max_bytes) + " bytes",
                         EFBIG};
    }
    const std::span<const uint8_t> chunk(datagram.data(), static_cast<size_t>(received));
    reply.insert(reply.end(), chunk.begin(), chunk.end());
    reply.resize((reply.size() + 3) & ~size_t{3});  // keep the next datagram's header aligned
    if (DatagramEndsDump(chunk)) {
      break;
    }
  }
  return reply;
}

}  // namespace ad
