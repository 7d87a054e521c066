#include "sources/sockdiag/unix_diag.h"

#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>

#include <cstring>
#include <string>

#include "sources/sockdiag/netlink_messages.h"
#include "sources/sockdiag/sock_diag_socket.h"

namespace ad {
namespace {

// Every state the kernel can report (bits 0..31).
constexpr uint32_t kAllStates = ~uint32_t{0};

// unix_diag reports the kernel's internal dev_t (major << 20 | minor); stat() uses the userspace
// encoding.
uint64_t UserspaceDev(uint32_t kernel_dev) {
  return makedev(kernel_dev >> 20, kernel_dev & 0xfffff);
}

std::string DecodeName(std::span<const uint8_t> value) {
  std::string name(value.begin(), value.end());
  if (!name.empty() && name[0] == '\0') {
    name[0] = '@';  // abstract namespace: the rest is binary-safe, no terminator
    return name;
  }
  if (const size_t end = name.find('\0'); end != std::string::npos) {
    name.resize(end);  // path names carry their NUL terminator
  }
  return name;
}

std::optional<std::string> DecodeOne(std::span<const uint8_t> payload,
                                     std::vector<UnixSocket>* sockets) {
  unix_diag_msg message{};
  if (payload.size() < sizeof(message)) {
    return "unix_diag_msg of " + std::to_string(payload.size()) + " bytes is too short";
  }
  std::memcpy(&message, payload.data(), sizeof(message));
  if (message.udiag_family != AF_UNIX) {
    return "unix_diag_msg family " + std::to_string(message.udiag_family) + " is not AF_UNIX";
  }
  UnixSocket socket;
  socket.inode = message.udiag_ino;
  socket.type = message.udiag_type;
  socket.state = message.udiag_state;
  std::optional<std::string> problem;
  auto fail = [&problem](std::string text) {
    if (!problem) problem = std::move(text);
  };
  std::optional<std::string> walk = WalkAttributes(
      payload.subspan(NLMSG_ALIGN(sizeof(message)) <= payload.size() ? NLMSG_ALIGN(sizeof(message))
                                                                     : payload.size()),
      [&](uint16_t type, std::span<const uint8_t> value) {
        switch (type) {
          case UNIX_DIAG_NAME:
            socket.path = DecodeName(value);
            break;
          case UNIX_DIAG_VFS: {
            unix_diag_vfs vfs{};
            if (value.size() < sizeof(vfs)) return fail("short UNIX_DIAG_VFS");
            std::memcpy(&vfs, value.data(), sizeof(vfs));
            socket.vfs_inode = vfs.udiag_vfs_ino;
            socket.vfs_dev = UserspaceDev(vfs.udiag_vfs_dev);
            break;
          }
          case UNIX_DIAG_PEER: {
            uint32_t peer = 0;
            if (value.size() < sizeof(peer)) return fail("short UNIX_DIAG_PEER");
            std::memcpy(&peer, value.data(), sizeof(peer));
            socket.peer_inode = peer;
            break;
          }
          case UNIX_DIAG_ICONS: {
            if (value.size() % sizeof(uint32_t) != 0) return fail("UNIX_DIAG_ICONS not u32s");
            for (size_t i = 0; i < value.size(); i += sizeof(uint32_t)) {
              uint32_t client = 0;
              std::memcpy(&client, value.data() + i, sizeof(client));
              socket.pending_client_inodes.push_back(client);
            }
            break;
          }
          case UNIX_DIAG_RQLEN: {
            unix_diag_rqlen queues{};
            if (value.size() < sizeof(queues)) return fail("short UNIX_DIAG_RQLEN");
            std::memcpy(&queues, value.data(), sizeof(queues));
            socket.receive_queue = queues.udiag_rqueue;
            // For a listener the kernel puts the backlog limit here, not a queue length.
            socket.send_queue = socket.state == kUnixStateListen ? 0 : queues.udiag_wqueue;
            break;
          }
          default:
            break;  // newer attributes: ignored
        }
      });
  if (walk) return walk;
  if (problem) return problem;
  sockets->push_back(std::move(socket));
  return std::nullopt;
}

}  // namespace

Result<std::vector<UnixSocket>> DecodeUnixDiagMessages(std::span<const uint8_t> bytes) {
  std::vector<UnixSocket> sockets;
  Status walked = WalkSockDiagDump(
      bytes, [&sockets](std::span<const uint8_t> payload) { return DecodeOne(payload, &sockets); });
  if (!walked.ok()) {
    SourceError error = walked.error();
    error.message = "unix " + error.message;
    return error;
  }
  return sockets;
}

Result<std::vector<uint8_t>> DumpUnixDiagRaw() {
  auto socket = OpenSockDiagSocket();
  if (!socket.ok()) return socket.error();
  unix_diag_req request{};
  request.sdiag_family = AF_UNIX;
  request.udiag_states = kAllStates;
  request.udiag_show =
      UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_PEER | UDIAG_SHOW_ICONS | UDIAG_SHOW_RQLEN;
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(&request), sizeof(request));
  return DumpSockDiag(*socket, bytes, "unix");
}

Result<std::vector<UnixSocket>> DumpUnixSockets() {
  auto raw = DumpUnixDiagRaw();
  if (!raw.ok()) return raw.error();
  return DecodeUnixDiagMessages(*raw);
}

}  // namespace ad
