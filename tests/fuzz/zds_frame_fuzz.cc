// Fuzz target: the ZDS record transport of the emulators (zds_wire) and the protobuf messages it
// carries. Each input is sent as one SOCK_SEQPACKET record over a socketpair, received with
// ReceiveRecord as cni-sim and ztunnel-sim do, then decoded as the message its receiver expects.
// The first byte picks how many netns fds travel with the record (0-2; the receivers take 1)
// and the message type; the rest is the record. Fds must never leak, whatever arrives.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "zds/zds.pb.h"
#include "zds_wire/zds_wire.h"

namespace {

namespace pb = istio::workload::zds;

constexpr size_t kMaxRecordBytes = 4096;  // beyond the 1024-byte limit, to reach truncation

struct Wire {
  ad::UniqueFd sender;
  ad::UniqueFd receiver;
  ad::UniqueFd netns;
};

// The fd number the next open would get: back to where it was when every fd that arrived with
// a record has been closed again.
int LowestFreeFd() {
  const int probe = ::fcntl(0, F_DUPFD_CLOEXEC, 0);
  ::close(probe);
  return probe;
}

// One socketpair for the whole run: a fresh one per input would cost more than the decoding.
Wire MakeWire() {
  Wire wire;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) std::abort();
  wire.sender = ad::UniqueFd(pair[0]);
  wire.receiver = ad::UniqueFd(pair[1]);
  wire.netns = ad::UniqueFd(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!wire.netns.valid()) std::abort();
  return wire;
}

// Sends `bytes` with `fd_count` copies of `fd` in one SCM_RIGHTS message, as a peer may.
bool SendWithFds(int socket, std::string_view bytes, int fd, int fd_count) {
  iovec data{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  if (fd_count > 0) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(fd_count * sizeof(int));
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(fd_count * sizeof(int));
    for (int i = 0; i < fd_count; ++i) {
      std::memcpy(CMSG_DATA(header) + i * sizeof(int), &fd, sizeof(int));
    }
  }
  return ::sendmsg(socket, &message, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0;
}

// Parse, re-encode, parse again: the second encoding must be the first one.
template <typename Message>
void Decode(const std::string& bytes) {
  Message message;
  if (!message.ParseFromString(bytes)) return;
  const std::string encoded = message.SerializeAsString();
  Message again;
  if (!again.ParseFromString(encoded) || again.SerializeAsString() != encoded) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static Wire wire = MakeWire();
  const int fd_count = std::min(data[0] & 3, 2);
  const int message_type = (data[0] >> 2) % 3;
  const std::string_view record(reinterpret_cast<const char*>(data) + 1,
                                std::min(size - 1, kMaxRecordBytes));
  const int lowest_free_fd = LowestFreeFd();  // per input: libFuzzer opens files in between
  if (!SendWithFds(wire.sender.get(), record, wire.netns.get(), fd_count)) return 0;
  {
    auto received = ad::zds::ReceiveRecord(wire.receiver.get(), 1000, 1);
    if (!received.ok()) {
      if (received.error().message.empty()) std::abort();
    } else if (!received->eof) {
      // No fd count check: two ints fit the padding of a one-fd control buffer, so a second
      // fd arrives whole; the receivers reject any count but one themselves.
      if (received->bytes.size() > ad::zds::kMaxMessageBytes) std::abort();
      if (received->bytes != record) std::abort();
      for (const ad::UniqueFd& fd : received->fds) {
        if (!ad::zds::IsNetnsFd(fd.get())) std::abort();
      }
      switch (message_type) {
        case 0:
          Decode<pb::WorkloadRequest>(received->bytes);  // ztunnel-sim reads requests
          break;
        case 1:
          Decode<pb::WorkloadResponse>(received->bytes);  // cni-sim reads acks
          break;
        default:
          Decode<pb::ZdsHello>(received->bytes);  // cni-sim reads the hello
          break;
      }
    }
  }
  // Every fd that arrived was closed with the record, or by ReceiveRecord on an error.
  if (LowestFreeFd() != lowest_free_fd) std::abort();
  return 0;
}
