// Listening sockets of one netns via sock_diag (inet_diag): TCP LISTEN and bound, unconnected UDP
// sockets for IPv4 and IPv6, with bind address, port, inode and SO_MARK.
#pragma once

#include <linux/sock_diag.h>

#include <cstdint>
#include <span>
#include <vector>

#include "model/result.h"
#include "model/zds.h"

namespace ad {

// Decodes one inet_diag dump reply (datagrams concatenated, through NLMSG_DONE) of `protocol`
// (IPPROTO_TCP or IPPROTO_UDP). Pure; validates every length. Keeps every socket it is given: the
// request chooses the states. owner_pids stay empty.
// `message_type`: SOCK_DIAG_BY_FAMILY, or TCPDIAG_GETSOCK for TcpListenerDumpRequest's reply.
Result<std::vector<ListeningSocket>> DecodeInetDiagMessages(
    std::span<const uint8_t> bytes, uint8_t protocol, uint16_t message_type = SOCK_DIAG_BY_FAMILY);

// The request for one family (AF_INET / AF_INET6) and protocol: TCP in LISTEN, UDP in CLOSE (a
// bound UDP socket that is not connected).
std::vector<uint8_t> ListenerDumpRequest(int family, uint8_t protocol);

// TCP listeners of both families in one walk of the kernel's (node-wide) listening hash: the
// inet_diag_req of TCPDIAG_GETSOCK, whose dump the kernel runs for AF_UNSPEC. A per-family
// SOCK_DIAG_BY_FAMILY request walks the same hash once per family.
std::vector<uint8_t> TcpListenerDumpRequest();

// The raw reply of one such dump in the calling thread's netns (for tests and fuzz seeds).
Result<std::vector<uint8_t>> DumpInetDiagRaw(int family, uint8_t protocol);

struct ListenerDump {
  std::vector<ListeningSocket> listeners;  // tcp4, tcp6, udp4, udp6; sorted by protocol, port
  std::vector<SourceError> errors;         // one per failed family/protocol dump
};

// TCP: one dump for both families (per family if the kernel refuses it); UDP: one per family.
// In the calling thread's netns (the thread must already be in the target netns). Never fails as
// a whole. `include_udp`: each UDP dump walks the whole (global) UDP hash table, ~25 µs per
// family, and adds only ztunnel's DNS port, which it also opens on TCP; the node scan leaves it
// out.
ListenerDump ReadListeningSockets(bool include_udp = true);

// The dump request for bound, unconnected UDP sockets of `family` on local port `port` only: an
// inet_diag_req_v2 with idiag_sport set and an INET_DIAG_REQ_BYTECODE filter (sport >= port &&
// sport <= port), so the kernel returns just those sockets instead of every UDP socket of the
// netns. It still steps over every slot of the node-wide UDP hash, so the node scan uses the
// lookups below; this lists every socket on the port (tests, `rules`-style listings).
std::vector<uint8_t> UdpPortDumpRequest(int family, uint16_t port);

// The exact-socket request (no NLM_F_DUMP) for the UDP socket that receives a datagram sent to
// the loopback address of `family` (127.0.0.1 / ::1) on `port`: udp_diag answers it with one hash
// lookup, the receive path's own (a wildcard or dual-stack socket matches too), never a walk.
std::vector<uint8_t> UdpLoopbackLookupRequest(int family, uint16_t port);

// The UDP sockets that receive datagrams to 127.0.0.1:`port` and [::1]:`port` in the calling
// thread's netns (at most one each): ztunnel's DNS proxy (15053), where REDIRECT sends a pod's
// DNS. Two lookups, whatever the number of UDP sockets on the node (a port-filtered dump would
// still make the kernel step over every slot of its UDP hash table, 16384 here, per family and
// netns). Never fails as a whole; errors name the failed family.
ListenerDump ReadUdpSocketsOnPort(uint16_t port);
// TCP sockets of both families in the states of `state_mask` (a bit per TCP state, e.g.
// 1 << TCP_CLOSE_WAIT), filtered in the kernel, in the calling thread's netns: their inodes
// (0 for sockets no file refers to, e.g. not yet accepted). One TCPDIAG_GETSOCK walk, one
// SOCK_DIAG_BY_FAMILY dump per family when the kernel refuses it.
Result<std::vector<uint64_t>> TcpSocketInodesInStates(uint32_t state_mask);

}  // namespace ad
