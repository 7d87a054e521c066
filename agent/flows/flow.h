// One traced TCP connection (an HBONE :15008 flow, or one of the bypass-check ports) as plain
// data, and the decoding of the tracer's raw events into it. Pure: no kernel access, so the flow
// table and the checks built on it are tested without root.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "model/result.h"

namespace ad {

enum class FlowRole : uint8_t { kClient, kServer };
std::string_view FlowRoleName(FlowRole role);  // "client", "server"

// How a flow ended (kOpen / kConnecting while it lives). Names are stable API (JSON, metrics).
enum class FlowOutcome : uint8_t {
  kOpen,         // "open": established, not closed yet
  kConnecting,   // "connecting": SYN sent, retransmitted, no answer yet
  kClosed,       // "closed": established and closed with FINs
  kRefused,      // "refused": the SYN was answered with a RST (nothing listens)
  kReset,        // "reset": established, then reset (by either side) or aborted
  kTimeout,      // "timeout": SYN or data retransmitted until the kernel gave up
  kUnreachable,  // "unreachable": an ICMP error ended the connect (sk_err EHOSTUNREACH ...)
  kAborted,      // "aborted": closed by its owner before it was established
};
std::string_view FlowOutcomeName(FlowOutcome outcome);
std::optional<FlowOutcome> ParseFlowOutcome(std::string_view name);
// Refused, reset, timeout and unreachable: the outcomes `--outcome failed` selects.
bool IsFailedOutcome(FlowOutcome outcome);

struct FlowAddress {
  bool ipv6 = false;                // false: IPv4 in bytes[0..3]
  std::array<uint8_t, 16> bytes{};  // network order
  std::string ToString() const;     // "10.0.0.1", "fd00::1" (v4-mapped IPv6 prints as IPv4)
  bool IsLoopback() const;
  auto operator<=>(const FlowAddress&) const = default;
};

struct FlowTuple {
  FlowAddress src;  // the local end of the socket
  uint16_t src_port = 0;
  FlowAddress dst;  // the remote end
  uint16_t dst_port = 0;
  auto operator<=>(const FlowTuple&) const = default;
};

struct Flow {
  uint64_t flow_id = 0;       // the socket cookie when `cookie_known`, else a random id
  bool cookie_known = false;  // flow_id equals sock_diag's idiag_cookie
  uint32_t netns_inode = 0;
  FlowTuple tuple;
  FlowRole role = FlowRole::kClient;
  uint32_t mark = 0;
  // Unix time in nanoseconds; 0 = unknown (a flow seen late has no start).
  int64_t started_unix_ns = 0;
  int64_t established_unix_ns = 0;
  int64_t ended_unix_ns = 0;
  uint64_t bytes_sent = 0;      // data bytes (retransmits included)
  uint64_t bytes_received = 0;  // data bytes (the FIN's sequence number taken out)
  uint32_t srtt_us = 0;
  uint32_t retransmits = 0;
  uint32_t resets_received = 0;
  uint32_t resets_sent = 0;
  int32_t sk_err = 0;             // errno left on the socket at close
  uint8_t closed_from_state = 0;  // TCP state before TCP_CLOSE
  bool seen_late = false;         // started before tracing: start and latency unknown
  bool live = false;              // bytes refreshed from sock_diag tcp_info while open
  // Traced only because its netns is watched for mesh bypass (an application connect of an
  // ambient pod, or ztunnel accepting one), not for a traced port.
  bool bypass_watch = false;
  FlowOutcome outcome = FlowOutcome::kOpen;

  // SYN_SENT -> ESTABLISHED for clients (SYN_RECV -> ESTABLISHED for servers).
  std::optional<int64_t> ConnectLatencyUs() const;
  uint32_t resets() const { return resets_received + resets_sent; }
};

// Event kinds: kOpen and kClose are the tracer's (bpf/hbone_flows.h); kUpdate is user space's
// own, a live tcp_info refresh of an open flow's bytes, srtt and retransmits (the daemon's
// FlowMonitor), so a long-lived flow's numbers reach the outputs before it closes.
enum class FlowEventKind : uint8_t { kOpen, kClose, kUpdate };
std::string_view FlowEventKindName(FlowEventKind kind);  // "open", "close", "update"

struct FlowEvent {
  FlowEventKind kind = FlowEventKind::kOpen;
  Flow flow;
};

// Decodes one ring-buffer record (struct hbone_flow_event). `monotonic_to_unix_ns` converts the
// kernel's CLOCK_MONOTONIC stamps. Fails on a wrong size or an unknown kind/role/family.
Result<FlowEvent> DecodeFlowEvent(std::span<const uint8_t> record, int64_t monotonic_to_unix_ns);

// The outcome of a closing flow from what the kernel left on it (pure; tested on its own).
// `states_seen`: bit (1 << state) per TCP state entered; `closed_from`: the state before CLOSE.
FlowOutcome ClassifyClose(bool established, uint16_t states_seen, uint8_t closed_from,
                          int32_t sk_err, uint32_t resets_received, uint32_t resets_sent,
                          uint32_t retransmits);

// Size of the raw record (for tests and the loader's sanity check).
size_t FlowEventRecordSize();

}  // namespace ad
