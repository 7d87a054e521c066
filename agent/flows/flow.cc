#include "flows/flow.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "hbone_flows.h"

namespace ad {
namespace {

// TCP states (include/net/tcp_states.h, kernel ABI).
constexpr uint8_t kEstablished = 1;
constexpr uint8_t kSynSent = 2;
constexpr uint8_t kSynRecv = 3;
constexpr uint8_t kCloseWait = 8;

constexpr int kAfInet = 2;
constexpr int kAfInet6 = 10;

FlowAddress ToAddress(const uint8_t (&raw)[16], uint16_t family) {
  FlowAddress address;
  if (family == kAfInet6) {
    // A v4-mapped address (an IPv6 socket talking IPv4) is the IPv4 peer.
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(raw, kMapped, sizeof(kMapped)) == 0) {
      std::memcpy(address.bytes.data(), raw + 12, 4);
      return address;
    }
    address.ipv6 = true;
    std::memcpy(address.bytes.data(), raw, 16);
  } else {
    std::memcpy(address.bytes.data(), raw, 4);
  }
  return address;
}

int64_t ToUnix(uint64_t monotonic_ns, int64_t offset) {
  return monotonic_ns == 0 ? 0 : static_cast<int64_t>(monotonic_ns) + offset;
}

}  // namespace

std::string_view FlowEventKindName(FlowEventKind kind) {
  switch (kind) {
    case FlowEventKind::kOpen:
      return "open";
    case FlowEventKind::kClose:
      return "close";
    case FlowEventKind::kUpdate:
      return "update";
  }
  return "open";
}

std::string_view FlowRoleName(FlowRole role) {
  return role == FlowRole::kServer ? "server" : "client";
}

std::string_view FlowOutcomeName(FlowOutcome outcome) {
  switch (outcome) {
    case FlowOutcome::kOpen:
      return "open";
    case FlowOutcome::kConnecting:
      return "connecting";
    case FlowOutcome::kClosed:
      return "closed";
    case FlowOutcome::kRefused:
      return "refused";
    case FlowOutcome::kReset:
      return "reset";
    case FlowOutcome::kTimeout:
      return "timeout";
    case FlowOutcome::kUnreachable:
      return "unreachable";
    case FlowOutcome::kAborted:
      return "aborted";
  }
  return "unknown";
}

std::optional<FlowOutcome> ParseFlowOutcome(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(FlowOutcome::kAborted); ++i) {
    const auto outcome = static_cast<FlowOutcome>(i);
    if (FlowOutcomeName(outcome) == name) return outcome;
  }
  return std::nullopt;
}

bool IsFailedOutcome(FlowOutcome outcome) {
  return outcome == FlowOutcome::kRefused || outcome == FlowOutcome::kReset ||
         outcome == FlowOutcome::kTimeout || outcome == FlowOutcome::kUnreachable;
}

std::string FlowAddress::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(ipv6 ? AF_INET6 : AF_INET, bytes.data(), text, sizeof(text));
  return text;
}

bool FlowAddress::IsLoopback() const {
  if (!ipv6) return bytes[0] == 127;
  static constexpr std::array<uint8_t, 16> kLoopback6 = {0, 0, 0, 0, 0, 0, 0, 0,
                                                         0, 0, 0, 0, 0, 0, 0, 1};
  return bytes == kLoopback6;
}

std::optional<int64_t> Flow::ConnectLatencyUs() const {
  if (started_unix_ns == 0 || established_unix_ns == 0 || established_unix_ns < started_unix_ns) {
    return std::nullopt;
  }
  return (established_unix_ns - started_unix_ns) / 1000;
}

FlowOutcome ClassifyClose(bool established, uint16_t states_seen, uint8_t closed_from,
                          int32_t sk_err, uint32_t resets_received, uint32_t resets_sent,
                          uint32_t retransmits) {
  if (sk_err == ETIMEDOUT) return FlowOutcome::kTimeout;
  if (!established) {
    if (sk_err == ECONNREFUSED || resets_received > 0) return FlowOutcome::kRefused;
    if (sk_err == EHOSTUNREACH || sk_err == ENETUNREACH || sk_err == EHOSTDOWN) {
      return FlowOutcome::kUnreachable;
    }
    if (closed_from == kSynSent && retransmits > 0) return FlowOutcome::kTimeout;
    if (closed_from == kSynRecv && resets_sent + resets_received > 0) return FlowOutcome::kReset;
    return FlowOutcome::kAborted;
  }
  if (sk_err == ECONNRESET || sk_err == EPIPE || resets_received + resets_sent > 0) {
    return FlowOutcome::kReset;
  }
  // An orderly close passes FIN_WAIT*/LAST_ACK; straight from ESTABLISHED or CLOSE_WAIT to CLOSE
  // is an abort (SO_LINGER 0, unread data at close): the RST is sent after the state change.
  if (closed_from == kEstablished || closed_from == kCloseWait) return FlowOutcome::kReset;
  (void)states_seen;
  return FlowOutcome::kClosed;
}

size_t FlowEventRecordSize() { return sizeof(hbone_flow_event); }

Result<FlowEvent> DecodeFlowEvent(std::span<const uint8_t> record, int64_t monotonic_to_unix_ns) {
  auto bad = [](const std::string& detail) {
    return SourceError{SourceKind::kTracing, "flow event: " + detail, EBADMSG};
  };
  if (record.size() != sizeof(hbone_flow_event)) {
    return bad(std::to_string(record.size()) + " bytes, expected " +
               std::to_string(sizeof(hbone_flow_event)));
  }
  hbone_flow_event raw{};
  std::memcpy(&raw, record.data(), sizeof(raw));
  FlowEvent event;
  if (raw.kind == HBONE_EVENT_OPEN) {
    event.kind = FlowEventKind::kOpen;
  } else if (raw.kind == HBONE_EVENT_CLOSE) {
    event.kind = FlowEventKind::kClose;
  } else {
    return bad("unknown kind " + std::to_string(raw.kind));
  }
  if (raw.role != HBONE_ROLE_CLIENT && raw.role != HBONE_ROLE_SERVER) {
    return bad("unknown role " + std::to_string(raw.role));
  }
  if (raw.family != kAfInet && raw.family != kAfInet6) {
    return bad("unknown family " + std::to_string(raw.family));
  }
  Flow& flow = event.flow;
  flow.flow_id = raw.flow_id;
  flow.cookie_known = (raw.flags & HBONE_FLAG_REAL_COOKIE) != 0;
  flow.netns_inode = raw.netns_inode;
  flow.role = raw.role == HBONE_ROLE_SERVER ? FlowRole::kServer : FlowRole::kClient;
  flow.tuple.src = ToAddress(raw.saddr, raw.family);
  flow.tuple.dst = ToAddress(raw.daddr, raw.family);
  flow.tuple.src_port = raw.sport;
  flow.tuple.dst_port = raw.dport;
  flow.mark = raw.mark;
  flow.started_unix_ns = ToUnix(raw.start_ns, monotonic_to_unix_ns);
  flow.established_unix_ns = ToUnix(raw.established_ns, monotonic_to_unix_ns);
  flow.ended_unix_ns = ToUnix(raw.end_ns, monotonic_to_unix_ns);
  flow.bytes_sent = raw.bytes_sent;
  const bool fin_received = (raw.flags & HBONE_FLAG_FIN_RECEIVED) != 0;
  flow.bytes_received =
      fin_received && raw.bytes_received > 0 ? raw.bytes_received - 1 : raw.bytes_received;
  flow.srtt_us = raw.srtt_us;
  flow.retransmits = raw.retransmits > raw.total_retrans ? raw.retransmits : raw.total_retrans;
  flow.resets_received = raw.resets_received;
  flow.resets_sent = raw.resets_sent;
  flow.sk_err = raw.sk_err;
  flow.seen_late = (raw.flags & HBONE_FLAG_SEEN_LATE) != 0;
  flow.bypass_watch = (raw.flags & HBONE_FLAG_WATCHED_NETNS) != 0;
  const bool established =
      raw.established_ns != 0 || (raw.states_seen & (1u << kEstablished)) != 0 || flow.seen_late;
  if (event.kind == FlowEventKind::kOpen) {
    flow.outcome = established ? FlowOutcome::kOpen : FlowOutcome::kConnecting;
  } else {
    flow.closed_from_state = raw.last_state;
    // A late flow that closes from SYN_SENT never was established.
    const bool was_established = established && !(flow.seen_late && (raw.last_state == kSynSent));
    flow.outcome = ClassifyClose(was_established, raw.states_seen, raw.last_state, raw.sk_err,
                                 raw.resets_received, raw.resets_sent, flow.retransmits);
  }
  return event;
}

}  // namespace ad
