// Live numbers of open traced connections from sock_diag (INET_DIAG_INFO: tcp_info), so that a
// long-lived HBONE connection shows its bytes before it closes (the tracer reports them at close;
// ztunnel reports them only at close too, ztunnel#926). Read-only, one dump per family.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "flows/flow_table.h"
#include "model/result.h"
#include "model/source_error.h"
#include "model/source_options.h"

namespace ad {

// Decodes one inet_diag dump reply (with tcp_info attributes) into the sockets that have a port of
// `ports` at either end. Pure; validates every length.
Result<std::vector<LiveSocketStats>> DecodeLiveTcpSockets(std::span<const uint8_t> bytes,
                                                          uint32_t netns_inode,
                                                          const std::vector<uint16_t>& ports);

// Open TCP sockets (every state but LISTEN, TIME_WAIT and CLOSE) with a traced port, of the netns
// at `netns_path` (a bind mount or /proc/<pid>/ns/net), read from a worker thread that enters it
// through NetnsGuard.
Result<std::vector<LiveSocketStats>> ReadLiveTcpSockets(const std::string& netns_path,
                                                        const std::vector<uint16_t>& ports);

// netns inode -> a path that enters it (the record's primary path: a bind mount before
// /proc/<pid>/ns/net), from one netns discovery (`flows` names netns with it too).
std::map<uint32_t, std::string> NetnsPathsByInode(const DiscoveryOptions& discovery,
                                                  std::vector<SourceError>* warnings);

struct LiveNetnsRead {
  std::vector<LiveSocketStats> sockets;
  std::vector<std::string> errors;  // "<path>: <why>", one per netns that could not be read
  size_t netns_read = 0;            // netns entered
};
// The live sockets of every netns of `inodes` that `paths` names (the others are skipped: a
// netns without a path cannot be entered). `after_each` (when given) runs after each netns read:
// the daemon drains the tracer's ring there, so a refresh of many netns cannot overflow it.
LiveNetnsRead ReadLiveTcpOfNetns(const std::set<uint32_t>& inodes,
                                 const std::map<uint32_t, std::string>& paths,
                                 const std::vector<uint16_t>& ports,
                                 const std::function<void()>& after_each = nullptr);

// The paths of the netns a live refresh reads, kept between refreshes: a netns discovery runs
// only when an inode asked for is not known, or its known path now names another netns (a
// stat), and an inode no discovery could name is not looked for again before `retry_after`, so
// a long-lived flow in a netns without a path costs one discovery per retry, not per refresh
// (the misses are forgotten after `retry_after`, so they stay as many as were asked for then).
class NetnsPathCache {
 public:
  explicit NetnsPathCache(DiscoveryOptions discovery,
                          std::chrono::milliseconds retry_after = std::chrono::seconds(60));
  // Paths for those of `inodes` it can name.
  std::map<uint32_t, std::string> Resolve(const std::set<uint32_t>& inodes);
  size_t discoveries() const { return discoveries_; }

 private:
  DiscoveryOptions discovery_;
  std::chrono::milliseconds retry_after_;
  std::map<uint32_t, std::string> known_;
  std::map<uint32_t, std::chrono::steady_clock::time_point> unnamed_;  // inode -> when looked for
  size_t discoveries_ = 0;
};

}  // namespace ad
