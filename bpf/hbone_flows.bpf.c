// HBONE flow tracer: one open and one close event per TCP connection to or from a traced port
// (15008 by default), with its failure evidence (retransmits, resets, sk_err at close).
//
// Every hook exists in three flavours (tp_btf, raw_tp, classic tracepoint); the loader enables one
// flavour before load (bpf_program__set_autoload), so the kernel sees only one set. All socket
// reads go through BPF_CORE_READ (probe reads), which is valid for all three (tp_btf's direct
// access stops at struct sock: toolchain-kernel.md §3.4).
// vmlinux.h first: the libbpf headers and the shared layout need its types.
// clang-format off
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "hbone_flows.h"
// clang-format on

#define AF_INET 2
#define AF_INET6 10
#define PROTO_TCP 6
#define RCV_SHUTDOWN 1

// TCP states (include/net/tcp_states.h); the values are kernel ABI.
#define ST_ESTABLISHED 1
#define ST_SYN_SENT 2
#define ST_SYN_RECV 3
#define ST_CLOSE 7
#define ST_LISTEN 10

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Set by the loader before load; the verifier folds them into constants.
const volatile __u16 traced_ports[HBONE_MAX_PORTS] = {15008};
const volatile __u32 traced_port_count = 1;
// Also trace every connect(), whatever its destination port (the mesh-bypass check sees the
// application side of redirected connections); accepted sockets still need a traced port.
const volatile bool trace_all_connects = false;
// Mesh-bypass mode: in the netns of `watched_netns` (the node's ambient pods, fed by user space)
// trace every connect and ztunnel's accepts on the capture ports; other netns pay one map lookup
// per connect. Independent of trace_all_connects (the whole node).
const volatile bool watch_netns = false;
const volatile __u16 capture_ports[HBONE_MAX_CAPTURE_PORTS] = {15001, 15053};
// Wake the consumer for the first record in an empty ring and then only once this much is waiting
// (0: on every event). A wakeup per event costs user space far more than the event itself; the
// consumer also drains on its poll timeout.
const volatile __u64 wakeup_bytes = 0;

// Per-socket state between the first transition and TCP_CLOSE, keyed by the socket's address
// (stable for the socket's life; the entry is deleted at close). LRU: a flood of connections
// evicts the oldest state instead of failing new ones. Resized by the loader.
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64);
  __type(value, struct hbone_flow_event);
} flow_states SEC(".maps");

// Open and close events to user space. Resized by the loader (a power of two, >= one page).
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 20);
} flow_events SEC(".maps");

// Netns inodes watched for mesh bypass (only read when watch_netns is set). Written by user space
// only; bounded (resized by the loader), a full map is user space's overflow to count.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, __u8);
} watched_netns SEC(".maps");

// enum hbone_counter, per CPU so counting never contends; user space sums them.
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, HBONE_COUNTER_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} flow_counters SEC(".maps");

static __always_inline void count(__u32 counter) {
  __u64* value = bpf_map_lookup_elem(&flow_counters, &counter);
  if (value) *value += 1;
}

static __always_inline bool port_traced(__u16 port) {
#pragma unroll
  for (int i = 0; i < HBONE_MAX_PORTS; i++) {
    if (i >= traced_port_count) return false;
    if (traced_ports[i] == port) return true;
  }
  return false;
}

static __always_inline bool netns_watched(struct sock* sk, bool btf_sk) {
  __u32 inode = btf_sk ? sk->__sk_common.skc_net.net->ns.inum
                       : BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
  return bpf_map_lookup_elem(&watched_netns, &inode) != NULL;
}

static __always_inline bool capture_port(__u16 port) {
#pragma unroll
  for (int i = 0; i < HBONE_MAX_CAPTURE_PORTS; i++) {
    if (capture_ports[i] == port) return true;
  }
  return false;
}

// Addresses, ports, mark and netns; ports only when set (a connecting socket gets its source port
// after CLOSE->SYN_SENT, and a closing one may already have lost skc_num: read inet_sport).
static __always_inline void read_identity(struct sock* sk, struct hbone_flow_event* flow) {
  __u16 sport = bpf_ntohs(BPF_CORE_READ((struct inet_sock*)sk, inet_sport));
  __u16 dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
  if (sport) flow->sport = sport;
  if (dport) flow->dport = dport;
  flow->family = BPF_CORE_READ(sk, __sk_common.skc_family);
  if (flow->family == AF_INET) {
    // A __u32 read and a copy: BPF_CORE_READ_INTO into a byte array copies one byte (§3.4).
    __u32 saddr = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
    __u32 daddr = BPF_CORE_READ(sk, __sk_common.skc_daddr);
    __builtin_memcpy(flow->saddr, &saddr, 4);
    __builtin_memcpy(flow->daddr, &daddr, 4);
  } else {
    BPF_CORE_READ_INTO(&flow->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
    BPF_CORE_READ_INTO(&flow->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
  }
  flow->netns_inode = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
  flow->mark = BPF_CORE_READ(sk, sk_mark);
}

static __always_inline void read_counters(struct sock* sk, struct hbone_flow_event* flow) {
  struct tcp_sock* tp = (struct tcp_sock*)sk;
  flow->bytes_sent = BPF_CORE_READ(tp, bytes_sent);
  flow->bytes_received = BPF_CORE_READ(tp, bytes_received);
  flow->bytes_acked = BPF_CORE_READ(tp, bytes_acked);
  flow->srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3;
  flow->total_retrans = BPF_CORE_READ(tp, total_retrans);
}

// tp_btf: the same reads as plain loads through BTF pointers (the verifier turns them into
// exception-handled loads), without a bpf_probe_read_kernel call each. inet_sock lies beyond
// struct sock, so it is reached through bpf_skc_to_tcp_sock (§3.4).
static __always_inline void read_identity_btf(struct sock* sk, struct hbone_flow_event* flow) {
  struct tcp_sock* tp = bpf_skc_to_tcp_sock(sk);
  if (!tp) {
    read_identity(sk, flow);
    return;
  }
  __u16 sport = bpf_ntohs(tp->inet_conn.icsk_inet.inet_sport);
  __u16 dport = bpf_ntohs(sk->__sk_common.skc_dport);
  if (sport) flow->sport = sport;
  if (dport) flow->dport = dport;
  flow->family = sk->__sk_common.skc_family;
  if (flow->family == AF_INET) {
    __u32 saddr = sk->__sk_common.skc_rcv_saddr;
    __u32 daddr = sk->__sk_common.skc_daddr;
    __builtin_memcpy(flow->saddr, &saddr, 4);
    __builtin_memcpy(flow->daddr, &daddr, 4);
  } else {
    BPF_CORE_READ_INTO(&flow->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
    BPF_CORE_READ_INTO(&flow->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
  }
  flow->netns_inode = sk->__sk_common.skc_net.net->ns.inum;
  flow->mark = sk->sk_mark;
}

static __always_inline void read_counters_btf(struct sock* sk, struct hbone_flow_event* flow) {
  struct tcp_sock* tp = bpf_skc_to_tcp_sock(sk);
  if (!tp) {
    read_counters(sk, flow);
    return;
  }
  flow->bytes_sent = tp->bytes_sent;
  flow->bytes_received = tp->bytes_received;
  flow->bytes_acked = tp->bytes_acked;
  flow->srtt_us = tp->srtt_us >> 3;
  flow->total_retrans = tp->total_retrans;
}

static __always_inline void identity(struct sock* sk, struct hbone_flow_event* flow, bool btf_sk) {
  if (btf_sk) {
    read_identity_btf(sk, flow);
  } else {
    read_identity(sk, flow);
  }
}

static __always_inline void counters(struct sock* sk, struct hbone_flow_event* flow, bool btf_sk) {
  if (btf_sk) {
    read_counters_btf(sk, flow);
  } else {
    read_counters(sk, flow);
  }
}

static __always_inline void emit(struct hbone_flow_event* flow, __u8 kind) {
  struct hbone_flow_event* event = bpf_ringbuf_reserve(&flow_events, sizeof(*event), 0);
  if (!event) {
    count(HBONE_COUNTER_LOST_EVENTS);
    return;
  }
  __builtin_memcpy(event, flow, sizeof(*event));
  event->kind = kind;
  __u64 flags = 0;
  if (wakeup_bytes) {
    // Unread bytes, this record included: it is the only one (an idle reader sleeps until it
    // comes), or a quarter of the ring is filled. Records in between wake nobody.
    const __u64 unread = bpf_ringbuf_query(&flow_events, BPF_RB_AVAIL_DATA);
    const __u64 record = ((sizeof(*event) + 7) & ~7ULL) + BPF_RINGBUF_HDR_SZ;
    flags = unread <= record || unread >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
  }
  bpf_ringbuf_submit(event, flags);
  count(HBONE_COUNTER_EVENTS);
}

// `btf_sk`: sk is a BTF pointer (tp_btf), so bpf_get_socket_cookie is allowed; a compile-time
// constant, so the raw_tp and tracepoint copies contain no call the verifier would reject.
static __always_inline void flow_identity_init(struct sock* sk, struct hbone_flow_event* flow,
                                               bool btf_sk) {
  __u64 cookie = 0;
  if (btf_sk) {
    cookie = bpf_get_socket_cookie(sk);
  } else {
    // Only set when someone generated it (sock_diag, SO_COOKIE); else a random id.
    cookie = BPF_CORE_READ(sk, __sk_common.skc_cookie.counter);
  }
  if (cookie) {
    flow->flow_id = cookie;
    flow->flags |= HBONE_FLAG_REAL_COOKIE;
  } else {
    flow->flow_id = (1ULL << 63) | ((__u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32();
  }
}

static __always_inline void finish(struct sock* sk, struct hbone_flow_event* flow, int oldstate,
                                   bool btf_sk) {
  // Addresses and netns do not change; re-read them only if the ports were not known yet.
  if (flow->sport && flow->dport && flow->established_ns) {
    flow->mark = btf_sk ? sk->sk_mark : BPF_CORE_READ(sk, sk_mark);
  } else {
    identity(sk, flow, btf_sk);
  }
  counters(sk, flow, btf_sk);
  flow->end_ns = bpf_ktime_get_ns();
  flow->last_state = oldstate;
  flow->sk_err = btf_sk ? sk->sk_err : BPF_CORE_READ(sk, sk_err);
  if (BPF_CORE_READ(sk, sk_shutdown) & RCV_SHUTDOWN) flow->flags |= HBONE_FLAG_FIN_RECEIVED;
  emit(flow, HBONE_EVENT_CLOSE);
}

static __always_inline int on_set_state(struct sock* sk, int oldstate, int newstate, bool btf_sk) {
  if (!sk) return 0;
  if ((btf_sk ? sk->sk_protocol : BPF_CORE_READ(sk, sk_protocol)) != PROTO_TCP) return 0;
  __u64 key = (__u64)sk;
  struct hbone_flow_event* flow = bpf_map_lookup_elem(&flow_states, &key);
  if (!flow) {
    // The path every untraced transition takes: plain loads under tp_btf (skc_num is the local
    // port in host order; it can already be 0 at close, then inet_sport is read).
    __u16 sport = btf_sk ? sk->__sk_common.skc_num : 0;
    if (!sport) sport = bpf_ntohs(BPF_CORE_READ((struct inet_sock*)sk, inet_sport));
    __u16 dport =
        bpf_ntohs(btf_sk ? sk->__sk_common.skc_dport : BPF_CORE_READ(sk, __sk_common.skc_dport));
    __u8 role = 0;
    __u8 flags = 0;
    if (oldstate == ST_CLOSE && newstate == ST_SYN_SENT) {
      if (trace_all_connects || port_traced(dport)) {
        role = HBONE_ROLE_CLIENT;
      } else if (watch_netns && netns_watched(sk, btf_sk)) {
        role = HBONE_ROLE_CLIENT;  // an application connect of a watched (ambient) netns
        flags = HBONE_FLAG_WATCHED_NETNS;
      } else {
        return 0;
      }
    } else if (newstate == ST_SYN_RECV) {
      // The child socket, cloned from the listener.
      if (port_traced(sport)) {
        role = HBONE_ROLE_SERVER;
      } else if (watch_netns && capture_port(sport) && netns_watched(sk, btf_sk)) {
        role = HBONE_ROLE_SERVER;  // ztunnel accepting a redirected connect
        flags = HBONE_FLAG_WATCHED_NETNS;
      } else {
        return 0;
      }
    } else if (newstate == ST_CLOSE && oldstate != ST_LISTEN &&
               (port_traced(sport) || port_traced(dport))) {
      // A flow older than the tracer: report its end with what the socket still knows.
      struct hbone_flow_event late = {};
      late.role = port_traced(sport) ? HBONE_ROLE_SERVER : HBONE_ROLE_CLIENT;
      late.flags = HBONE_FLAG_SEEN_LATE;
      late.states_seen = 1 << ST_CLOSE;
      flow_identity_init(sk, &late, btf_sk);
      count(HBONE_COUNTER_LATE_FLOWS);
      finish(sk, &late, oldstate, btf_sk);
      return 0;
    } else {
      return 0;
    }
    struct hbone_flow_event fresh = {};
    fresh.role = role;
    fresh.flags = flags;
    if (flags) count(HBONE_COUNTER_WATCHED_FLOWS);
    fresh.start_ns = bpf_ktime_get_ns();
    fresh.states_seen = 1 << newstate;
    fresh.last_state = newstate;
    flow_identity_init(sk, &fresh, btf_sk);
    identity(sk, &fresh, btf_sk);
    if (bpf_map_update_elem(&flow_states, &key, &fresh, BPF_NOEXIST) != 0) {
      count(HBONE_COUNTER_STATE_FULL);
    }
    return 0;
  }
  flow->states_seen |= 1 << (newstate & 15);
  if (newstate == ST_ESTABLISHED) {
    flow->established_ns = bpf_ktime_get_ns();
    flow->last_state = newstate;
    identity(sk, flow, btf_sk);
    // Always: a socket enters ESTABLISHED once, and an earlier open event (a retransmitted SYN
    // made it visible as connecting) must be superseded, or readers keep it connecting.
    counters(sk, flow, btf_sk);
    emit(flow, HBONE_EVENT_OPEN);
    flow->kind = HBONE_EVENT_OPEN;  // in the state: the open event went out
    return 0;
  }
  if (newstate == ST_CLOSE) {
    finish(sk, flow, oldstate, btf_sk);
    bpf_map_delete_elem(&flow_states, &key);
    return 0;
  }
  flow->last_state = newstate;
  return 0;
}

static __always_inline int on_retransmit(struct sock* sk) {
  if (!sk) return 0;
  __u64 key = (__u64)sk;
  struct hbone_flow_event* flow = bpf_map_lookup_elem(&flow_states, &key);
  if (!flow) return 0;
  __sync_fetch_and_add(&flow->retransmits, 1);
  // A connect whose SYN goes unanswered becomes visible now, not only when it gives up.
  if (flow->last_state == ST_SYN_SENT && !(flow->kind & HBONE_EVENT_OPEN)) {
    read_identity(sk, flow);
    read_counters(sk, flow);
    emit(flow, HBONE_EVENT_OPEN);
    flow->kind = HBONE_EVENT_OPEN;
  }
  return 0;
}

static __always_inline int on_reset(struct sock* sk, bool received) {
  if (!sk) return 0;  // a reset for no socket (nothing listens): the client side sees it
  __u64 key = (__u64)sk;
  struct hbone_flow_event* flow = bpf_map_lookup_elem(&flow_states, &key);
  if (!flow) return 0;
  // Plain increments: a socket's resets are serialised by its lock (and BPF has no 16-bit atomics).
  if (received) {
    flow->resets_received += 1;
  } else {
    flow->resets_sent += 1;
  }
  return 0;
}

// --- tp_btf (BPF_TRACE_RAW_TP with BTF-typed arguments; no tracefs needed) ---

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(btf_set_state, struct sock* sk, int oldstate, int newstate) {
  return on_set_state(sk, oldstate, newstate, true);
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(btf_retransmit, struct sock* sk) { return on_retransmit(sk); }

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(btf_receive_reset, struct sock* sk) { return on_reset(sk, true); }

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(btf_send_reset, struct sock* sk) { return on_reset(sk, false); }

// --- raw_tp (untyped arguments; probe reads only) ---

SEC("raw_tp/inet_sock_set_state")
int BPF_PROG(raw_set_state, struct sock* sk, int oldstate, int newstate) {
  return on_set_state(sk, oldstate, newstate, false);
}

SEC("raw_tp/tcp_retransmit_skb")
int BPF_PROG(raw_retransmit, struct sock* sk) { return on_retransmit(sk); }

SEC("raw_tp/tcp_receive_reset")
int BPF_PROG(raw_receive_reset, struct sock* sk) { return on_reset(sk, true); }

SEC("raw_tp/tcp_send_reset")
int BPF_PROG(raw_send_reset, struct sock* sk) { return on_reset(sk, false); }

// --- classic tracepoints (need tracefs mounted for their event ids) ---

SEC("tracepoint/sock/inet_sock_set_state")
int tp_set_state(struct trace_event_raw_inet_sock_set_state* ctx) {
  return on_set_state((struct sock*)ctx->skaddr, ctx->oldstate, ctx->newstate, false);
}

SEC("tracepoint/tcp/tcp_retransmit_skb")
int tp_retransmit(struct trace_event_raw_tcp_retransmit_skb* ctx) {
  return on_retransmit((struct sock*)ctx->skaddr);
}

SEC("tracepoint/tcp/tcp_receive_reset")
int tp_receive_reset(struct trace_event_raw_tcp_event_sk* ctx) {
  return on_reset((struct sock*)ctx->skaddr, true);
}

SEC("tracepoint/tcp/tcp_send_reset")
int tp_send_reset(struct trace_event_raw_tcp_send_reset* ctx) {
  return on_reset((struct sock*)ctx->skaddr, false);
}
