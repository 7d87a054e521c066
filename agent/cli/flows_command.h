// `ambient-doctor flows`: traces HBONE connections with the eBPF tracer for a while and prints the
// open and recently closed flows (table or JSON).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "flows/flow_table.h"

namespace ad::cli {

int RunFlows(const std::vector<std::string>& args);

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

}  // namespace ad::cli
