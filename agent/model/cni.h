// Snapshot data of the node's CNI configuration (CNI_CHAIN_BROKEN) and of its nftables
// userspace (NFT_BACKEND_UNUSABLE). Plain data, filled by read-only sources; analysis judges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/source_error.h"

namespace ad {

// One candidate file of the CNI config directory (extension .conf, .conflist or .json), in the
// order the runtime considers them (byte order of the names, as libcni's ConfFiles + sort).
struct CniConfFile {
  std::string name;  // file name within the directory
  // Why the runtime cannot use it (unreadable, dangling symlink, over the size bound, malformed
  // JSON, no "type"/"plugins"); empty when it loads.
  std::string error;

  bool operator==(const CniConfFile&) const = default;
};

// A time span in which the active CNI chain lacked istio-cni, as the (long-lived) source saw it.
struct CniChainGap {
  int64_t start_unix_ms = 0;  // the broken file's mtime when it was written after the last good
                              // observation, else when the source first saw it broken
  int64_t end_unix_ms = 0;    // when a chain with istio-cni was seen again (its mtime when later
                              // than the start); 0 while the gap is open
  std::string file;           // the active file while broken (empty: no usable config at all)

  bool operator==(const CniChainGap&) const = default;
};

// A pod netns whose sandbox start is known only from its oldest process (no CRI): the pause
// process's start time.
struct NetnsStart {
  uint64_t netns_inode = 0;
  int64_t started_unix_ms = 0;
  int pid = 0;

  bool operator==(const NetnsStart&) const = default;
};

// Where the CNI config directory that was read came from.
enum class CniDirOrigin : uint8_t {
  kNone,     // none: the chain is not judged
  kFlag,     // given (--cni-conf-dir)
  kRuntime,  // the container runtime's own (CRI Status verbose)
  kDefault,  // /etc/cni/net.d, taken because it exists and is readable
};
std::string_view CniDirOriginName(CniDirOrigin origin);  // "none" "flag" "runtime" "default"

struct CniConfigState {
  bool collected = false;  // the source ran (false with --cni-conf-dir off)
  std::string dir;         // as read, host root included ("/host/etc/cni/net.d"); empty: none
  std::string host_root;   // the prefix of host paths ("" or "/host")
  CniDirOrigin dir_origin = CniDirOrigin::kNone;
  std::string runtime;      // the runtime that reported its directory ("containerd 1.6.20")
  std::string runtime_dir;  // the directory it reported (a host path), also when not used
  // Set when no directory could be judged (origin kNone): why, and what to set. The chain is then
  // not judged at all (no CNI_CHAIN_BROKEN), the rest of the state stays empty. Empty: judged.
  std::string not_judged;
  bool dir_readable = false;
  std::vector<CniConfFile> files;  // candidates in runtime order, at most the bound
  size_t files_omitted = 0;        // candidates beyond the bound (not read)
  // The file the runtime uses: the first candidate that loads. Empty when none does.
  std::string active_file;
  int64_t active_mtime_unix_ms = 0;
  std::string network_name;               // its "name"
  std::vector<std::string> plugin_types;  // its plugins' "type", in chain order
  bool istio_cni_chained = false;         // a plugin of "type": "istio-cni"
  // The istio-cni plugin's "kubeconfig" (a host path) and whether it is a readable file; the
  // error says why not (empty: readable, or no istio-cni plugin / no kubeconfig field).
  std::string kubeconfig_path;
  std::string kubeconfig_error;
  // Gaps since the source started (oldest first, bounded); the last may be open. A one-shot scan
  // has at most the open gap, started at its own scan: it cannot know when the chain broke.
  std::vector<CniChainGap> gaps;
  size_t gaps_dropped = 0;
  std::vector<NetnsStart> netns_starts;  // only while gaps exist and only for netns without CRI
  std::vector<SourceError> errors;       // the directory itself could not be read

  bool operator==(const CniConfigState&) const = default;
};

// The node's nftables userspace, judged read-only (no host binary is executed under a host root).
struct NftUserspaceState {
  bool collected = false;
  std::string binary;          // the nft binary found ("/usr/sbin/nft"), empty when none
  std::string version;         // "1.0.6" from the package database or the binary, empty unknown
  std::string version_source;  // "dpkg" | "binary" | ""
  std::optional<bool> json_support;  // libnftables links libjansson / the probe printed JSON
  std::string json_evidence;         // how json_support was decided
  bool probe_ran = false;            // `nft -j list ruleset` in a throwaway netns
  std::string probe_result;          // "ok" or why it failed (exit status, stderr, timeout)
  std::vector<SourceError> errors;

  bool operator==(const NftUserspaceState&) const = default;
};

}  // namespace ad
