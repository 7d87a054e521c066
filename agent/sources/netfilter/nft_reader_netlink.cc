#include "sources/netfilter/nft_reader_netlink.h"

#include <linux/netlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>
#include <vector>

namespace ad::nl {
namespace {

struct CallbackContext {
  const MessageHandler* handler;
  bool stopped = false;
};

int OnMessage(const nlmsghdr* message, void* data) {
  auto* context = static_cast<CallbackContext*>(data);
  if ((*context->handler)(message) == Next::kStop) {
    context->stopped = true;
    return MNL_CB_STOP;
  }
  return MNL_CB_OK;
}

uint32_t NextSequence() {
  static thread_local uint32_t sequence = 1;
  return ++sequence;
}

// Receive buffers reused across requests on this thread: a fresh zeroed 64 KiB vector per
// request cost more than parsing a small dump. A handler may itself issue a request (the nft
// rule decoder lists ipsets to name an xt `set` match), so each nesting level has its own.
class ReceiveBufferLease {
 public:
  ReceiveBufferLease() : level_(depth_++) {
    if (pool_.size() <= level_) {
      pool_.push_back(std::make_unique_for_overwrite<char[]>(kReceiveBufferSize));
    }
  }
  ~ReceiveBufferLease() { --depth_; }
  ReceiveBufferLease(const ReceiveBufferLease&) = delete;
  ReceiveBufferLease& operator=(const ReceiveBufferLease&) = delete;

  char* data() const { return pool_[level_].get(); }

 private:
  static thread_local std::vector<std::unique_ptr<char[]>> pool_;
  static thread_local size_t depth_;
  size_t level_;
};
thread_local std::vector<std::unique_ptr<char[]>> ReceiveBufferLease::pool_;
thread_local size_t ReceiveBufferLease::depth_ = 0;

}  // namespace

Result<MnlSocket> OpenNetfilterSocket(SourceKind source) {
  MnlSocket socket(mnl_socket_open(NETLINK_NETFILTER));
  if (!socket) {
    return ErrnoError(source, "mnl_socket_open(NETLINK_NETFILTER)");
  }
  if (mnl_socket_bind(socket.get(), 0, MNL_SOCKET_AUTOPID) < 0) {
    return ErrnoError(source, "mnl_socket_bind(NETLINK_NETFILTER)");
  }
  return socket;
}

Status RunRequest(mnl_socket* socket, nlmsghdr* request, SourceKind source, const std::string& what,
                  const MessageHandler& handler) {
  request->nlmsg_seq = NextSequence();
  if (mnl_socket_sendto(socket, request, request->nlmsg_len) < 0) {
    return ErrnoError(source, "sendto(" + what + ")");
  }
  ReceiveBufferLease lease;
  char* buffer = lease.data();
  uint32_t port_id = mnl_socket_get_portid(socket);
  CallbackContext context{&handler};
  while (true) {
    ssize_t received = mnl_socket_recvfrom(socket, buffer, kReceiveBufferSize);
    if (received < 0) {
      return ErrnoError(source, "recvfrom(" + what + ")");
    }
    int ret = mnl_cb_run(buffer, static_cast<size_t>(received), request->nlmsg_seq, port_id,
                         OnMessage, &context);
    if (ret < 0) {
      return ErrnoError(source, what);
    }
    if (ret == MNL_CB_STOP || context.stopped) {
      return OkStatus();
    }
  }
}

}  // namespace ad::nl
