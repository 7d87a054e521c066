// Pure walkers over raw netlink bytes (a sock_diag dump reply): every length is checked against
// the buffer, every read is a memcpy, so any byte string is safe to feed in (fuzzed).
#pragma once

#include <linux/sock_diag.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "model/result.h"
#include "model/source_error.h"

namespace ad {

// Source name of every sock_diag error.
inline constexpr SourceKind kSockDiagSource = SourceKind::kSockDiag;

// Calls `on_payload` with the payload of each `payload_type` message (SOCK_DIAG_BY_FAMILY, or
// TCPDIAG_GETSOCK for the one-walk TCP listener dump, which echoes its request type), in order,
// until NLMSG_DONE. A returned string aborts the walk as a decode error. Fails on NLMSG_ERROR (with
// its errno), on any length that does not fit, and when NLMSG_DONE is missing (truncated dump).
Status WalkSockDiagDump(
    std::span<const uint8_t> bytes,
    const std::function<std::optional<std::string>(std::span<const uint8_t>)>& on_payload,
    uint16_t payload_type = SOCK_DIAG_BY_FAMILY);

// Calls `on_attribute(type, value)` for each rtattr in `bytes`. Returns a message for an
// attribute whose length does not fit.
std::optional<std::string> WalkAttributes(
    std::span<const uint8_t> bytes,
    const std::function<void(uint16_t, std::span<const uint8_t>)>& on_attribute);

// True once `datagram` holds NLMSG_DONE or NLMSG_ERROR (or cannot be walked): the reader stops.
bool DatagramEndsDump(std::span<const uint8_t> datagram);

// A SourceError for malformed input ("sockdiag", "<what>: <detail>", EBADMSG).
SourceError DecodeError(const std::string& what, const std::string& detail);

}  // namespace ad
