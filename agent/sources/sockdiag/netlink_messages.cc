#include "sources/sockdiag/netlink_messages.h"

#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ad {
namespace {

constexpr size_t Align4(size_t length) { return (length + 3) & ~size_t{3}; }

struct Header {
  uint32_t length = 0;
  uint16_t type = 0;
};

std::optional<Header> ReadHeader(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(nlmsghdr)) {
    return std::nullopt;
  }
  nlmsghdr header{};
  std::memcpy(&header, bytes.data(), sizeof(header));
  return Header{header.nlmsg_len, header.nlmsg_type};
}

}  // namespace

SourceError DecodeError(const std::string& what, const std::string& detail) {
  return SourceError{kSockDiagSource, what + ": " + detail, EBADMSG};
}

Status WalkSockDiagDump(
    std::span<const uint8_t> bytes,
    const std::function<std::optional<std::string>(std::span<const uint8_t>)>& on_payload,
    uint16_t payload_type) {
  const std::string what = "sock_diag dump";
  size_t offset = 0;
  while (offset < bytes.size()) {
    const std::span<const uint8_t> rest = bytes.subspan(offset);
    const std::optional<Header> header = ReadHeader(rest);
    if (!header) {
      return DecodeError(what, "truncated netlink header at offset " + std::to_string(offset));
    }
    if (header->length < sizeof(nlmsghdr) || header->length > rest.size()) {
      return DecodeError(what, "netlink message length " + std::to_string(header->length) +
                                   " does not fit at offset " + std::to_string(offset));
    }
    const std::span<const uint8_t> payload =
        rest.subspan(sizeof(nlmsghdr), header->length - sizeof(nlmsghdr));
    switch (header->type) {
      case NLMSG_DONE:
        return OkStatus();
      case NLMSG_ERROR: {
        int32_t error = 0;
        if (payload.size() < sizeof(error)) {
          return DecodeError(what, "truncated NLMSG_ERROR");
        }
        std::memcpy(&error, payload.data(), sizeof(error));
        if (error == 0) {
          return DecodeError(what, "unexpected ACK instead of dump data");
        }
        const int err = error < 0 ? -error : error;
        return SourceError{kSockDiagSource, what + ": kernel answered " + std::strerror(err), err};
      }
      case NLMSG_NOOP:
        break;
      default:
        if (header->type != payload_type) {
          return DecodeError(what,
                             "unexpected netlink message type " + std::to_string(header->type));
        }
        if (std::optional<std::string> problem = on_payload(payload)) {
          return DecodeError(what,
                             *problem + " (message at offset " + std::to_string(offset) + ")");
        }
        break;
    }
    // The last message of a datagram may be unpadded; never step past the end.
    offset += std::min(Align4(header->length), rest.size());
  }
  return DecodeError(what, "no NLMSG_DONE (truncated dump)");
}

std::optional<std::string> WalkAttributes(
    std::span<const uint8_t> bytes,
    const std::function<void(uint16_t, std::span<const uint8_t>)>& on_attribute) {
  size_t offset = 0;
  while (offset < bytes.size()) {
    const std::span<const uint8_t> rest = bytes.subspan(offset);
    uint16_t length = 0;
    uint16_t type = 0;
    if (rest.size() < 4) {
      return "truncated attribute header";
    }
    std::memcpy(&length, rest.data(), sizeof(length));
    std::memcpy(&type, rest.data() + 2, sizeof(type));
    if (length < 4 || length > rest.size()) {
      return "attribute " + std::to_string(type) + " length " + std::to_string(length) +
             " does not fit";
    }
    on_attribute(static_cast<uint16_t>(type & NLA_TYPE_MASK), rest.subspan(4, length - 4));
    offset += std::min(Align4(length), rest.size());
  }
  return std::nullopt;
}

bool DatagramEndsDump(std::span<const uint8_t> datagram) {
  size_t offset = 0;
  while (offset < datagram.size()) {
    const std::optional<Header> header = ReadHeader(datagram.subspan(offset));
    if (!header || header->length < sizeof(nlmsghdr) || header->length > datagram.size() - offset) {
      return true;  // malformed: stop reading, the decoder reports it
    }
    if (header->type == NLMSG_DONE || header->type == NLMSG_ERROR) {
      return true;
    }
    offset += std::min(Align4(header->length), datagram.size() - offset);
  }
  return false;
}

}  // namespace ad
