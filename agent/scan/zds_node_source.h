// The ZDS hand-off as the kernel sees it, without ever connecting to the socket (a client would
// become istio-cni's "latest" connection and receive pod adds meant for ztunnel). sock_diag finds
// istio-cni's SEQPACKET listener, its accepted connections and the ztunnel client sockets at the
// other end; the /proc fd inventory names the processes holding them and the netns fds they keep.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/istio_facts.h"
#include "model/snapshot.h"
#include "scan/node_source.h"
#include "sources/proc/fd_inventory.h"

namespace ad {

struct ZdsSourceOptions {
  std::string socket_path{istio::kZdsSocketPath};
  // Prepended to socket_path for stat() when the host filesystem is mounted elsewhere ("/host").
  std::string host_path_prefix;
  // The netns whose unix sockets are dumped; empty = the snapshot's host netns.
  std::string netns_path;
  std::string proc_root = "/proc";
};

// Identity of the socket file (stat of the path), comparable with UnixSocket::vfs_*.
struct SocketFileId {
  uint64_t dev = 0;
  uint64_t inode = 0;
};

// Pure: picks the ZDS listener (a SEQPACKET listener bound to `file` when known, else to `path`),
// its accepted connections and their client sockets out of `sockets` (dumps of one or more netns;
// socket inodes are node-wide unique). Clients whose socket is in none of the dumps are listed by
// inode only and named in `errors`. owner_pids are left empty.
ZdsSocketState MatchZdsSockets(const std::vector<UnixSocket>& sockets, const std::string& path,
                               std::optional<SocketFileId> file);

// Fills owner_pids of every socket in `zds` and of every listener in `snapshot.netns`, sets
// process roles and returns the istio-cni and ztunnel processes with their netns fds. Pure.
std::vector<ProcessNetnsFds> AttributeOwners(const FdInventory& inventory, ZdsSocketState* zds,
                                             std::vector<NetnsSnapshot>* netns);

// Repeated collections (watch, the daemon) reuse the fd inventory of processes that did not
// change (same /proc/<pid> directory, else same pid and start time), except istio-cni and ztunnel,
// which are read every time (incrementally: new fd numbers are stat()ed, see FdInventoryCache); a
// ZDS or ztunnel-port socket that no known process owns triggers a full inventory at once, and a
// change of the node's netns set or of the ZDS connections a stat of every istio-cni and ztunnel
// fd.
class ZdsNodeSource : public NodeSource {
 public:
  // Every 60th collection (5 min at the daemon's 5 s) reads every process in full, and a
  // still-present istio-cni / ztunnel fd number is stat()ed again every 24th (2 min): backstops
  // only, since an unowned socket or a netns / connection change asks for either at once.
  explicit ZdsNodeSource(ZdsSourceOptions options)
      : options_(std::move(options)),
        inventory_(FdInventoryOptions{options_.proc_root}, /*full_every=*/60,
                   /*revalidate_every=*/24) {}
  std::string_view name() const override { return "zds"; }
  void Collect(NodeSnapshot& snapshot) override;
  const FdInventoryCache::Stats& inventory_stats() const { return inventory_.stats(); }
  // The sockets (sorted inodes) a ztunnel process held at the last collection, from the fd
  // inventory; nullptr for a pid that was not a ztunnel then.
  const std::vector<uint64_t>* ZtunnelSocketInodes(int pid) const;

 private:
  ZdsSourceOptions options_;
  FdInventoryCache inventory_;
  std::set<int> role_pids_;  // istio-cni and ztunnel processes of the last collection
  std::vector<uint64_t> last_netns_inodes_;  // sorted: the node's netns at the last collection
  std::vector<uint64_t> last_connections_;   // sorted: ZDS socket inodes (ConnectionInodes)
  std::map<int, std::vector<uint64_t>> ztunnel_sockets_;  // by pid, of the last collection
  // istio-cni's sockets by inode: whether each is AF_UNIX datagram/seqpacket ("UNIX"), learnt
  // once per socket (SocketInodesByProtocolCached), kept while istio-cni holds it.
  std::unordered_map<uint64_t, bool> cni_socket_protocols_;
};

}  // namespace ad
