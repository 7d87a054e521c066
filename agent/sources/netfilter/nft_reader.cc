// ReadNfTables: dumps tables, chains, sets (+elements) and rules of the calling thread's netns
// over one NETLINK_NETFILTER socket, decodes every rule and tags iptables-nft tables.

#include <arpa/inet.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/gen.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sources/netfilter/ipset_reader.h"
#include "sources/netfilter/nft_reader_decode.h"
#include "sources/netfilter/nft_reader_netlink.h"
#include "sources/netfilter/nft_table_userdata.h"
#include "sources/netfilter/readers.h"
#include "sources/netfilter/xt_compat.h"

namespace ad {
namespace {

constexpr SourceKind kSource = SourceKind::kNftables;
constexpr int kMaxAttempts = 3;  // re-reads when the ruleset changed during the dump

struct TableDeleter {
  void operator()(nftnl_table* t) const { nftnl_table_free(t); }
};
struct ChainDeleter {
  void operator()(nftnl_chain* c) const { nftnl_chain_free(c); }
};
struct RuleDeleter {
  void operator()(nftnl_rule* r) const { nftnl_rule_free(r); }
};
struct SetDeleter {
  void operator()(nftnl_set* s) const { nftnl_set_free(s); }
};
struct GenDeleter {
  void operator()(nftnl_gen* g) const { nftnl_gen_free(g); }
};
struct ElemIterDeleter {
  void operator()(nftnl_set_elems_iter* i) const { nftnl_set_elems_iter_destroy(i); }
};
using TablePtr = std::unique_ptr<nftnl_table, TableDeleter>;
using ChainPtr = std::unique_ptr<nftnl_chain, ChainDeleter>;
using RulePtr = std::unique_ptr<nftnl_rule, RuleDeleter>;
using SetPtr = std::unique_ptr<nftnl_set, SetDeleter>;
using GenPtr = std::unique_ptr<nftnl_gen, GenDeleter>;
using ElemIterPtr = std::unique_ptr<nftnl_set_elems_iter, ElemIterDeleter>;

Family FamilyOf(uint32_t nfproto) {
  switch (nfproto) {
    case NFPROTO_INET:
      return Family::kInet;
    case NFPROTO_IPV4:
      return Family::kIpv4;
    case NFPROTO_IPV6:
      return Family::kIpv6;
    default:
      return Family::kOther;
  }
}

std::string HookName(uint32_t nfproto, uint32_t hook) {
  if (nfproto == NFPROTO_NETDEV) {
    return hook == 0 ? "ingress" : hook == 1 ? "egress" : "hook" + std::to_string(hook);
  }
  if (nfproto == NFPROTO_ARP) {
    static constexpr std::array<const char*, 3> kArp = {"input", "output", "forward"};
    return hook < kArp.size() ? kArp[hook] : "hook" + std::to_string(hook);
  }
  static constexpr std::array<const char*, 6> kInet = {"prerouting", "input",       "forward",
                                                       "output",     "postrouting", "ingress"};
  return hook < kInet.size() ? kInet[hook] : "hook" + std::to_string(hook);
}

std::string Str(const char* s) { return s ? std::string(s) : std::string(); }

// Requests are small: a header plus at most a table and a set name (NFT_NAME_MAXLEN each).
using RequestBuffer = std::array<char, 2048>;

// Builds a request header (+ payload via `fill`) in `buffer`.
template <typename Fill>
nlmsghdr* BuildRequest(RequestBuffer& buffer, uint16_t type, uint16_t family, uint16_t flags,
                       Fill fill) {
  buffer.fill(0);
  nlmsghdr* header = nftnl_nlmsg_build_hdr(buffer.data(), type, family, flags, 0);
  fill(header);
  return header;
}

// Per-table bookkeeping needed for the backend heuristic.
struct TableState {
  Table table;
  uint32_t nfproto = 0;
  bool any_xt = false;
  bool all_rules_counted = true;
  std::map<std::string, size_t> chain_index;
  std::map<std::string, uint32_t, std::less<>> key_widths;  // every set and map, by name
  std::map<std::string, NftSet> anonymous_sets;             // complete ones, to inline in rules
};

// Priority iptables-nft gives each built-in chain of a table (same for ip and ip6).
std::optional<int32_t> IptablesPriority(const std::string& table, const std::string& chain) {
  if (table == "raw") return -300;
  if (table == "mangle") return -150;
  if (table == "filter") return 0;
  if (table == "security") return 50;
  if (table == "nat") {
    return (chain == "PREROUTING" || chain == "OUTPUT") ? -100 : 100;
  }
  return std::nullopt;
}

// Which tool wrote a table. iptables-nft only ever creates ip/ip6 (arptables/ebtables-nft:
// arp/bridge) tables named after the x_tables tables, never inet. Inside such a table, xt
// `match`/`target` compat expressions prove iptables-nft; without them (iptables-nft writes
// plain -p/-s/-d/-i/-o/--dport natively) we require what iptables-nft always does: every rule
// carries a counter, and every base chain has an upper-case built-in name whose hook matches
// and, for ip/ip6, the standard priority. A native "table ip filter" written by hand usually
// fails the counter or naming test and stays Backend::kNft.
Backend Classify(const TableState& state) {
  static constexpr std::array<std::string_view, 5> kTableNames = {"filter", "nat", "mangle", "raw",
                                                                  "security"};
  bool family_ok = state.nfproto == NFPROTO_IPV4 || state.nfproto == NFPROTO_IPV6 ||
                   state.nfproto == NFPROTO_ARP || state.nfproto == NFPROTO_BRIDGE;
  bool name_ok =
      std::find(kTableNames.begin(), kTableNames.end(), state.table.name) != kTableNames.end();
  if (!family_ok || !name_ok) {
    return Backend::kNft;
  }
  if (state.any_xt) {
    return Backend::kIptablesNft;
  }
  if (!state.all_rules_counted || state.table.chains.empty()) {
    return Backend::kNft;
  }
  bool ip_family = state.nfproto == NFPROTO_IPV4 || state.nfproto == NFPROTO_IPV6;
  for (const Chain& chain : state.table.chains) {
    if (!chain.is_base) {
      continue;
    }
    std::string lower = chain.name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    bool upper_case = chain.name != lower;
    if (!upper_case || lower != chain.hook) {
      return Backend::kNft;
    }
    if (ip_family && IptablesPriority(state.table.name, chain.name) != chain.priority) {
      return Backend::kNft;
    }
  }
  return Backend::kIptablesNft;
}

// nft datatype ids (nftables datatype.h); a concatenation packs 6 bits per field, first field
// in the highest bits.
constexpr uint32_t kTypeNfproto = 2, kTypeInteger = 4, kTypeIpv4Addr = 7, kTypeIpv6Addr = 8,
                   kTypeEtherAddr = 9, kTypeInetProto = 12, kTypeInetService = 13, kTypeMark = 19,
                   kTypeIfindex = 20, kTypeUid = 24, kTypeGid = 25, kTypeIfname = 41;
constexpr uint32_t kConcatTypeBits = 6;
constexpr size_t kMaxKeyBytes = 64;  // NFT_DATA_VALUE_MAXLEN

std::vector<uint32_t> KeyFieldTypes(uint32_t key_type) {
  std::vector<uint32_t> fields;
  if (key_type < (1u << kConcatTypeBits)) return {key_type};
  for (uint32_t t = key_type; t != 0 && fields.size() < 16; t >>= kConcatTypeBits) {
    fields.insert(fields.begin(), t & ((1u << kConcatTypeBits) - 1));
  }
  return fields;
}

// Bytes one field of the type occupies in a key; 0 when unknown (then the rest is printed raw).
size_t FieldBytes(uint32_t type) {
  switch (type) {
    case kTypeNfproto:
    case kTypeInetProto:
      return 1;
    case kTypeInetService:
      return 2;
    case kTypeIpv4Addr:
    case kTypeMark:
    case kTypeIfindex:
    case kTypeUid:
    case kTypeGid:
      return 4;
    case kTypeEtherAddr:
      return 6;
    case kTypeIpv6Addr:
    case kTypeIfname:
      return 16;
    default:
      return 0;
  }
}

// Types the kernel stores in host byte order (nft sorts them by value).
bool HostOrder(uint32_t type) {
  return type == kTypeMark || type == kTypeIfindex || type == kTypeUid || type == kTypeGid ||
         type == kTypeInteger;
}

std::string TypeName(uint32_t type) {
  switch (type) {
    case kTypeNfproto:
      return "nf_proto";
    case kTypeInteger:
      return "integer";
    case kTypeIpv4Addr:
      return "ipv4_addr";
    case kTypeIpv6Addr:
      return "ipv6_addr";
    case kTypeEtherAddr:
      return "ether_addr";
    case kTypeInetProto:
      return "inet_proto";
    case kTypeInetService:
      return "inet_service";
    case kTypeMark:
      return "mark";
    case kTypeIfindex:
      return "iface_index";
    case kTypeUid:
      return "uid";
    case kTypeGid:
      return "gid";
    case kTypeIfname:
      return "ifname";
    default:
      return "type:" + std::to_string(type);
  }
}

std::string KeyTypeName(uint32_t key_type) {
  if (key_type >= (1u << kConcatTypeBits)) {
    const auto fields = KeyFieldTypes(key_type);
    bool known = true;
    for (uint32_t f : fields) known = known && f != 0 && FieldBytes(f) != 0;
    if (!known) return "type:" + std::to_string(key_type);
    std::string out;
    for (uint32_t f : fields) out += (out.empty() ? "" : " . ") + TypeName(f);
    return out;
  }
  return TypeName(key_type);
}

std::string HexText(std::span<const uint8_t> bytes) {
  std::string hex = "0x";
  static constexpr char kDigits[] = "0123456789abcdef";
  for (uint8_t b : bytes) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 0xf];
  }
  return hex;
}

uint32_t HostU32(std::span<const uint8_t> bytes) {
  uint32_t v = 0;
  std::memcpy(&v, bytes.data(), std::min<size_t>(bytes.size(), sizeof(v)));
  return v;
}

std::string ProtocolText(uint8_t proto) {
  switch (proto) {
    case IPPROTO_ICMP:
      return "icmp";
    case IPPROTO_IGMP:
      return "igmp";
    case IPPROTO_TCP:
      return "tcp";
    case IPPROTO_UDP:
      return "udp";
    case IPPROTO_GRE:
      return "gre";
    case IPPROTO_ESP:
      return "esp";
    case IPPROTO_AH:
      return "ah";
    case IPPROTO_ICMPV6:
      return "ipv6-icmp";
    case IPPROTO_SCTP:
      return "sctp";
    default:
      return std::to_string(proto);
  }
}

std::string QuotedName(std::span<const uint8_t> bytes) {
  const auto* chars = reinterpret_cast<const char*>(bytes.data());
  return "\"" + std::string(chars, strnlen(chars, bytes.size())) + "\"";
}

// One field of an element key as nft prints it. The reader runs inside the netns, so interface
// indexes resolve to that netns' names, as `nft list` does there.
std::string FieldText(uint32_t type, std::span<const uint8_t> key) {
  if (type == kTypeIpv4Addr && key.size() == 4) return xt::AddressText(Family::kIpv4, key.data());
  if (type == kTypeIpv6Addr && key.size() == 16) return xt::AddressText(Family::kIpv6, key.data());
  if (type == kTypeInetService && key.size() >= 2) return std::to_string((key[0] << 8) | key[1]);
  if (type == kTypeInetProto && !key.empty()) return ProtocolText(key[0]);
  if (type == kTypeNfproto && !key.empty()) {
    return key[0] == NFPROTO_IPV4   ? "ipv4"
           : key[0] == NFPROTO_IPV6 ? "ipv6"
                                    : std::to_string(key[0]);
  }
  if (type == kTypeMark && key.size() == 4) {
    std::array<char, 16> buf{};
    std::snprintf(buf.data(), buf.size(), "0x%08x", HostU32(key));
    return buf.data();
  }
  if ((type == kTypeUid || type == kTypeGid || type == kTypeInteger) && key.size() == 4) {
    return std::to_string(HostU32(key));
  }
  if (type == kTypeIfindex && key.size() == 4) {
    std::array<char, IF_NAMESIZE> name{};
    if (if_indextoname(HostU32(key), name.data()) != nullptr) {
      return "\"" + std::string(name.data()) + "\"";
    }
    return std::to_string(HostU32(key));
  }
  if (type == kTypeIfname) return QuotedName(key);
  return HexText(key);
}

// A whole key: fields joined by " . " as nft prints concatenations; each field starts on a
// 4-byte register slot.
std::string ElementText(uint32_t key_type, std::span<const uint8_t> key) {
  const auto fields = KeyFieldTypes(key_type);
  if (fields.size() == 1) return FieldText(fields[0], key);
  std::string out;
  size_t at = 0;
  for (uint32_t type : fields) {
    const size_t bytes = FieldBytes(type);
    if (bytes == 0 || at + bytes > key.size()) return HexText(key);
    if (!out.empty()) out += " . ";
    out += FieldText(type, key.subspan(at, bytes));
    at += (bytes + 3) / 4 * 4;
  }
  return out;
}

// Key bytes reordered so that byte-wise order is nft's value order (host-order fields reversed
// on little-endian hosts).
std::vector<uint8_t> SortKey(uint32_t key_type, std::span<const uint8_t> key) {
  std::vector<uint8_t> out(key.begin(), key.end());
  if constexpr (std::endian::native != std::endian::little) return out;
  const auto fields = KeyFieldTypes(key_type);
  size_t at = 0;
  for (uint32_t type : fields) {
    const size_t bytes = fields.size() == 1 ? key.size() : FieldBytes(type);
    if (bytes == 0 || at + bytes > out.size()) break;
    if (HostOrder(type)) std::reverse(out.begin() + at, out.begin() + at + bytes);
    at += (bytes + 3) / 4 * 4;
  }
  return out;
}

// Prefix length when [first, last] is exactly one prefix, else -1.
int PrefixLength(std::span<const uint8_t> first, std::span<const uint8_t> last) {
  const size_t bits = first.size() * 8;
  size_t common = 0;
  while (common < bits) {
    const uint8_t mask = static_cast<uint8_t>(0x80 >> (common % 8));
    if ((first[common / 8] & mask) != (last[common / 8] & mask)) break;
    ++common;
  }
  for (size_t bit = common; bit < bits; ++bit) {
    const uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
    if ((first[bit / 8] & mask) != 0 || (last[bit / 8] & mask) == 0) return -1;
  }
  return static_cast<int>(common);
}

// An inclusive range of one interval-set element as nft prints it: "10.0.0.0/8", "veth*",
// "1000-2000", or the single value.
std::string RangeText(uint32_t key_type, std::span<const uint8_t> first,
                      std::span<const uint8_t> last) {
  if (std::equal(first.begin(), first.end(), last.begin(), last.end())) {
    return ElementText(key_type, first);
  }
  const int prefix = first.size() == last.size() ? PrefixLength(first, last) : -1;
  if ((key_type == kTypeIpv4Addr || key_type == kTypeIpv6Addr) && prefix >= 0) {
    return ElementText(key_type, first) + "/" + std::to_string(prefix);
  }
  if (key_type == kTypeIfname && prefix >= 0 && prefix % 8 == 0) {
    std::string name = QuotedName(first.first(static_cast<size_t>(prefix / 8)));
    return name.substr(0, name.size() - 1) + "*\"";
  }
  return ElementText(key_type, first) + "-" + ElementText(key_type, last);
}

// One set element as read from the kernel.
struct RawElement {
  std::vector<uint8_t> key;
  std::vector<uint8_t> key_end;  // concatenated ranges (pipapo): inclusive end of the range
  bool interval_end = false;     // rbtree intervals: exclusive end of the preceding start
  std::string data;              // map value as nft prints it ("goto svc-x"); empty for sets
};

std::string VerdictText(int32_t verdict, const char* chain) {
  const std::string target = chain ? chain : "";
  switch (verdict) {
    case NF_ACCEPT:
      return "accept";
    case NF_DROP:
      return "drop";
    case NFT_CONTINUE:
      return "continue";
    case NFT_RETURN:
      return "return";
    case NFT_JUMP:
      return "jump " + target;
    case NFT_GOTO:
      return "goto " + target;
    default:
      return "verdict " + std::to_string(verdict);
  }
}

std::string WithData(std::string key, const std::string& data) {
  return data.empty() ? key : key + " : " + data;
}

// A concatenated range (pipapo sets: `10.0.0.0/8 . 80-90`): each field printed as its own range.
std::string ConcatRangeText(uint32_t key_type, std::span<const uint8_t> first,
                            std::span<const uint8_t> last) {
  const auto fields = KeyFieldTypes(key_type);
  if (fields.size() == 1 || first.size() != last.size()) return RangeText(key_type, first, last);
  std::string out;
  size_t at = 0;
  for (uint32_t type : fields) {
    const size_t bytes = FieldBytes(type);
    if (bytes == 0 || at + bytes > first.size()) {
      return ElementText(key_type, first) + "-" + ElementText(key_type, last);
    }
    if (!out.empty()) out += " . ";
    out += RangeText(type, first.subspan(at, bytes), last.subspan(at, bytes));
    at += (bytes + 3) / 4 * 4;
  }
  return out;
}

// Elements in nft's order and spelling. Kernel order is not guaranteed, so sort by value.
// Interval sets store [start, end) pairs; each pair becomes one range.
std::vector<std::string> ElementTexts(uint32_t key_type, bool interval,
                                      std::vector<RawElement> elements) {
  std::vector<std::pair<std::vector<uint8_t>, size_t>> order;  // sort key, index
  order.reserve(elements.size());
  for (size_t i = 0; i < elements.size(); ++i) {
    order.emplace_back(SortKey(key_type, elements[i].key), i);
  }
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    // An end meets the next range's equal start first.
    return elements[a.second].interval_end > elements[b.second].interval_end;
  });
  std::vector<std::string> out;
  out.reserve(elements.size());
  for (size_t n = 0; n < order.size(); ++n) {
    const RawElement& e = elements[order[n].second];
    if (!interval || !e.key_end.empty()) {
      std::string text = e.key_end.empty() ? ElementText(key_type, e.key)
                                           : ConcatRangeText(key_type, e.key, e.key_end);
      out.push_back(WithData(std::move(text), e.data));
      continue;
    }
    if (e.interval_end) continue;  // an end without a start (e.g. the implicit 0.0.0.0 end marker)
    const RawElement* next = n + 1 < order.size() ? &elements[order[n + 1].second] : nullptr;
    if (next != nullptr && next->interval_end) {
      std::vector<uint8_t> last = next->key;  // exclusive end -> inclusive last
      for (size_t b = last.size(); b-- > 0;) {
        if (last[b]-- != 0) break;
      }
      out.push_back(WithData(RangeText(key_type, e.key, last), e.data));
      ++n;
    } else {
      // Open to the top of the key space: an all-ones last value.
      std::vector<uint8_t> last(e.key.size(), 0xff);
      out.push_back(WithData(RangeText(key_type, e.key, last), e.data));
    }
  }
  return out;
}

std::string SetComment(nftnl_set* set) {
  if (!nftnl_set_is_set(set, NFTNL_SET_USERDATA)) {
    return {};
  }
  uint32_t len = 0;
  const auto* data = static_cast<const uint8_t*>(nftnl_set_get_data(set, NFTNL_SET_USERDATA, &len));
  return nft::UserdataComment(data, len, NFTNL_UDATA_SET_COMMENT);
}

class NfTablesReader {
 public:
  explicit NfTablesReader(const ReadLimits& limits) : limits_(limits) {}

  Result<std::vector<Table>> Read() {
    std::optional<SourceError> last_error;
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      Reset();
      auto socket = nl::OpenNetfilterSocket(kSource);
      if (!socket) {
        return socket.error();
      }
      socket_ = socket->get();
      Status dumped = DumpTables();
      if (dumped.ok()) dumped = DumpChains();
      if (dumped.ok()) dumped = DumpSets();
      if (dumped.ok()) dumped = DumpRules();
      if (!dumped.ok()) {
        last_error = dumped.error();
        if (dumped.error().error_number == EINTR) {
          continue;  // ruleset changed during a dump
        }
        return dumped.error();
      }
      if (!truncated_) {
        auto changed = GenerationChanged();
        if (!changed) {
          return changed.error();
        }
        if (*changed && attempt + 1 < kMaxAttempts) {
          continue;
        }
      }
      return Finish();
    }
    return last_error.value_or(SourceError{kSource, "ruleset kept changing while reading", EAGAIN});
  }

 private:
  void Reset() {
    states_.clear();
    table_index_.clear();
    rule_count_ = 0;
    element_count_ = 0;
    truncated_ = false;
    first_generation_.reset();
    generation_changed_ = false;
    rule_messages_ = 0;
  }

  // Every nf_tables reply carries the ruleset generation (its low 16 bits) in nfgenmsg.res_id,
  // so a commit between two dumps shows up in the replies themselves; no NFT_MSG_GETGEN round
  // trips needed around the dumps.
  void ObserveGeneration(const nlmsghdr* message) {
    if (mnl_nlmsg_get_payload_len(message) < sizeof(nfgenmsg)) {
      return;
    }
    const auto* header = static_cast<const nfgenmsg*>(mnl_nlmsg_get_payload(message));
    const uint16_t generation = ntohs(header->res_id);
    if (!first_generation_) {
      first_generation_ = generation;
    } else if (*first_generation_ != generation) {
      generation_changed_ = true;
    }
  }

  // Generations only grow, so the first and the last reply having the same one proves that
  // nothing was committed in between. When the last dump (rules) returned nothing, nothing pins
  // the end: ask for the generation once.
  Result<bool> GenerationChanged() {
    if (generation_changed_) {
      return true;
    }
    if (rule_messages_ > 0 || !first_generation_) {
      return false;  // no reply at all: no table was seen, nothing can be inconsistent
    }
    auto generation = Generation();
    if (!generation) {
      return generation.error();
    }
    return static_cast<uint16_t>(*generation & 0xffff) != *first_generation_;
  }

  Result<uint32_t> Generation() {
    RequestBuffer buffer;
    nlmsghdr* request =
        BuildRequest(buffer, NFT_MSG_GETGEN, AF_UNSPEC, NLM_F_ACK, [](nlmsghdr*) {});
    std::optional<uint32_t> id;
    Status got =
        nl::RunRequest(socket_, request, kSource, "NFT_MSG_GETGEN", [&](const nlmsghdr* message) {
          GenPtr gen(nftnl_gen_alloc());
          if (gen && nftnl_gen_nlmsg_parse(message, gen.get()) >= 0) {
            id = nftnl_gen_get_u32(gen.get(), NFTNL_GEN_ID);
          }
          return nl::Next::kContinue;
        });
    if (!got.ok()) {
      return got.error();
    }
    if (!id) {
      return SourceError{kSource, "NFT_MSG_GETGEN: no generation id in reply", EPROTO};
    }
    return *id;
  }

  TableState* FindTable(uint32_t nfproto, const std::string& name) {
    auto it = table_index_.find({nfproto, name});
    return it == table_index_.end() ? nullptr : &states_[it->second];
  }

  Status DumpTables() {
    RequestBuffer buffer;
    nlmsghdr* request =
        BuildRequest(buffer, NFT_MSG_GETTABLE, NFPROTO_UNSPEC, NLM_F_DUMP, [](nlmsghdr*) {});
    return nl::RunRequest(
        socket_, request, kSource, "NFT_MSG_GETTABLE dump", [&](const nlmsghdr* message) {
          ObserveGeneration(message);
          TablePtr table(nftnl_table_alloc());
          if (!table || nftnl_table_nlmsg_parse(message, table.get()) < 0) {
            return nl::Next::kContinue;
          }
          TableState state;
          state.nfproto = nftnl_table_get_u32(table.get(), NFTNL_TABLE_FAMILY);
          state.table.name = Str(nftnl_table_get_str(table.get(), NFTNL_TABLE_NAME));
          state.table.family = FamilyOf(state.nfproto);
          if (nftnl_table_is_set(table.get(), NFTNL_TABLE_USERDATA)) {
            uint32_t length = 0;
            const auto* data = static_cast<const uint8_t*>(
                nftnl_table_get_data(table.get(), NFTNL_TABLE_USERDATA, &length));
            if (data != nullptr) state.table.userdata = nft::DecodeTableUserdata({data, length});
          }
          table_index_[{state.nfproto, state.table.name}] = states_.size();
          states_.push_back(std::move(state));
          return nl::Next::kContinue;
        });
  }

  Status DumpChains() {
    RequestBuffer buffer;
    nlmsghdr* request =
        BuildRequest(buffer, NFT_MSG_GETCHAIN, NFPROTO_UNSPEC, NLM_F_DUMP, [](nlmsghdr*) {});
    return nl::RunRequest(
        socket_, request, kSource, "NFT_MSG_GETCHAIN dump", [&](const nlmsghdr* message) {
          ObserveGeneration(message);
          ChainPtr c(nftnl_chain_alloc());
          if (!c || nftnl_chain_nlmsg_parse(message, c.get()) < 0) {
            return nl::Next::kContinue;
          }
          uint32_t nfproto = nftnl_chain_get_u32(c.get(), NFTNL_CHAIN_FAMILY);
          TableState* state =
              FindTable(nfproto, Str(nftnl_chain_get_str(c.get(), NFTNL_CHAIN_TABLE)));
          if (state == nullptr) {
            return nl::Next::kContinue;  // table created after our table dump
          }
          Chain chain;
          chain.name = Str(nftnl_chain_get_str(c.get(), NFTNL_CHAIN_NAME));
          if (nftnl_chain_is_set(c.get(), NFTNL_CHAIN_HOOKNUM)) {
            chain.is_base = true;
            chain.hook = HookName(nfproto, nftnl_chain_get_u32(c.get(), NFTNL_CHAIN_HOOKNUM));
            chain.priority = nftnl_chain_get_s32(c.get(), NFTNL_CHAIN_PRIO);
            chain.type = Str(nftnl_chain_get_str(c.get(), NFTNL_CHAIN_TYPE));
            if (nftnl_chain_is_set(c.get(), NFTNL_CHAIN_POLICY)) {
              uint32_t policy = nftnl_chain_get_u32(c.get(), NFTNL_CHAIN_POLICY);
              chain.policy = policy == NF_ACCEPT ? "accept"
                             : policy == NF_DROP ? "drop"
                                                 : std::to_string(policy);
            }
          }
          state->chain_index[chain.name] = state->table.chains.size();
          state->table.chains.push_back(std::move(chain));
          return nl::Next::kContinue;
        });
  }

  Status DumpSets() {
    std::vector<SetPtr> sets;
    RequestBuffer buffer;
    nlmsghdr* request =
        BuildRequest(buffer, NFT_MSG_GETSET, NFPROTO_UNSPEC, NLM_F_DUMP, [](nlmsghdr*) {});
    Status listed = nl::RunRequest(socket_, request, kSource, "NFT_MSG_GETSET dump",
                                   [&](const nlmsghdr* message) {
                                     ObserveGeneration(message);
                                     SetPtr set(nftnl_set_alloc());
                                     if (set && nftnl_set_nlmsg_parse(message, set.get()) >= 0) {
                                       sets.push_back(std::move(set));
                                     }
                                     return nl::Next::kContinue;
                                   });
    if (!listed.ok()) {
      return listed;
    }
    for (SetPtr& set : sets) {
      if (Status read = ReadSet(set.get()); !read.ok()) {
        return read;
      }
    }
    return OkStatus();
  }

  Status ReadSet(nftnl_set* set) {
    uint32_t nfproto = nftnl_set_get_u32(set, NFTNL_SET_FAMILY);
    std::string table_name = Str(nftnl_set_get_str(set, NFTNL_SET_TABLE));
    TableState* state = FindTable(nfproto, table_name);
    if (state == nullptr) {
      return OkStatus();
    }
    NftSet out;
    out.name = Str(nftnl_set_get_str(set, NFTNL_SET_NAME));
    uint32_t key_type = nftnl_set_get_u32(set, NFTNL_SET_KEY_TYPE);
    uint32_t flags = nftnl_set_get_u32(set, NFTNL_SET_FLAGS);
    out.key_type = KeyTypeName(key_type);
    out.comment = SetComment(set);
    out.anonymous = (flags & NFT_SET_ANONYMOUS) != 0;
    out.interval = (flags & NFT_SET_INTERVAL) != 0;
    const bool is_map = (flags & NFT_SET_MAP) != 0;
    const uint32_t data_type = is_map ? nftnl_set_get_u32(set, NFTNL_SET_DATA_TYPE) : 0;
    if (is_map) out.data_type = data_type == NFT_DATA_VERDICT ? "verdict" : KeyTypeName(data_type);
    state->key_widths[out.name] = nftnl_set_get_u32(set, NFTNL_SET_KEY_LEN);

    RequestBuffer buffer;
    nlmsghdr* request =
        BuildRequest(buffer, NFT_MSG_GETSETELEM, static_cast<uint16_t>(nfproto), NLM_F_DUMP,
                     [&](nlmsghdr* header) { nftnl_set_elems_nlmsg_build_payload(header, set); });
    std::vector<RawElement> elements;
    bool limit_hit = false;
    Status listed = nl::RunRequest(
        socket_, request, kSource, "NFT_MSG_GETSETELEM " + table_name + " " + out.name,
        [&](const nlmsghdr* message) {
          ObserveGeneration(message);
          SetPtr parsed(nftnl_set_alloc());
          if (!parsed || nftnl_set_elems_nlmsg_parse(message, parsed.get()) < 0) {
            return nl::Next::kContinue;
          }
          ElemIterPtr iter(nftnl_set_elems_iter_create(parsed.get()));
          for (nftnl_set_elem* e = iter ? nftnl_set_elems_iter_next(iter.get()) : nullptr;
               e != nullptr; e = nftnl_set_elems_iter_next(iter.get())) {
            if (element_count_ >= limits_.max_set_elements) {
              limit_hit = true;
              break;
            }
            auto element = ReadElement(e, is_map, data_type);
            if (element) {
              elements.push_back(std::move(*element));
              ++element_count_;
            }
          }
          return nl::Next::kContinue;
        });
    if (!listed.ok()) {
      return listed;
    }
    out.elements = ElementTexts(key_type, (flags & NFT_SET_INTERVAL) != 0, std::move(elements));
    if (limit_hit) {
      out.elements.push_back("<truncated: element limit reached>");
    }
    if (out.anonymous && !limit_hit) {
      // Printed inside the rules that use it (see InlineAnonymousSets), not as a table set.
      state->anonymous_sets[out.name] = std::move(out);
    } else {
      state->table.sets.push_back(std::move(out));
    }
    return OkStatus();
  }

  static std::optional<RawElement> ReadElement(nftnl_set_elem* e, bool is_map, uint32_t data_type) {
    uint32_t len = 0;
    const auto* key = static_cast<const uint8_t*>(nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len));
    if (key == nullptr || len > kMaxKeyBytes) {
      return std::nullopt;
    }
    RawElement element;
    element.key.assign(key, key + len);
    element.interval_end =
        nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS) &&
        (nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS) & NFT_SET_ELEM_INTERVAL_END);
    if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END)) {
      const auto* end =
          static_cast<const uint8_t*>(nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &len));
      if (end != nullptr && len <= kMaxKeyBytes) element.key_end.assign(end, end + len);
    }
    if (!is_map || element.interval_end) {
      return element;
    }
    if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_VERDICT)) {
      const char* chain = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_CHAIN)
                              ? nftnl_set_elem_get_str(e, NFTNL_SET_ELEM_CHAIN)
                              : nullptr;
      element.data = VerdictText(
          static_cast<int32_t>(nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_VERDICT)), chain);
    } else if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_DATA)) {
      const auto* data =
          static_cast<const uint8_t*>(nftnl_set_elem_get(e, NFTNL_SET_ELEM_DATA, &len));
      if (data != nullptr && len <= kMaxKeyBytes) {
        element.data = ElementText(data_type, std::span<const uint8_t>(data, len));
      }
    }
    return element;
  }

  // Anonymous sets and maps (`tcp dport { 80, 443 }`, `vmap { ... }`) belong to their rule:
  // their elements go into the lookup itself, as nft prints them, and the kernel-chosen name
  // (__set0) is dropped so that equal rules compare equal.
  static void InlineAnonymousSets(const TableState& state, RuleSemantics& sem) {
    const auto inline_lookup = [&](std::string& text, std::vector<std::string>& elements) {
      const SetLookup lookup = ParseSetLookup(text);
      auto it = state.anonymous_sets.find(std::string(lookup.set));
      if (it == state.anonymous_sets.end()) return;
      elements = it->second.elements;
      text = std::string(kInlineSet) + " " + std::string(lookup.key);
    };
    for (Match& m : sem.matches) {
      if (m.kind == MatchKind::kSet) inline_lookup(m.text, m.elements);
    }
    if (sem.action.kind == ActionKind::kVerdictMap) {
      inline_lookup(sem.action.text, sem.action.elements);
    }
  }

  Status DumpRules() {
    RequestBuffer buffer;
    nlmsghdr* request =
        BuildRequest(buffer, NFT_MSG_GETRULE, NFPROTO_UNSPEC, NLM_F_DUMP, [](nlmsghdr*) {});
    xt::SetNameResolver resolve_ipset = [this](uint16_t index) { return ipset_names_.Name(index); };
    return nl::RunRequest(
        socket_, request, kSource, "NFT_MSG_GETRULE dump", [&](const nlmsghdr* message) {
          ObserveGeneration(message);
          ++rule_messages_;
          RulePtr r(nftnl_rule_alloc());
          if (!r || nftnl_rule_nlmsg_parse(message, r.get()) < 0) {
            return nl::Next::kContinue;
          }
          uint32_t nfproto = nftnl_rule_get_u32(r.get(), NFTNL_RULE_FAMILY);
          TableState* state =
              FindTable(nfproto, Str(nftnl_rule_get_str(r.get(), NFTNL_RULE_TABLE)));
          if (state == nullptr) {
            return nl::Next::kContinue;
          }
          auto chain_it =
              state->chain_index.find(Str(nftnl_rule_get_str(r.get(), NFTNL_RULE_CHAIN)));
          if (chain_it == state->chain_index.end()) {
            return nl::Next::kContinue;
          }
          Chain& chain = state->table.chains[chain_it->second];
          if (rule_count_ >= limits_.max_rules_per_netns) {
            // Visible marker instead of a silent cut: analysis sees an undecodable rule.
            Rule marker;
            marker.sem.action.kind = ActionKind::kUnknown;
            marker.sem.action.text = "truncated: more than " +
                                     std::to_string(limits_.max_rules_per_netns) +
                                     " rules in this netns";
            chain.rules.push_back(std::move(marker));
            truncated_ = true;
            return nl::Next::kStop;
          }
          ++rule_count_;
          const nft::SetKeyWidth key_width = [state](std::string_view set) -> uint32_t {
            auto it = state->key_widths.find(set);
            return it == state->key_widths.end() ? 0 : it->second;
          };
          nft::DecodedRule decoded =
              nft::DecodeRule(r.get(), state->table.family, resolve_ipset, key_width);
          state->any_xt = state->any_xt || decoded.has_xt;
          state->all_rules_counted = state->all_rules_counted && decoded.rule.has_counter;
          InlineAnonymousSets(*state, decoded.rule.sem);
          Canonicalize(decoded.rule.sem);
          chain.rules.push_back(std::move(decoded.rule));
          return nl::Next::kContinue;
        });
  }

  std::vector<Table> Finish() {
    std::vector<Table> tables;
    tables.reserve(states_.size());
    for (TableState& state : states_) {
      state.table.backend = Classify(state);
      tables.push_back(std::move(state.table));
    }
    return tables;
  }

  const ReadLimits& limits_;
  mnl_socket* socket_ = nullptr;
  std::vector<TableState> states_;
  std::map<std::pair<uint32_t, std::string>, size_t> table_index_;
  size_t rule_count_ = 0;
  size_t element_count_ = 0;
  bool truncated_ = false;
  std::optional<uint16_t> first_generation_;  // of the first reply of this attempt
  bool generation_changed_ = false;
  size_t rule_messages_ = 0;
  IpSetNameCache ipset_names_;  // listed only when an xt `set` match is seen
};

}  // namespace

Result<std::vector<Table>> ReadNfTables(const ReadLimits& limits) {
  NfTablesReader reader(limits);
  return reader.Read();
}

}  // namespace ad
