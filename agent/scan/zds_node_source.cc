#include "scan/zds_node_source.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "model/istio_facts.h"
#include "model/result.h"
#include "sources/netns/netns_guard.h"
#include "sources/netns/netns_workers.h"
#include "sources/sockdiag/unix_diag.h"

namespace ad {
namespace {

constexpr SourceKind kSource = SourceKind::kZds;

bool SameFile(const UnixSocket& socket, const SocketFileId& file) {
  // unix_diag reports the inode as 32 bits.
  return socket.vfs_inode != 0 && socket.vfs_dev == file.dev &&
         socket.vfs_inode == (file.inode & 0xffffffffu);
}

bool IsSeqpacket(const UnixSocket& socket) { return socket.type == SOCK_SEQPACKET; }

// Unix socket dumps of several netns, run on one dedicated thread that enters each netns through
// a NetnsGuard (restored before the next). An accepted unix socket belongs to the netns of the
// *client* that connected (the kernel creates it with the client's netns), so istio-cni's side of
// ztunnel's connection sits in ztunnel's pod netns, not next to the listener.
class UnixSocketSweep {
 public:
  // False when `netns_path` was dumped before (same netns inode) or could not be dumped.
  bool Dump(const std::string& netns_path) {
    struct stat ns {};
    if (::stat(netns_path.c_str(), &ns) != 0) {
      if (errno != ENOENT && errno != ESRCH)
        NoteFailure(ErrnoError(kSource, "stat(" + netns_path + ")"));
      return false;  // a process that exited took its netns link with it
    }
    if (!dumped_netns_.insert(ns.st_ino).second) return false;
    auto guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) {
      if (guard.error().error_number != ENOENT) NoteFailure(guard.error());
      return false;
    }
    auto dump = DumpUnixSockets();
    if (!dump.ok()) {
      SourceError error = dump.error();
      error.message = "in " + netns_path + ": " + error.message;
      NoteFailure(std::move(error));
      return false;
    }
    for (UnixSocket& socket : *dump) {
      if (!located_.insert(socket.inode).second) continue;
      if (IsSeqpacket(socket)) sockets_.push_back(std::move(socket));
    }
    return true;
  }

  const std::vector<UnixSocket>& sockets() const { return sockets_; }
  bool Located(uint64_t inode) const { return located_.contains(inode); }

  // The first failure in full, the others summarised.
  void AppendErrors(std::vector<SourceError>* errors) const {
    if (failures_ == 0) return;
    SourceError error = first_failure_;
    if (failures_ > 1) {
      error.message += " (and " + std::to_string(failures_ - 1) + " more netns)";
    }
    errors->push_back(std::move(error));
  }

 private:
  void NoteFailure(SourceError error) {
    if (failures_++ == 0) first_failure_ = std::move(error);
  }

  std::vector<UnixSocket> sockets_;  // SEQPACKET only: all the ZDS matcher looks at
  std::unordered_set<uint64_t> located_;
  std::unordered_set<uint64_t> dumped_netns_;
  int failures_ = 0;
  SourceError first_failure_;
};

void SortUnique(std::vector<int>* pids) {
  std::sort(pids->begin(), pids->end());
  pids->erase(std::unique(pids->begin(), pids->end()), pids->end());
}

}  // namespace

ZdsSocketState MatchZdsSockets(const std::vector<UnixSocket>& sockets, const std::string& path,
                               std::optional<SocketFileId> file) {
  ZdsSocketState zds;
  zds.path = path;
  const UnixSocket* by_file = nullptr;
  const UnixSocket* by_name = nullptr;
  for (const UnixSocket& socket : sockets) {
    if (!IsSeqpacket(socket) || socket.state != kUnixStateListen) continue;
    if (file && SameFile(socket, *file) && by_file == nullptr) by_file = &socket;
    if (socket.path == path && by_name == nullptr) by_name = &socket;
  }
  const UnixSocket* listener = by_file != nullptr ? by_file : by_name;
  if (listener == nullptr) return zds;
  if (by_file == nullptr && file) {
    // The path now names another file: the listener's own file was unlinked or replaced.
    zds.errors.push_back(SourceError{kSource,
                                     "listener bound to " + path + " has file inode " +
                                         std::to_string(listener->vfs_inode) +
                                         " but the path now has inode " +
                                         std::to_string(file->inode) + " (socket file replaced?)",
                                     0});
  }
  zds.listener_found = true;
  zds.listener = *listener;

  std::unordered_map<uint64_t, const UnixSocket*> by_inode;
  for (const UnixSocket& socket : sockets) by_inode.emplace(socket.inode, &socket);
  // Accepted sockets inherit the listener's name and file.
  const bool match_by_file = listener->vfs_inode != 0;
  for (const UnixSocket& socket : sockets) {
    if (!IsSeqpacket(socket) || socket.state == kUnixStateListen || socket.inode == 0) continue;
    const bool same = match_by_file ? (socket.vfs_inode == listener->vfs_inode &&
                                       socket.vfs_dev == listener->vfs_dev)
                                    : socket.path == listener->path;
    if (same) zds.accepted.push_back(socket);
  }

  std::set<uint64_t> listed;
  auto add_client = [&](uint64_t inode, uint64_t expected_peer) {
    if (inode == 0 || !listed.insert(inode).second) return;
    if (auto it = by_inode.find(inode); it != by_inode.end()) {
      zds.clients.push_back(*it->second);
      return;
    }
    UnixSocket unknown;  // known only from the other end: queues unknown
    unknown.inode = inode;
    unknown.type = SOCK_SEQPACKET;
    unknown.peer_inode = expected_peer;
    zds.clients.push_back(std::move(unknown));
    zds.errors.push_back(SourceError{kSource,
                                     "client socket " + std::to_string(inode) +
                                         " not found in any dumped netns (queues unknown)",
                                     ENOENT});
  };
  for (const UnixSocket& accepted : zds.accepted) add_client(accepted.peer_inode, accepted.inode);
  // Connections still waiting in the backlog: their server side has no inode until accept().
  for (uint64_t pending : zds.listener.pending_client_inodes) add_client(pending, 0);
  return zds;
}

std::vector<ProcessNetnsFds> AttributeOwners(const FdInventory& inventory, ZdsSocketState* zds,
                                             std::vector<NetnsSnapshot>* netns) {
  std::set<int> cni_pids;
  std::set<int> ztunnel_pids;
  auto owners = [&inventory](UnixSocket& socket, std::set<int>* role_pids) {
    const std::span<const int> pids = inventory.SocketOwners(socket.inode);
    socket.owner_pids.assign(pids.begin(), pids.end());
    role_pids->insert(socket.owner_pids.begin(), socket.owner_pids.end());
  };
  if (zds->listener_found) owners(zds->listener, &cni_pids);
  for (UnixSocket& socket : zds->accepted) owners(socket, &cni_pids);
  for (UnixSocket& socket : zds->clients) owners(socket, &ztunnel_pids);
  // Without sockets to go by (no listener, no connection), fall back to the process name.
  if (cni_pids.empty() || ztunnel_pids.empty()) {
    const bool want_cni = cni_pids.empty();
    const bool want_ztunnel = ztunnel_pids.empty();
    for (const ProcessFds& process : inventory.processes) {
      if (want_cni && (process.comm == "istio-cni" || process.comm == "install-cni")) {
        cni_pids.insert(process.pid);
      }
      if (want_ztunnel && process.comm == "ztunnel") ztunnel_pids.insert(process.pid);
    }
  }

  std::vector<ProcessNetnsFds> processes;
  auto add = [&](int pid, ProcessRole role) {
    ProcessNetnsFds entry;
    entry.pid = pid;
    entry.role = role;
    if (const ProcessFds* process = inventory.Find(pid)) {
      entry.comm = process->comm;
      entry.own_netns_inode = process->own_netns_inode;
      entry.netns_fd_inodes = process->netns_fd_inodes;
      entry.start_time_unix_ms = process->start_time_unix_ms;
    }
    processes.push_back(std::move(entry));
  };
  for (int pid : cni_pids) add(pid, ProcessRole::kIstioCni);
  for (int pid : ztunnel_pids) {
    if (!cni_pids.contains(pid)) add(pid, ProcessRole::kZtunnel);  // one role per process
  }
  std::sort(processes.begin(), processes.end(),
            [](const ProcessNetnsFds& a, const ProcessNetnsFds& b) { return a.pid < b.pid; });

  for (NetnsSnapshot& snapshot : *netns) {
    for (ListeningSocket& listener : snapshot.listeners) {
      const std::span<const int> pids = inventory.SocketOwners(listener.inode);
      listener.owner_pids.assign(pids.begin(), pids.end());
      SortUnique(&listener.owner_pids);
    }
  }
  return processes;
}

namespace {

// Where the sockets still missing may live, most likely first: the netns of the processes that
// hold missing client sockets, of processes named ztunnel, then every other netns on the node.
std::vector<std::string> CandidateNetns(const FdInventory& inventory,
                                        const std::vector<uint64_t>& missing_clients,
                                        const std::vector<NetnsSnapshot>& netns,
                                        const std::string& proc_root) {
  std::vector<std::string> paths;
  auto netns_of = [&proc_root](int pid) {
    return proc_root + "/" + std::to_string(pid) + "/ns/net";
  };
  for (uint64_t client : missing_clients) {
    for (int pid : inventory.SocketOwners(client)) paths.push_back(netns_of(pid));
  }
  for (const ProcessFds& process : inventory.processes) {
    if (process.comm == "ztunnel") paths.push_back(netns_of(process.pid));
  }
  std::unordered_set<uint64_t> seen;
  for (const ProcessFds& process : inventory.processes) {
    if (process.own_netns_inode != 0 && seen.insert(process.own_netns_inode).second) {
      paths.push_back(netns_of(process.pid));
    }
  }
  for (const NetnsSnapshot& snapshot : netns) {
    if (!seen.contains(snapshot.netns.inode) && !snapshot.netns.PrimaryPath().empty()) {
      paths.push_back(snapshot.netns.PrimaryPath());
    }
  }
  return paths;  // duplicates are cheap: the sweep skips a netns it has dumped
}

}  // namespace

namespace {

bool IsIstioProcessName(const std::string& comm) {
  return comm == "istio-cni" || comm == "install-cni" || comm == "ztunnel";
}

// A socket the inventory should know the owner of but does not: the ZDS listener and the client
// ends of its connections, and ztunnel-port listeners in any netns.
bool HasUnownedSocket(const FdInventory& inventory, const ZdsSocketState& zds,
                      const std::vector<NetnsSnapshot>& netns) {
  if (zds.listener_found && inventory.SocketOwners(zds.listener.inode).empty()) return true;
  for (const UnixSocket& client : zds.clients) {
    if (client.inode != 0 && inventory.SocketOwners(client.inode).empty()) return true;
  }
  for (const NetnsSnapshot& snapshot : netns) {
    for (const ListeningSocket& listener : snapshot.listeners) {
      if (istio::IsZtunnelInpodPort(listener.port) &&
          inventory.SocketOwners(listener.inode).empty())
        return true;
    }
  }
  return false;
}

// The ZDS connections by socket inode: a new or gone connection (a ztunnel restart, a second
// client) means processes opened or closed fds.
std::vector<uint64_t> ConnectionInodes(const ZdsSocketState& zds) {
  std::vector<uint64_t> inodes;
  if (zds.listener_found) inodes.push_back(zds.listener.inode);
  for (const UnixSocket& socket : zds.accepted) inodes.push_back(socket.inode);
  for (const UnixSocket& socket : zds.clients) inodes.push_back(socket.inode);
  for (uint64_t pending : zds.listener.pending_client_inodes) inodes.push_back(pending);
  std::sort(inodes.begin(), inodes.end());
  return inodes;
}

}  // namespace

const std::vector<uint64_t>* ZdsNodeSource::ZtunnelSocketInodes(int pid) const {
  const auto it = ztunnel_sockets_.find(pid);
  return it == ztunnel_sockets_.end() ? nullptr : &it->second;
}

void ZdsNodeSource::Collect(NodeSnapshot& snapshot) {
  std::vector<SourceError> errors;
  const auto reread = [this](const ProcessFds& cached) {
    return role_pids_.contains(cached.pid) || IsIstioProcessName(cached.comm);
  };
  // A pod netns that came or went is a hand-off or a removal: ztunnel and istio-cni fds that kept
  // their numbers may now hold another netns, so every fd of theirs is stat()ed again.
  std::vector<uint64_t> netns_inodes;
  netns_inodes.reserve(snapshot.netns.size());
  for (const NetnsSnapshot& netns : snapshot.netns) netns_inodes.push_back(netns.netns.inode);
  std::sort(netns_inodes.begin(), netns_inodes.end());
  if (netns_inodes != last_netns_inodes_) inventory_.RequestDeep();
  last_netns_inodes_ = std::move(netns_inodes);
  FdInventory inventory = inventory_.Take(reread);
  bool deep_take = inventory_.last_take_deep();

  std::optional<SocketFileId> file;
  const std::string file_path = options_.host_path_prefix + options_.socket_path;
  struct stat st {};
  if (::stat(file_path.c_str(), &st) == 0) {
    file = SocketFileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  } else if (errno != ENOENT) {  // a missing file is a state (no istio-cni), not a read failure
    errors.push_back(ErrnoError(kSource, "stat(" + file_path + ")"));
  }

  std::string netns_path = options_.netns_path;
  if (netns_path.empty() && snapshot.Host() != nullptr) {
    netns_path = snapshot.Host()->netns.PrimaryPath();
  }
  if (netns_path.empty()) {
    netns_path = "/proc/self/ns/net";
    errors.push_back(SourceError{
        kSource, "no host netns in the snapshot; dumped unix sockets in the agent's own netns", 0});
  }

  ZdsSocketState zds;
  UnixSocketSweep sweep;
  NetnsWorkers::Shared().Run([&] {
    sweep.Dump(netns_path);
    zds = MatchZdsSockets(sweep.sockets(), options_.socket_path, file);
    if (!zds.listener_found) return;  // nothing to follow: stays one dump
    // Sockets still to locate: istio-cni's AF_UNIX datagram/seqpacket sockets (its side of every
    // ZDS connection) and clients known only by inode. With istio-cni unknown (its fds hidden from
    // this proc root) completeness cannot be judged: every candidate netns is dumped.
    const std::span<const int> cni_pids = inventory.SocketOwners(zds.listener.inode);
    const bool sweep_all = cni_pids.empty();
    std::vector<uint64_t> wanted;
    std::unordered_map<uint64_t, bool> protocols;  // kept: the sockets istio-cni still holds
    for (int pid : cni_pids) {
      const ProcessFds* process = inventory.Find(pid);
      const std::vector<uint64_t> none;
      const std::vector<uint64_t>& held = process != nullptr ? process->socket_inodes : none;
      for (uint64_t inode : SocketInodesByProtocolCached(options_.proc_root, pid, "UNIX", held,
                                                         cni_socket_protocols_)) {
        wanted.push_back(inode);
      }
      for (uint64_t inode : held) {
        if (auto it = cni_socket_protocols_.find(inode); it != cni_socket_protocols_.end()) {
          protocols.insert(*it);
        }
      }
    }
    cni_socket_protocols_ = std::move(protocols);
    std::vector<uint64_t> missing_clients;
    for (const UnixSocket& client : zds.clients) {
      if (!sweep.Located(client.inode)) missing_clients.push_back(client.inode);
    }
    wanted.insert(wanted.end(), missing_clients.begin(), missing_clients.end());
    auto all_located = [&] {
      return !sweep_all && std::all_of(wanted.begin(), wanted.end(),
                                       [&](uint64_t inode) { return sweep.Located(inode); });
    };
    bool dumped_more = false;
    for (const std::string& candidate :
         CandidateNetns(inventory, missing_clients, snapshot.netns, options_.proc_root)) {
      if (all_located()) break;
      dumped_more |= sweep.Dump(candidate);
    }
    if (dumped_more) zds = MatchZdsSockets(sweep.sockets(), options_.socket_path, file);
  });
  sweep.AppendErrors(&errors);

  std::vector<uint64_t> connections = ConnectionInodes(zds);
  if (!inventory_.last_take_full() && HasUnownedSocket(inventory, zds, snapshot.netns)) {
    inventory_.RequestFull();  // a process we reused opened it (or a new client appeared)
    inventory = inventory_.Take(reread);
  } else if (!deep_take && connections != last_connections_) {
    inventory_.RequestDeep();
    inventory = inventory_.Take(reread);
  }
  last_connections_ = std::move(connections);
  errors.insert(errors.begin(), inventory.warnings.begin(), inventory.warnings.end());
  snapshot.processes = AttributeOwners(inventory, &zds, &snapshot.netns);
  role_pids_.clear();
  ztunnel_sockets_.clear();
  for (const ProcessNetnsFds& process : snapshot.processes) {
    role_pids_.insert(process.pid);
    if (process.role != ProcessRole::kZtunnel) continue;
    if (const ProcessFds* fds = inventory.Find(process.pid)) {
      ztunnel_sockets_[process.pid] = fds->socket_inodes;
    }
  }
  zds.errors.insert(zds.errors.begin(), errors.begin(), errors.end());
  snapshot.zds = std::move(zds);
  snapshot.zds_collected = true;
}

}  // namespace ad
