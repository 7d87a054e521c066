// What `flows` prints, as data, and its renderings: the table, the JSON document
// (ambient-doctor.flows/v1) and the one line per followed flow event.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "flows/flow_table.h"

namespace ad::cli {

// What `flows` prints, as data (rendered by the functions below; tested without a tracer).
struct FlowsReport {
  std::string attach_mode;  // "tp_btf" ...
  std::vector<uint16_t> ports;
  int64_t duration_ms = 0;
  uint64_t events = 0;
  uint64_t lost_events = 0;
  uint64_t state_full = 0;
  uint64_t late_flows = 0;
  uint64_t decode_errors = 0;
  std::vector<std::string> errors;              // live refresh failures, per netns
  std::map<uint32_t, std::string> netns_paths;  // inode -> a path, when discovery found it
  std::map<uint32_t, std::string> pods;         // inode -> "namespace/name" (from the daemon)
  FlowTableView view;                           // already filtered
};

std::string RenderFlowsJson(const FlowsReport& report);
std::string RenderFlowsTable(const FlowsReport& report);

// One --follow line (with its newline): `event` ("current", "open", "close", "update") and the
// flow's table row, or with `json` one {"event", "flow"} object.
std::string FollowLine(std::string_view event, const Flow& flow, const FlowsReport& names,
                       bool json);

// "10.0.0.1:15008", "[fd00::1]:15008".
std::string Endpoint(const FlowAddress& address, uint16_t port);

}  // namespace ad::cli
