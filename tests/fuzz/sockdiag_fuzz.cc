// Fuzzes the sock_diag decoders. The first byte picks the decoder (unix, inet TCP, inet UDP); the
// rest is a dump reply as the kernel sends it. Seeds are real dumps captured from a test netns.
#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "sources/sockdiag/inet_diag.h"
#include "sources/sockdiag/unix_diag.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> reply(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto sockets = ad::DecodeUnixDiagMessages(reply);
      if (sockets.ok()) {
        for (const ad::UnixSocket& socket : *sockets) {
          // Touch everything the decoder produced so sanitizers see any bad write.
          volatile size_t sink = socket.path.size() + socket.pending_client_inodes.size();
          (void)sink;
        }
      }
      break;
    }
    case 1:
      (void)ad::DecodeInetDiagMessages(reply, IPPROTO_TCP);
      break;
    default:
      (void)ad::DecodeInetDiagMessages(reply, IPPROTO_UDP);
      break;
  }
  return 0;
}
