// Live numbers of open traced connections from sock_diag (INET_DIAG_INFO: tcp_info), so that a
// long-lived HBONE connection shows its bytes before it closes (the tracer reports them at close;
// ztunnel reports them only at close too, ztunnel#926). Read-only, one dump per family.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "flows/flow_table.h"
#include "model/result.h"

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

}  // namespace ad
