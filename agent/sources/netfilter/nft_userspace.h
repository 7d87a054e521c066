// The node's nftables userspace, read-only (NFT_BACKEND_UNUSABLE): where nft is, its version from
// the package database, whether its libnftables was built with JSON (a libjansson dependency in
// the library's dynamic section), and, when that library is not found (a static or unusual
// build), a probe: `nft -j list ruleset` in a throwaway netns.
//
// The probe executes the host's binary, so it runs only when the agent runs on the node itself
// (host root "" or "/"): there the binary is the node's own tooling, resolved with the node's
// libraries, as the tests run it. Under another host root (the agent in a pod with the node's / at
// /host) it does not run: executing a file from the host's filesystem with the agent's privileges
// would let whoever controls that file run code as the agent, and it would need a chroot to
// resolve its libraries; the static checks answer there. The probe's child unshares a new netns
// before exec (so nft sees an empty ruleset and can touch nothing real; the netns dies with the
// child), has no stdin, bounded output, and is killed (SIGKILL) after the timeout.
#pragma once

#include <chrono>
#include <string>

#include "model/cni.h"

namespace ad::nft {

struct NftUserspaceOptions {
  std::string host_root;
  std::chrono::milliseconds probe_timeout{2000};
  bool allow_probe = true;  // also needs host_root "" or "/"
  // Read the version from the package database even when JSON support is known: a table records
  // the nft that created it (NFT_BACKEND_UNUSABLE compares the two).
  bool read_version = false;
  // Tests: probe this executable instead of the nft found (still in a throwaway netns).
  std::string probe_binary;
};

NftUserspaceState ReadNftUserspace(const NftUserspaceOptions& options);

// "1.0.6" out of dpkg's status file for `package` ("Version: 1.0.6-2+deb12u2"); empty when the
// package is not installed there. Pure.
std::string DpkgUpstreamVersion(std::string_view status_file, std::string_view package);

// What `nft -j list ruleset` printing `out` (stdout), `err` and exiting `status` means: "ok"
// (JSON support) or the reason; `json` is set when the output decides JSON support. Pure.
std::string JudgeProbe(int exit_status, std::string_view out, std::string_view err,
                       std::optional<bool>& json);

}  // namespace ad::nft
