// Pure parsing of the runtime-wide verbose status (StatusResponse.info, CRI Status with
// verbose=true): where the runtime reads its CNI config and which networks it loaded. containerd
// (1.6 to 2.x) fills "config" (its CRI config as JSON: cni.confDir), "cniconfig" (go-cni's
// ConfigResult, Go field names: PluginConfDir, Networks[].Config.Name, Networks[].IFName) and
// "lastCNILoadStatus" ("OK" or the load error). CRI-O's verbose Status has no CNI directories;
// its own HTTP endpoint on the same socket gives its configuration.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"

namespace ad::cri {

struct RuntimeCniConfig {
  // The runtime's CNI config directory, a host path ("/etc/cni/net.d"); empty when not reported.
  std::string conf_dir;
  std::string conf_dir_key;  // where it was found: "config.cni.confDir" | "cniconfig.PluginConfDir"
  // Networks the runtime loaded, in its order, without its own loopback ("cni-loopback"); the
  // pod network is the one attached as eth0 (`pod_network`).
  std::vector<std::string> networks;
  std::string pod_network;
  std::string last_load_status;  // "OK" or the runtime's error text; empty when not reported
};

// Largest document accepted per key (containerd's config is a few KiB; cniconfig embeds every
// loaded conflist's source text).
inline constexpr size_t kMaxRuntimeStatusBytes = 1 << 20;
// Longest directory path accepted (PATH_MAX).
inline constexpr size_t kMaxConfDirBytes = 4096;
// Largest CRI-O configuration accepted (`crio config` prints about 60 KiB).
inline constexpr size_t kMaxCrioConfigBytes = 1 << 20;
// Longest load status kept (longer ones are cut and end in "...").
inline constexpr size_t kMaxLoadStatusBytes = 1024;

// `config_json` and `cniconfig_json` are the values of info["config"] and info["cniconfig"]
// (either may be empty: absent), `load_status` that of info["lastCNILoadStatus"]. The directory
// comes from config.cni.confDir, else from cniconfig.PluginConfDir; a value that is not an
// absolute path (or is over the bound, or holds a NUL) is not taken. Errors only when a present
// document is malformed and the other gave no directory.
Result<RuntimeCniConfig> ParseRuntimeCniConfig(std::string_view config_json,
                                               std::string_view cniconfig_json,
                                               std::string_view load_status);

// CRI-O's configuration as `GET /config` on its socket returns it (`crio status config`: TOML
// laid out as `crio config` prints it): the value of network_dir in the [crio.network] table,
// trailing slashes removed. Empty when absent. Read by hand, not with a TOML library: one key of
// a machine-written file (a table header is a line that starts with '['; basic strings without
// escapes and literal strings are accepted, anything else is an error).
Result<std::string> ParseCrioNetworkDir(std::string_view toml);

}  // namespace ad::cri
