// Normalized netfilter rules: one comparable representation for iptables-legacy, iptables-nft
// and native nftables, so analysis compares what the kernel does, not how a tool printed it.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ad {

enum class Backend : uint8_t {
  kIptablesLegacy,  // x_tables, read with IPT_SO_GET_ENTRIES
  kIptablesNft,  // nf_tables tables written by iptables-nft (ip/ip6 filter/nat/mangle/raw/security)
  kNft,          // native nf_tables (e.g. inet istio-ambient-*)
};

enum class Family : uint8_t {
  kIpv4,
  kIpv6,
  kInet,   // nft inet table: one rule set for both families
  kOther,  // arp, bridge, netdev: read but never Istio's
};

std::string_view BackendName(Backend b);      // "iptables-legacy", "iptables-nft", "nft"
std::string_view FamilyName(Family f);        // "ipv4", "ipv6", "inet", "other"
std::string_view NftFamilyKeyword(Family f);  // "ip", "ip6", "inet", "" (as nft spells tables)

// One match condition. Only the fields named for each kind are meaningful; the rest stay zero so
// that defaulted comparison is semantic equality.
enum class MatchKind : uint8_t {
  kProtocol,      // value = IP protocol number (6 tcp, 17 udp)
  kSrcAddr,       // text = canonical prefix "169.254.7.127/32", "::1/128"
  kDstAddr,       // text = canonical prefix
  kSrcPort,       // value = first port, value2 = last port (== value for one port)
  kDstPort,       // value, value2 as kSrcPort
  kInIface,       // text = interface name ("eth+" for an iptables wildcard / nft prefix)
  kOutIface,      // text = interface name
  kMark,          // value = mark, value2 = mask: (skb->mark & mask) == value
  kConnmark,      // value = mark, value2 = mask: (ct->mark & mask) == value
  kSet,           // text = "<set> <key>", elements: see "Set lookups" below
  kSocketExists,  // -m owner --socket-exists
  kSocketUid,     // value = uid (owner --uid-owner / nft skuid)
  kSocketGid,     // value = gid
  kCtState,       // value = bitmask of nf conntrack states (ESTABLISHED=2, RELATED=4, NEW=8 ...)
  kAddrType,      // text = "src LOCAL" / "dst LOCAL" ...
  kUnknown,       // text = description of an expression or xt match we do not decode
};

// Set lookups (MatchKind::kSet, ActionKind::kVerdictMap) carry text = "<set> <key>":
//  <set>  the ipset or nft set/map name, or kInlineSet for an nft anonymous set, whose elements
//         are then in `elements` (sorted, as nft prints them: "10.0.0.0/8", "\"eth0\"",
//         "10.0.0.1 . tcp . 80", "22 : accept"). Anonymous set names (__set0) differ between
//         tables and reads, so inlining the elements makes equal rules compare equal.
//  <key>  what is looked up: '.'-joined fields (a concatenation), each one of
//         src dst (address; its family comes from the set), sport dport, l4proto nfproto,
//         iif oif iifname oifname, mark ctmark, skuid skgid, numgen-<random|inc>-mod-<n>[-<off>];
//         ipset matches keep ipset's own "src,dst" dimension list.
inline constexpr std::string_view kInlineSet = "{}";

struct Match {
  MatchKind kind = MatchKind::kUnknown;
  bool negated = false;
  uint32_t value = 0;
  uint32_t value2 = 0;
  std::string text;
  std::vector<std::string> elements;  // kSet on an anonymous nft set only

  auto operator<=>(const Match&) const = default;
};

// What a rule does once all matches hold.
enum class ActionKind : uint8_t {
  kContinue,  // no verdict (counter-only rule): evaluation goes on
  kAccept,
  kDrop,
  kReject,
  kReturn,
  kJump,      // text = target chain
  kGoto,      // text = target chain
  kRedirect,  // value = first port, value2 = last port (0 = no port change)
  kDnat,      // text = address[:port]
  kSnat,      // text = address[:port]
  kMasquerade,
  kTproxy,           // value = port, value2 = mark, value3 = mask
  kSetMark,          // skb->mark = (mark & ~value2) ^ value   (MARK --set-xmark value/value2)
  kSetConnmark,      // ct->mark = (ct->mark & ~value2) ^ value (CONNMARK --set-xmark value/value2)
  kRestoreConnmark,  // skb->mark = (mark & ~value) | (ct->mark & value2): value = nfmask, value2 =
                     // ctmask
  kSaveConnmark,     // ct->mark = (ct->mark & ~value2) | (mark & value): value = nfmask, value2 =
                     // ctmask
  kCtZone,           // value = conntrack zone
  kNotrack,
  kLog,
  kVerdictMap,  // nft vmap: text = "<map> <key>", elements for an anonymous map (see Set lookups)
  kUnknown,     // text = description of a target / statement we do not decode
};

struct Action {
  ActionKind kind = ActionKind::kContinue;
  uint32_t value = 0;
  uint32_t value2 = 0;
  uint32_t value3 = 0;
  std::string text;
  std::vector<std::string> elements;  // kVerdictMap on an anonymous map only

  auto operator<=>(const Action&) const = default;
};

// A rule's kernel meaning: its matches in canonical order (see Canonicalize) and its action.
// Two rules with equal RuleSemantics do the same thing to a packet.
struct RuleSemantics {
  std::vector<Match> matches;
  Action action;

  auto operator<=>(const RuleSemantics&) const = default;
};

struct Rule {
  RuleSemantics sem;
  std::string comment;  // -m comment / nft comment: evidence only, not meaning
  uint64_t handle = 0;  // nft rule handle; 0 for legacy
  bool has_counter = false;

  bool operator==(const Rule&) const = default;
};

// Sorts matches into canonical order and drops no-op matches (e.g. a bare "-m tcp" that only
// re-asserts the protocol). Every reader and parser calls this before returning a Rule.
void Canonicalize(RuleSemantics& sem);

struct Chain {
  std::string name;
  bool is_base = false;  // attached to a netfilter hook
  std::string hook;      // "prerouting", "input", "forward", "output", "postrouting" (base only)
  int32_t priority = 0;  // base only
  std::string type;      // "filter", "nat", "route" (base only)
  std::string policy;    // "accept" / "drop" (base only)
  std::vector<Rule> rules;

  bool operator==(const Chain&) const = default;
};

struct NftSet {
  std::string name;
  std::string key_type;  // "ipv4_addr", "ipv4_addr . inet_proto . inet_service", or "type:<n>"
  std::string comment;
  std::vector<std::string> elements;  // as nft prints them: "10.244.0.5", "tcp . 80 : goto x"
  std::string data_type;              // maps only: "verdict", "ipv4_addr", ...; empty for a set
  bool anonymous = false;             // kept only when its elements could not be inlined
  bool interval = false;              // "flags interval": elements are ranges and prefixes

  bool operator==(const NftSet&) const = default;
};

// What nft stored in a table's userdata (NFTA_TABLE_USERDATA: TLVs of type u8, length u8,
// value). Newer nftables records there the version of the nft that created the table, which an
// older nft neither writes nor reads (Debian 12's 1.0.6); a newer one warns when it lists a table
// created by a still newer nft.
struct NftTableUserdata {
  std::string comment;
  std::string creator_version;      // "1.1.5", or "1.1.5.1" for a stable release; empty: absent
  int64_t creator_build_time = -1;  // seconds since the epoch of that nft's build; -1: absent
  // Why the userdata could not be decoded (a truncated or malformed entry); a newer nft refuses
  // such a table's userdata ("Cannot parse userdata") and leaves the table out of its listing.
  std::string error;

  bool operator==(const NftTableUserdata&) const = default;
};

struct Table {
  Backend backend = Backend::kNft;
  Family family = Family::kInet;
  std::string name;
  std::vector<Chain> chains;
  std::vector<NftSet> sets;   // native nft only
  NftTableUserdata userdata;  // nf_tables only

  const Chain* FindChain(std::string_view chain_name) const;
  bool operator==(const Table&) const = default;
};

// ipset sets (x_tables side of the host probe set).
struct IpSet {
  std::string name;
  std::string type;  // "hash:ip"
  Family family = Family::kIpv4;
  std::vector<std::string> members;  // canonical address text

  bool operator==(const IpSet&) const = default;
};

// Rendering in the backend's own syntax, close to iptables-save / nft list.
std::string RenderMatch(Backend backend, Family family, const Match& m);
std::string RenderAction(Backend backend, Family family, const Action& a);
// One line: "-A CHAIN <matches> -j TARGET" for iptables backends, "<exprs> <verdict>" for nft.
std::string RenderRule(Backend backend, Family family, std::string_view chain, const Rule& rule);
// The same, with the table's named sets at hand: in an inet table their key types say whether an
// address lookup is "ip" or "ip6" (without them the set name's "v6" suffix decides).
std::string RenderRule(const Table& table, std::string_view chain, const Rule& rule);

// "<set> <key>" split at the first space (see Set lookups above).
struct SetLookup {
  std::string_view set;
  std::string_view key;
};
SetLookup ParseSetLookup(std::string_view text);

}  // namespace ad
