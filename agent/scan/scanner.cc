#include "scan/scanner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "sources/netns/discovery.h"
#include "sources/netns/netns_workers.h"

namespace ad {
namespace {

// The previous snapshot's netns by inode.
std::map<uint64_t, NetnsSnapshot*> ByInode(NodeSnapshot& snapshot) {
  std::map<uint64_t, NetnsSnapshot*> by_inode;
  for (NetnsSnapshot& netns : snapshot.netns) by_inode.emplace(netns.netns.inode, &netns);
  return by_inode;
}

}  // namespace

std::string ResolveNodeName(const std::string& configured) {
  if (!configured.empty()) {
    return configured;
  }
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr && env[0] != '\0') {
    return env;
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) {
    return host;
  }
  return "unknown";
}

void CarryListenerOwners(const NetnsSnapshot& before, NetnsSnapshot& now) {
  std::map<uint64_t, const std::vector<int>*> owners;
  for (const ListeningSocket& listener : before.listeners) {
    if (!listener.owner_pids.empty()) owners.emplace(listener.inode, &listener.owner_pids);
  }
  for (ListeningSocket& listener : now.listeners) {
    if (auto it = owners.find(listener.inode); it != owners.end() && listener.owner_pids.empty()) {
      listener.owner_pids = *it->second;
    }
  }
}

void NetnsInspector::RefreshListeners(NetnsSnapshot& snapshot) {
  NetnsSnapshot fresh = Inspect(snapshot.netns);
  std::erase_if(snapshot.errors,
                [](const SourceError& error) { return error.kind == kListenerErrorKind; });
  for (SourceError& error : fresh.errors) {
    if (error.kind == kListenerErrorKind) snapshot.errors.push_back(std::move(error));
  }
  snapshot.listeners = std::move(fresh.listeners);
  snapshot.reads.listeners = fresh.reads.listeners;
}

NodeSnapshot ScanNode(const ScanOptions& options, NetnsInspector& inspector,
                      const ScanReuse* reuse) {
  const auto started = std::chrono::steady_clock::now();
  NodeSnapshot node;
  node.node_name = ResolveNodeName(options.node_name);
  node.taken_at_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();

  std::vector<NetnsRecord> records =
      DiscoverNetns(options.discovery, &node.errors, reuse != nullptr ? reuse->discovery : nullptr);
  node.netns.resize(records.size());

  // Indexes of the records to read; the others are taken over from the previous snapshot, some
  // of them with their listeners read again.
  std::vector<size_t> to_read;
  std::vector<size_t> to_relisten;
  const std::map<uint64_t, NetnsSnapshot*> previous = reuse != nullptr && reuse->previous != nullptr
                                                          ? ByInode(*reuse->previous)
                                                          : std::map<uint64_t, NetnsSnapshot*>{};
  for (size_t i = 0; i < records.size(); ++i) {
    auto known = previous.find(records[i].inode);
    if (reuse == nullptr || known == previous.end() ||
        reuse->reinspect.contains(records[i].inode)) {
      to_read.push_back(i);
      continue;
    }
    node.netns[i] = std::move(*known->second);
    node.netns[i].netns = records[i];
    if (reuse->relisten_all || reuse->relisten.contains(records[i].inode)) {
      to_relisten.push_back(i);
    }
  }

  // Each worker owns its thread's netns switches; results land at the discovery index so the
  // output order does not depend on scheduling.
  std::atomic<size_t> next{0};
  const size_t jobs = to_read.size() + to_relisten.size();
  auto work = [&] {
    for (size_t k = next.fetch_add(1); k < jobs; k = next.fetch_add(1)) {
      if (k < to_read.size()) {
        const size_t i = to_read[k];
        node.netns[i] = inspector.Inspect(records[i]);
      } else {
        // Owners of sockets still there carry over until node sources attribute them again.
        NetnsSnapshot& netns = node.netns[to_relisten[k - to_read.size()]];
        NetnsSnapshot before;
        before.listeners = netns.listeners;
        inspector.RefreshListeners(netns);
        CarryListenerOwners(before, netns);
      }
    }
  };
  const size_t workers = std::min(jobs, static_cast<size_t>(std::max(1, options.workers)));
  NetnsWorkers::Shared().RunOnEach(workers, work);

  if (reuse != nullptr && !reuse->node_sources && reuse->previous != nullptr) {
    NodeSnapshot& before = *reuse->previous;
    node.zds_collected = before.zds_collected;
    node.zds = std::move(before.zds);
    node.processes = std::move(before.processes);
    node.ztunnels = std::move(before.ztunnels);
    node.cri = std::move(before.cri);
    node.probe_conntrack = std::move(before.probe_conntrack);
    node.ztunnel_resources = std::move(before.ztunnel_resources);
    node.cni = std::move(before.cni);
    node.nft_userspace = std::move(before.nft_userspace);
    for (size_t i : to_read) {
      if (auto known = previous.find(records[i].inode); known != previous.end()) {
        CarryListenerOwners(*known->second, node.netns[i]);
      }
    }
  } else {
    for (const auto& source : options.node_sources) {
      if (source) source->Collect(node);
    }
  }

  node.scan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return node;
}

}  // namespace ad
