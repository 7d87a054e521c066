// Small RAII + request/response loop over libmnl, shared by the nf_tables, ipset and routing
// readers.
// The socket is bound to the netns of the thread that opened it.
#pragma once

#include <libmnl/libmnl.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "model/result.h"

namespace ad::nl {

struct MnlSocketCloser {
  void operator()(mnl_socket* socket) const { mnl_socket_close(socket); }
};
using MnlSocket = std::unique_ptr<mnl_socket, MnlSocketCloser>;

// Opens and binds a NETLINK_NETFILTER socket in the calling thread's netns.
Result<MnlSocket> OpenNetfilterSocket(SourceKind source);

// Return value of a message handler: keep going, or stop reading (e.g. a limit was reached; the
// socket must not be reused for another request afterwards).
enum class Next { kContinue, kStop };
using MessageHandler = std::function<Next(const nlmsghdr*)>;

// Sends `request` (its nlmsg_seq is assigned here) and feeds every reply to `handler` until the
// dump ends (NLMSG_DONE) or the kernel acks. Errors name `what` and carry the errno; an
// interrupted dump (NLM_F_DUMP_INTR) is reported as EINTR so callers can retry.
Status RunRequest(mnl_socket* socket, nlmsghdr* request, SourceKind source, const std::string& what,
                  const MessageHandler& handler);

// Receive buffer size: large enough for the biggest dump skb the kernel builds.
inline constexpr size_t kReceiveBufferSize = 64 * 1024;

}  // namespace ad::nl
