// Parsers for rule text: iptables-save / iptables-restore input (incl. Istio goldens) and nft
// scripts ("add table/chain/rule" transactions as written by Istio's knftables builder). They
// produce the same normalized Tables as the kernel readers, so goldens and fixtures can be
// analysed without root. Offline only: nothing here touches the kernel.
#pragma once

#include <string_view>
#include <vector>

#include "model/result.h"
#include "model/rule.h"

namespace ad {

// iptables-save output or restore input ("*table"/"* table", ":CHAIN POLICY [..]", "-N", "-A",
// "-I [n]", "COMMIT"; leading command-log lines such as "iptables-save" are skipped).
Result<std::vector<Table>> ParseIptablesText(std::string_view text, Backend backend, Family family);

// One rule spec without the "-A CHAIN" prefix, e.g. "-p tcp -m mark --mark 0x539/0xfff -j ACCEPT".
Result<Rule> ParseIptablesRuleSpec(std::string_view spec, Family family);

// nft script: "add|flush table", "add chain ... { type .. hook .. priority ..; }", "add rule",
// "add set", "add element"; also accepts the block syntax printed by "nft list ruleset".
Result<std::vector<Table>> ParseNftText(std::string_view text);

// One nft rule statement list, e.g. "meta l4proto tcp ip saddr 1.2.3.4 counter accept".
Result<Rule> ParseNftRuleText(std::string_view text, Family table_family);

// Writes tables back as restore input / nft script that the real tools accept (used by the lab
// and by fixtures).
std::string RenderIptablesRestore(const std::vector<Table>& tables);
std::string RenderNftScript(const std::vector<Table>& tables);

}  // namespace ad
