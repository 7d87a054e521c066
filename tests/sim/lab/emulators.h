// Long-running lab processes (the ZDS emulators): started detached inside a netns, tracked by pid
// files, stopped by pid after checking the process is still the one we started.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/result.h"

namespace ad::lab {

struct DaemonSpec {
  std::vector<std::string> argv;  // argv[0]: an absolute path
  std::string netns_path;         // entered by the child before exec; empty: caller's netns
  std::string log_path;           // stdout + stderr (appended)
};

// fork, setsid, fork again (the daemon is reparented, never our zombie), setns, exec. Returns the
// daemon's pid once exec succeeded; an exec or setns failure is an error.
Result<int> SpawnDaemon(const DaemonSpec& spec);

// True while `pid` exists, is not a zombie and its comm is `comm`.
bool DaemonRunning(int pid, const std::string& comm);

// SIGTERM, wait up to `grace_ms`, then SIGKILL. Does nothing unless DaemonRunning(pid, comm).
void StopDaemon(int pid, const std::string& comm, int grace_ms = 3000);

// The emulator executables: $AD_SIM_BIN_DIR, next to the running program, or the build tree.
std::string SimBinaryPath(const std::string& name);

// "key value" lines (cni-sim's stats file); missing file -> empty map.
std::map<std::string, uint64_t> ReadStatsFile(const std::string& path);

struct HttpReply {
  int status = 0;
  std::string body;
};

// GET http://<address>:<port><path> from inside a netns (a throwaway thread does the setns).
Result<HttpReply> HttpGetInNetns(const std::string& netns_path, const std::string& address,
                                 uint16_t port, const std::string& path, int timeout_ms = 3000);

}  // namespace ad::lab
