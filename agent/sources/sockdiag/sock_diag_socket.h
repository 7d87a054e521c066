// The one kernel touch of the sock_diag readers: a NETLINK_SOCK_DIAG socket and a dump request.
// sock_diag reports the sockets of the netns the netlink socket was created in, so callers create
// it on a thread that is already inside the target netns.
#pragma once

#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad {

// Upper bound of one dump's reply bytes (a node with 100k sockets stays well below).
inline constexpr size_t kMaxSockDiagDumpBytes = size_t{256} << 20;

// Opens NETLINK_SOCK_DIAG in the calling thread's netns (with a receive timeout).
Result<UniqueFd> OpenSockDiagSocket();

// Sends `message_type`|NLM_F_DUMP with `request` (a unix_diag_req / inet_diag_req_v2 for
// SOCK_DIAG_BY_FAMILY, an inet_diag_req for TCPDIAG_GETSOCK) and
// returns all reply datagrams concatenated, up to NLMSG_DONE/NLMSG_ERROR. `flags` NLM_F_ACK
// instead of NLM_F_DUMP asks for one exact socket (the reply then ends with the ACK). Decoding is
// left to the pure decoders. `what` names the dump in errors ("unix", "tcp/ipv4" ...).
Result<std::vector<uint8_t>> DumpSockDiag(const UniqueFd& socket, std::span<const uint8_t> request,
                                          const std::string& what,
                                          size_t max_bytes = kMaxSockDiagDumpBytes,
                                          uint16_t message_type = SOCK_DIAG_BY_FAMILY,
                                          uint16_t flags = NLM_F_DUMP);

}  // namespace ad
