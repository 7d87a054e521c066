// Snapshot data for the ZDS hand-off cross-check (istio-cni → ztunnel), pod identity and ztunnel's
// own view. Plain data like the rest of the snapshot; filled by read-only sources only (the agent
// never connects to the ZDS socket).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/rule.h"
#include "model/shared_list.h"
#include "model/source_error.h"

namespace ad {

// One AF_UNIX socket as sock_diag reports it.
struct UnixSocket {
  uint64_t inode = 0;
  uint32_t type = 0;           // SOCK_STREAM 1, SOCK_DGRAM 2, SOCK_SEQPACKET 5
  uint8_t state = 0;           // TCP_ESTABLISHED 1, TCP_LISTEN 10 (kernel reuses TCP states)
  std::string path;            // bound name (accepted sockets report the listener's); empty for
                               // unbound clients; abstract names start with '@'
  uint64_t peer_inode = 0;     // connected peer (0 for listeners)
  uint32_t receive_queue = 0;  // bytes/records not yet read (listener: pending accept backlog)
  uint32_t send_queue = 0;
  std::vector<int> owner_pids;  // processes holding an fd on it (from /proc/<pid>/fd)
  // The bound file (UNIX_DIAG_VFS), comparable with stat() of the path; 0 when not bound to a
  // file. Accepted sockets share their listener's name and file.
  uint64_t vfs_dev = 0;  // st_dev encoding
  uint64_t vfs_inode = 0;
  // Listener only: client sockets whose connection waits in the accept backlog (UNIX_DIAG_ICONS).
  std::vector<uint64_t> pending_client_inodes;

  bool operator==(const UnixSocket&) const = default;
};

// The ZDS socket seen from the kernel: istio-cni's listener, its accepted connections and the
// ztunnel-side client sockets they are connected to.
struct ZdsSocketState {
  std::string path;  // default /var/run/ztunnel/ztunnel.sock
  bool listener_found = false;
  UnixSocket listener;
  std::vector<UnixSocket> accepted;  // server side of each connection (owner: istio-cni)
  std::vector<UnixSocket> clients;   // client side of each connection (owner: ztunnel)
  std::vector<SourceError> errors;

  bool operator==(const ZdsSocketState&) const = default;
};

enum class ProcessRole : uint8_t { kOther, kIstioCni, kZtunnel };
std::string_view ProcessRoleName(ProcessRole role);  // "other", "istio-cni", "ztunnel"

// A process that matters for the hand-off, with the network namespaces it holds open as fds
// (identified by stat() of /proc/<pid>/fd/<n>: nsfs dev + inode, never by the link text).
struct ProcessNetnsFds {
  int pid = 0;
  std::string comm;
  ProcessRole role = ProcessRole::kOther;
  uint64_t own_netns_inode = 0;           // the netns the process itself lives in
  std::vector<uint64_t> netns_fd_inodes;  // sorted, unique
  int64_t start_time_unix_ms = 0;         // from /proc/<pid>/stat starttime + boot time

  bool operator==(const ProcessNetnsFds&) const = default;
};

// One listening socket inside a netns (sock_diag AF_INET/AF_INET6).
struct ListeningSocket {
  Family family = Family::kIpv4;
  uint8_t protocol = 6;  // 6 tcp, 17 udp (udp "listening" = bound, unconnected)
  std::string address;   // canonical bind address ("0.0.0.0", "::", "127.0.0.1")
  uint16_t port = 0;
  uint32_t mark = 0;  // SO_MARK (ztunnel: 0x539)
  uint64_t inode = 0;
  std::vector<int> owner_pids;
  bool mark_known = false;  // the kernel reports the mark only to a CAP_NET_ADMIN reader

  bool operator==(const ListeningSocket&) const = default;
};

// ztunnel's per-pod state from /config_dump "workloadState" (keyed by Kubernetes pod UID).
struct ZtunnelWorkloadState {
  std::string pod_uid;
  std::string state;  // "Pending" | "Up"
  std::string name;
  std::string namespace_name;
  std::string service_account;

  bool operator==(const ZtunnelWorkloadState&) const = default;
};

// One entry of /config_dump "workloads" (cluster-wide, from XDS).
struct ZtunnelWorkload {
  std::string uid;  // XDS uid, e.g. "Kubernetes//Pod/<ns>/<name>" (not the pod UID)
  std::string name;
  std::string namespace_name;
  std::string node;
  std::string protocol;          // "HBONE" | "TCP"
  std::string network_mode;      // "Standard" | "HostNetwork"
  std::vector<std::string> ips;  // canonical addresses without network prefix

  bool operator==(const ZtunnelWorkload&) const = default;
};

// Whether the hand-off checks read `workload`: an HBONE (captured) pod of this node. The dump
// lists every workload of the mesh; a workload without a node is kept (older ztunnels).
inline bool IsLocalHboneWorkload(const ZtunnelWorkload& workload, std::string_view node_name) {
  return workload.protocol == "HBONE" && workload.network_mode != "HostNetwork" &&
         (workload.node.empty() || workload.node == node_name);
}

// One entry of /config_dump "certificates": the SPIFFE identity ztunnel holds a certificate for
// (one per service account of its workloads) and the state of its chain.
struct ZtunnelCertificate {
  std::string identity;  // "spiffe://<trust domain>/ns/<namespace>/sa/<service account>"
  std::string state;     // "Available" | "Initializing" | "Unavailable: <error>"
  // The earliest expirationTime of certChain (a chain is invalid once any of it expires); 0 when
  // the chain is empty or no time could be parsed.
  int64_t expires_unix_ms = 0;
  size_t chain_length = 0;

  bool operator==(const ZtunnelCertificate&) const = default;
};

// How old a repeated collection's /config_dump may get before it is fetched again when nothing
// suggests it changed (ZtunnelAdminOptions::config_dump_refresh): the age the certificate
// evidence quotes. Parsing a 250-pod dump was the idle daemon's largest single cost at 30 s.
inline constexpr int64_t kConfigDumpRefreshMs = 60'000;

// What one ztunnel process says about itself over its admin/readiness/stats ports.
struct ZtunnelAdminState {
  int pid = 0;
  uint64_t netns_inode = 0;
  bool admin_reachable = false;
  std::optional<bool> ready;               // :15021/healthz/ready 200 vs 500
  std::vector<std::string> pending_tasks;  // from "not ready, pending: a, b"
  // Shared with the daemon's cached /config_dump answer (SharedList) rather than copied per poll.
  SharedList<ZtunnelWorkloadState> workload_state;
  SharedList<ZtunnelWorkload> workloads;         // IsLocalHboneWorkload ones only
  size_t workloads_seen = 0;                     // every entry of "workloads" (the mesh's)
  bool has_certificates = false;                 // the "certificates" section was present
  std::vector<ZtunnelCertificate> certificates;  // sorted by identity
  std::optional<double> active_proxy_count;      // workload_manager_active_proxy_count
  std::optional<double> pending_proxy_count;     // workload_manager_pending_proxy_count
  std::vector<SourceError> errors;

  bool operator==(const ZtunnelAdminState&) const = default;
};

// How close one ztunnel process is to its limits (/proc/<pid>/{fd,limits,status,cgroup}, its
// cgroup's memory limit, and its TCP sockets in CLOSE_WAIT). Values that could not be read are 0
// with the reason in `errors`. Kept coarse so that an idle ztunnel compares equal poll to poll.
struct ZtunnelResourceUsage {
  int pid = 0;
  uint64_t open_fds = 0;
  uint64_t fd_soft_limit = 0;  // "Max open files" soft; 0 when unlimited or unknown
  bool fd_limit_unlimited = false;
  uint64_t rss_bytes = 0;           // VmRSS, rounded down to whole MiB
  uint64_t memory_limit_bytes = 0;  // cgroup memory.max / memory.limit_in_bytes; 0: none/unknown
  bool memory_unlimited = false;    // the cgroup says "max" (v2) or a v1 "no limit" value
  std::string cgroup;               // the memory cgroup's path as /proc/<pid>/cgroup names it
  // CLOSE_WAIT TCP sockets held by the process, in its own netns and the netns it holds fds of:
  // the counts of the last few collections, oldest first (the node source keeps them; one entry
  // in a one-shot report).
  std::vector<uint32_t> close_wait_counts;
  uint32_t close_wait_netns = 0;      // netns dumped for the last count
  bool close_wait_truncated = false;  // more netns than the bound: the count covers some only
  std::vector<SourceError> errors;

  bool operator==(const ZtunnelResourceUsage&) const = default;
};

// Pod identity from CRI (runtime.v1 ListPodSandbox + PodSandboxStatus verbose).
struct PodIdentity {
  std::string uid;
  std::string name;
  std::string namespace_name;
  std::string sandbox_id;
  int pid = 0;               // pause process, 0 when unknown
  std::string netns_path;    // from the verbose info JSON
  uint64_t netns_inode = 0;  // stat of netns_path (or /proc/<pid>/ns/net), 0 if unresolved
  bool host_network = false;
  std::vector<std::string> ips;
  int64_t created_at_unix_ms = 0;    // the sandbox's CRI created_at, 0 when unknown
  std::string dataplane_mode_label;  // the pod's istio.io/dataplane-mode label (CRI labels)

  bool operator==(const PodIdentity&) const = default;
};

struct CriState {
  bool available = false;
  std::string endpoint;  // the socket that answered
  std::string runtime;   // "containerd 1.6.20"
  // Every pod of the node; shared (copy-on-write) with the cached answer that daemon polls reuse.
  SharedList<PodIdentity> pods;
  // The runtime's CNI config directory (a host path) from its verbose Status (containerd); empty
  // when the runtime does not say. The note says why not, or which networks it loaded.
  std::string cni_conf_dir;
  std::string cni_pod_network;  // the network it loaded for pods (eth0); empty: none or unknown
  std::string cni_note;
  std::vector<SourceError> errors;

  bool operator==(const CriState&) const = default;
};

}  // namespace ad
