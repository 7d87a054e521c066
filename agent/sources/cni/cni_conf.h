// Read-only reader of the node's CNI config directory (/etc/cni/net.d): which file the container
// runtime uses and what it chains. Follows libcni's selection: candidates are the entries ending
// in .conf, .conflist or .json (directories skipped, symlinks followed), in byte order of their
// names; the runtime uses the first one that loads (CRI-O and the kubelet skip a file that does
// not; containerd's go-cni refuses the whole directory then, which the analysis says). Bounded:
// at most `max_candidates` names are sorted, `max_files` read, each at most `max_file_bytes`.
// The istio-cni kubeconfig is only opened and stat()ed, never read (it holds a token).
#pragma once

#include <cstddef>
#include <string>

#include "model/cni.h"

namespace ad::cni {

struct CniReadLimits {
  size_t max_files = 64;            // files read (and listed) at most
  size_t max_file_bytes = 1 << 20;  // larger files are not parsed (listed with the reason)
  size_t max_candidates = 10000;    // names considered; more is an error (order unknown)
};

// Reads `host_root + conf_dir`; the kubeconfig path found in the istio-cni plugin is a host path
// and is resolved under `host_root` too. Fills everything but the gap history.
CniConfigState ReadCniConfDir(const std::string& host_root, const std::string& conf_dir,
                              const CniReadLimits& limits = {});

// Whether `dir` (host root included) could be the runtime's CNI config directory: empty when it
// exists, can be listed and holds at least one candidate name; else why not ("does not exist",
// "could not be read: <errno text>", "holds no .conflist, .conf or .json file"). Lists names
// only, opens no file.
std::string ProbeCniConfDir(const std::string& dir);

// The "plugins" types of a conflist, or the single "type" of a .conf/.json file; the error says
// why the runtime would not load it. Pure (unit-tested on bytes).
struct CniParsedConf {
  std::string error;  // empty: loads
  std::string network_name;
  std::vector<std::string> plugin_types;
  bool istio_cni = false;
  std::string istio_kubeconfig;       // the istio-cni plugin's "kubeconfig" field
  bool istio_has_kubeconfig = false;  // the field is present (even empty)
};
CniParsedConf ParseCniConf(const std::string& file_name, std::string_view bytes,
                           size_t max_bytes = 1 << 20);

}  // namespace ad::cni
