/* The event layout shared by the HBONE flow tracer's BPF programs (hbone_flows.bpf.c) and its
 * user-space loader (agent/tracing). Plain C with fixed-width kernel types so both compilers lay
 * it out the same way; user space checks the size before it reads an event. */
#ifndef AD_BPF_HBONE_FLOWS_H_
#define AD_BPF_HBONE_FLOWS_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Ports the kernel side compares against (const volatile, set before load). */
#define HBONE_MAX_PORTS 8
/* ztunnel's in-pod listeners the mesh-bypass check pairs application connects with: the
 * outbound capture port and the DNS proxy (TCP :53 is redirected there, not to 15001). */
#define HBONE_MAX_CAPTURE_PORTS 2

enum hbone_event_kind {
  HBONE_EVENT_OPEN = 1,  /* ESTABLISHED, or the first SYN retransmit of a connect in SYN_SENT */
  HBONE_EVENT_CLOSE = 2, /* the socket reached TCP_CLOSE: the flow's final numbers */
};

enum hbone_role {
  HBONE_ROLE_CLIENT = 1, /* connect(): the destination port is traced */
  HBONE_ROLE_SERVER = 2, /* accepted: the local port is traced */
};

/* Flags of a flow. */
#define HBONE_FLAG_SEEN_LATE 0x1    /* first seen at close: started before the tracer loaded */
#define HBONE_FLAG_REAL_COOKIE 0x2  /* flow_id is the socket cookie (sock_diag idiag_cookie) */
#define HBONE_FLAG_FIN_RECEIVED 0x4 /* RCV_SHUTDOWN at close: bytes_received counts the FIN */
/* Tracked only because its netns is watched for mesh bypass (no traced port, not all-connects) */
#define HBONE_FLAG_WATCHED_NETNS 0x8

/* Indexes of the per-CPU counter array. */
enum hbone_counter {
  HBONE_COUNTER_EVENTS = 0,        /* events submitted to the ring buffer */
  HBONE_COUNTER_LOST_EVENTS = 1,   /* ring-buffer reservations that failed: events lost */
  HBONE_COUNTER_STATE_FULL = 2,    /* flows not tracked because the state map refused them */
  HBONE_COUNTER_LATE_FLOWS = 3,    /* close events of flows that started before tracing */
  HBONE_COUNTER_WATCHED_FLOWS = 4, /* flows tracked because their netns is watched (bypass) */
  HBONE_COUNTER_COUNT = 5,
};

/* One open or close event; also the per-socket state kept in the LRU hash between them. */
struct hbone_flow_event {
  __u64 flow_id;        /* socket cookie when known (REAL_COOKIE), else random with bit 63 */
  __u64 start_ns;       /* CLOCK_MONOTONIC: SYN_SENT (client) or SYN_RECV (server) */
  __u64 established_ns; /* 0: never established */
  __u64 end_ns;         /* 0 while open */
  __u64 bytes_sent;     /* tcp_sock.bytes_sent: data bytes, retransmits included */
  __u64 bytes_received; /* tcp_sock.bytes_received: includes the FIN (see FIN_RECEIVED) */
  __u64 bytes_acked;    /* tcp_sock.bytes_acked: includes SYN and FIN sequence space */
  __u32 netns_inode;
  __u32 mark;
  __u32 srtt_us;
  __u32 total_retrans;   /* tcp_sock.total_retrans at the event */
  __u32 retransmits;     /* tcp_retransmit_skb calls seen */
  __u16 resets_received; /* tcp_receive_reset */
  __u16 resets_sent;     /* tcp_send_reset while the socket was tracked */
  __u16 states_seen;     /* bit (1 << TCP state) for every state entered */
  __u16 sport;           /* host order */
  __u16 dport;
  __u16 family;   /* AF_INET / AF_INET6 */
  __u8 saddr[16]; /* IPv4 in the first 4 bytes */
  __u8 daddr[16];
  __s32 sk_err;    /* sk_err at close (ECONNREFUSED, ETIMEDOUT, ECONNRESET ...), 0 if none */
  __u8 kind;       /* enum hbone_event_kind */
  __u8 role;       /* enum hbone_role */
  __u8 last_state; /* the state the event's transition came from (at close) or is in */
  __u8 flags;      /* HBONE_FLAG_* */
};

#endif /* AD_BPF_HBONE_FLOWS_H_ */
