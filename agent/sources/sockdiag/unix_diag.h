// AF_UNIX sockets of one netns via sock_diag (NETLINK_SOCK_DIAG, unix_diag): name, bound file,
// peer, queue lengths and, for listeners, the clients waiting in the accept backlog. Read-only:
// it never connects to any of the sockets it reports.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/result.h"
#include "model/zds.h"

namespace ad {

// Socket states as unix_diag reports them (the kernel reuses the TCP numbers).
inline constexpr uint8_t kUnixStateEstablished = 1;
inline constexpr uint8_t kUnixStateListen = 10;

// Decodes one unix_diag dump reply (all datagrams concatenated, through NLMSG_DONE). Pure: no
// kernel access; validates every length and fails with a decode error instead of guessing.
// Abstract names are rendered with a leading '@' (as ss does).
Result<std::vector<UnixSocket>> DecodeUnixDiagMessages(std::span<const uint8_t> bytes);

// The raw reply of a dump of every AF_UNIX socket in the calling thread's netns.
Result<std::vector<uint8_t>> DumpUnixDiagRaw();

// Every AF_UNIX socket in the calling thread's netns (owner_pids left empty).
Result<std::vector<UnixSocket>> DumpUnixSockets();

}  // namespace ad
