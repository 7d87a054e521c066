#include "sources/netfilter/legacy_reader.h"

// glibc's socket headers must precede the linux uapi ones, which skip what libc already defined.
// clang-format off
#include <netinet/in.h>
#include <sys/socket.h>
// clang-format on

#include <fcntl.h>
#include <linux/netfilter/x_tables.h>
#include <linux/netfilter_ipv4/ip_tables.h>
#include <linux/netfilter_ipv6/ip6_tables.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/unique_fd.h"
#include "sources/netfilter/ipset_reader.h"
#include "sources/netfilter/xt_compat.h"
#include "sources/netfilter/xtables_family.h"

namespace ad {
namespace legacy {
namespace {

using xt::Ipv4;
using xt::Ipv6;

constexpr std::array<const char*, kNumHooks> kHookChainNames = {"PREROUTING", "INPUT", "FORWARD",
                                                                "OUTPUT", "POSTROUTING"};
constexpr std::array<const char*, kNumHooks> kHookNames = {"prerouting", "input", "forward",
                                                           "output", "postrouting"};

SourceKind SourceName(Family family) {
  return family == Family::kIpv6 ? Ipv6::kSource : Ipv4::kSource;
}

SourceError CorruptError(Family family, const std::string& table, const std::string& what) {
  return SourceError{SourceName(family),
                     "IPT_SO_GET_ENTRIES(" + table + "): corrupt entry blob: " + what, EINVAL};
}

// Standard priorities of the x_tables hooks (include/uapi/linux/netfilter_ipv4.h).
int32_t HookPriority(const std::string& table, int hook) {
  if (table == "raw") return -300;
  if (table == "mangle") return -150;
  if (table == "security") return 50;
  if (table == "nat") {
    return (hook == NF_INET_PRE_ROUTING || hook == NF_INET_LOCAL_OUT) ? -100 : 100;
  }
  return 0;  // filter
}

std::string ChainType(const std::string& table, int hook) {
  if (table == "nat") return "nat";
  if (table == "mangle" && hook == NF_INET_LOCAL_OUT) return "route";
  return "filter";
}

// iptables stores "eth+" with a mask covering "eth" only, and "lo" with a mask that also covers
// the terminating NUL; the mask length tells the two apart.
std::string InterfaceText(const char* name, const unsigned char* mask) {
  const size_t length = ::strnlen(name, IFNAMSIZ);
  size_t mask_length = 0;
  while (mask_length < IFNAMSIZ && mask[mask_length] != 0) {
    ++mask_length;
  }
  if (mask_length > length) {
    return std::string(name, length);
  }
  std::string prefix(name, std::min(length, mask_length));
  return prefix + "+";
}

void AddInterface(MatchKind kind, const char* name, const unsigned char* mask, bool negated,
                  std::vector<Match>* matches) {
  if (name[0] == '\0' && mask[0] == 0) {
    return;
  }
  Match m;
  m.kind = kind;
  m.negated = negated;
  m.text = InterfaceText(name, mask);
  matches->push_back(std::move(m));
}

void AddAddress(MatchKind kind, Family family, const void* addr, const void* mask, bool negated,
                std::vector<Match>* matches) {
  const size_t size = family == Family::kIpv6 ? 16 : 4;
  const auto* mask_bytes = static_cast<const uint8_t*>(mask);
  const bool any = std::all_of(mask_bytes, mask_bytes + size, [](uint8_t b) { return b == 0; });
  if (any && !negated) {
    return;
  }
  Match m;
  m.kind = kind;
  m.negated = negated;
  m.text = xt::PrefixText(family, static_cast<const uint8_t*>(addr), mask_bytes);
  matches->push_back(std::move(m));
}

// The ip header part of an entry; returns whether the verdict is a goto.
bool DecodeIpPart(const ipt_entry& e, std::vector<Match>* matches) {
  const ipt_ip& ip = e.ip;
  AddAddress(MatchKind::kSrcAddr, Family::kIpv4, &ip.src, &ip.smsk,
             (ip.invflags & IPT_INV_SRCIP) != 0, matches);
  AddAddress(MatchKind::kDstAddr, Family::kIpv4, &ip.dst, &ip.dmsk,
             (ip.invflags & IPT_INV_DSTIP) != 0, matches);
  AddInterface(MatchKind::kInIface, ip.iniface, ip.iniface_mask,
               (ip.invflags & IPT_INV_VIA_IN) != 0, matches);
  AddInterface(MatchKind::kOutIface, ip.outiface, ip.outiface_mask,
               (ip.invflags & IPT_INV_VIA_OUT) != 0, matches);
  if (ip.proto != 0) {
    matches->push_back(
        Match{MatchKind::kProtocol, (ip.invflags & IPT_INV_PROTO) != 0, ip.proto, 0, ""});
  }
  if (ip.flags & IPT_F_FRAG) {
    matches->push_back(
        Match{MatchKind::kUnknown, (ip.invflags & IPT_INV_FRAG) != 0, 0, 0, "fragment (-f)"});
  }
  return (ip.flags & IPT_F_GOTO) != 0;
}

bool DecodeIpPart(const ip6t_entry& e, std::vector<Match>* matches) {
  const ip6t_ip6& ip = e.ipv6;
  AddAddress(MatchKind::kSrcAddr, Family::kIpv6, &ip.src, &ip.smsk,
             (ip.invflags & IP6T_INV_SRCIP) != 0, matches);
  AddAddress(MatchKind::kDstAddr, Family::kIpv6, &ip.dst, &ip.dmsk,
             (ip.invflags & IP6T_INV_DSTIP) != 0, matches);
  AddInterface(MatchKind::kInIface, ip.iniface, ip.iniface_mask,
               (ip.invflags & IP6T_INV_VIA_IN) != 0, matches);
  AddInterface(MatchKind::kOutIface, ip.outiface, ip.outiface_mask,
               (ip.invflags & IP6T_INV_VIA_OUT) != 0, matches);
  if ((ip.flags & IP6T_F_PROTO) || ip.proto != 0) {
    matches->push_back(
        Match{MatchKind::kProtocol, (ip.invflags & IP6T_INV_PROTO) != 0, ip.proto, 0, ""});
  }
  if (ip.flags & IP6T_F_TOS) {
    matches->push_back(
        Match{MatchKind::kUnknown, (ip.invflags & IP6T_INV_TOS) != 0, ip.tos, 0, "tos"});
  }
  return (ip.flags & IP6T_F_GOTO) != 0;
}

// One validated entry of the blob.
struct EntryRef {
  uint32_t offset = 0;
  uint16_t target_offset = 0;
  uint16_t next_offset = 0;
  std::string target_name;
  uint8_t target_revision = 0;
  std::span<const uint8_t> target_payload;
};

constexpr const char* kErrorTarget = XT_ERROR_TARGET;  // "ERROR"

std::string FixedString(const char* text, size_t max) {
  return std::string(text, ::strnlen(text, max));
}

template <typename Traits>
Result<std::vector<EntryRef>> IndexEntries(Family family, const std::string& table,
                                           const TableLayout& layout, std::span<const uint8_t> blob,
                                           const ReadLimits& limits) {
  using Entry = typename Traits::Entry;
  std::vector<EntryRef> entries;
  if (layout.size != blob.size()) {
    return CorruptError(
        family, table,
        "size " + std::to_string(blob.size()) + " != announced " + std::to_string(layout.size));
  }
  if (layout.num_entries > limits.max_rules_per_netns + 2 * kNumHooks + 1) {
    return SourceError{SourceName(family),
                       "IPT_SO_GET_INFO(" + table + "): " + std::to_string(layout.num_entries) +
                           " entries exceed the limit of " +
                           std::to_string(limits.max_rules_per_netns) + " rules (truncated)",
                       EFBIG};
  }
  entries.reserve(layout.num_entries);
  size_t offset = 0;
  while (offset < blob.size()) {
    if (entries.size() >= layout.num_entries) {
      return CorruptError(family, table, "more entries than announced");
    }
    if (blob.size() - offset < sizeof(Entry)) {
      return CorruptError(family, table, "truncated entry at offset " + std::to_string(offset));
    }
    Entry e;
    std::memcpy(&e, blob.data() + offset, sizeof(Entry));
    const size_t next = e.next_offset;
    const size_t target_at = e.target_offset;
    if (target_at < sizeof(Entry) || next > blob.size() - offset ||
        target_at + sizeof(xt_entry_target) > next) {
      return CorruptError(family, table, "bad entry offsets at " + std::to_string(offset));
    }
    xt_entry_target target;
    std::memcpy(&target, blob.data() + offset + target_at, sizeof(target));
    const size_t target_size = target.u.target_size;
    if (target_size < sizeof(xt_entry_target) || target_at + target_size > next) {
      return CorruptError(family, table, "bad target size at " + std::to_string(offset));
    }
    EntryRef ref;
    ref.offset = static_cast<uint32_t>(offset);
    ref.target_offset = static_cast<uint16_t>(target_at);
    ref.next_offset = static_cast<uint16_t>(next);
    ref.target_name = FixedString(target.u.user.name, sizeof(target.u.user.name));
    ref.target_revision = target.u.user.revision;
    ref.target_payload = blob.subspan(offset + target_at + sizeof(xt_entry_target),
                                      target_size - sizeof(xt_entry_target));
    entries.push_back(std::move(ref));
    offset += next;
  }
  if (entries.size() != layout.num_entries) {
    return CorruptError(family, table,
                        "entry count " + std::to_string(entries.size()) + " != announced " +
                            std::to_string(layout.num_entries));
  }
  if (entries.empty() || entries.back().target_name != kErrorTarget) {
    return CorruptError(family, table, "missing the terminating ERROR entry");
  }
  return entries;
}

std::optional<int32_t> StandardVerdict(const EntryRef& entry) {
  if (!entry.target_name.empty() || entry.target_payload.size() < sizeof(int32_t)) {
    return std::nullopt;
  }
  int32_t verdict = 0;
  std::memcpy(&verdict, entry.target_payload.data(), sizeof(verdict));
  return verdict;
}

std::optional<Action> VerdictAction(int32_t verdict) {
  Action a;
  switch (verdict) {
    case -NF_ACCEPT - 1:
      a.kind = ActionKind::kAccept;
      return a;
    case -NF_DROP - 1:
      a.kind = ActionKind::kDrop;
      return a;
    case XT_RETURN:
      a.kind = ActionKind::kReturn;
      return a;
    case -NF_QUEUE - 1:
      a.kind = ActionKind::kUnknown;
      a.text = "QUEUE";
      return a;
    default:
      return std::nullopt;
  }
}

template <typename Traits>
Result<std::vector<Match>> DecodeEntryMatches(Family family, const std::string& table,
                                              std::span<const uint8_t> blob, const EntryRef& ref,
                                              const xt::SetNameResolver& resolve_set, bool* is_goto,
                                              std::string* comment) {
  using Entry = typename Traits::Entry;
  Entry e;
  std::memcpy(&e, blob.data() + ref.offset, sizeof(Entry));
  std::vector<Match> matches;
  *is_goto = DecodeIpPart(e, &matches);
  size_t at = sizeof(Entry);
  while (at < ref.target_offset) {
    if (ref.target_offset - at < sizeof(xt_entry_match)) {
      return CorruptError(family, table, "truncated match at " + std::to_string(ref.offset));
    }
    xt_entry_match header;
    std::memcpy(&header, blob.data() + ref.offset + at, sizeof(header));
    const size_t match_size = header.u.match_size;
    if (match_size < sizeof(xt_entry_match) || match_size > ref.target_offset - at) {
      return CorruptError(family, table, "bad match size at " + std::to_string(ref.offset));
    }
    auto payload =
        blob.subspan(ref.offset + at + sizeof(xt_entry_match), match_size - sizeof(xt_entry_match));
    xt::DecodeMatch(family, FixedString(header.u.user.name, sizeof(header.u.user.name)),
                    header.u.user.revision, payload, resolve_set, &matches, comment);
    at += match_size;
  }
  return matches;
}

template <typename Traits>
Result<Table> DecodeBlob(Family family, const std::string& table_name, const TableLayout& layout,
                         std::span<const uint8_t> blob, const ReadLimits& limits,
                         const xt::SetNameResolver& resolve_set) {
  auto indexed = IndexEntries<Traits>(family, table_name, layout, blob, limits);
  if (!indexed.ok()) {
    return indexed.error();
  }
  const std::vector<EntryRef>& entries = *indexed;

  std::unordered_map<uint32_t, size_t> index_by_offset;
  for (size_t i = 0; i < entries.size(); ++i) {
    index_by_offset.emplace(entries[i].offset, i);
  }
  // Hook entry points and underflows must land on entries.
  std::unordered_map<uint32_t, int> hook_by_entry;
  for (int hook = 0; hook < kNumHooks; ++hook) {
    if ((layout.valid_hooks & (1u << hook)) == 0) {
      continue;
    }
    if (!index_by_offset.contains(layout.hook_entry[hook]) ||
        !index_by_offset.contains(layout.underflow[hook]) ||
        layout.underflow[hook] < layout.hook_entry[hook]) {
      return CorruptError(family, table_name, "hook " + std::to_string(hook) + " out of bounds");
    }
    hook_by_entry.emplace(layout.hook_entry[hook], hook);
  }
  // A user chain's rules start right after its ERROR head; jumps point there.
  std::unordered_map<uint32_t, std::string> chain_by_start;
  for (size_t i = 0; i + 1 < entries.size(); ++i) {
    const EntryRef& e = entries[i];
    if (e.target_name == kErrorTarget) {
      auto name = e.target_payload.size() >= XT_FUNCTION_MAXNAMELEN
                      ? FixedString(reinterpret_cast<const char*>(e.target_payload.data()),
                                    XT_FUNCTION_MAXNAMELEN)
                      : std::string();
      if (name.empty()) {
        return CorruptError(family, table_name, "user chain without a name");
      }
      chain_by_start.emplace(e.offset + e.next_offset, std::move(name));
    }
  }

  Table table;
  table.backend = Backend::kIptablesLegacy;
  table.family = family;
  table.name = table_name;
  size_t rule_count = 0;

  Chain* current = nullptr;
  int current_hook = -1;
  auto starts_chain = [&](size_t i) {
    return i < entries.size() &&
           (entries[i].target_name == kErrorTarget || hook_by_entry.contains(entries[i].offset));
  };

  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryRef& entry = entries[i];
    if (auto hook = hook_by_entry.find(entry.offset); hook != hook_by_entry.end()) {
      Chain chain;
      chain.name = kHookChainNames[hook->second];
      chain.is_base = true;
      chain.hook = kHookNames[hook->second];
      chain.priority = HookPriority(table_name, hook->second);
      chain.type = ChainType(table_name, hook->second);
      table.chains.push_back(std::move(chain));
      current = &table.chains.back();
      current_hook = hook->second;
    }
    if (entry.target_name == kErrorTarget) {
      if (i + 1 == entries.size()) {
        break;  // end-of-table marker
      }
      Chain chain;
      chain.name = chain_by_start.at(entry.offset + entry.next_offset);
      table.chains.push_back(std::move(chain));
      current = &table.chains.back();
      current_hook = -1;
      continue;
    }
    if (current == nullptr) {
      return CorruptError(family, table_name,
                          "entry outside any chain at " + std::to_string(entry.offset));
    }
    if (current_hook >= 0 && entry.offset == layout.underflow[current_hook]) {
      auto verdict = StandardVerdict(entry);
      auto action = verdict ? VerdictAction(*verdict) : std::nullopt;
      current->policy = (action && action->kind == ActionKind::kDrop) ? "drop" : "accept";
      current = nullptr;
      current_hook = -1;
      continue;
    }
    if (current_hook < 0 && starts_chain(i + 1)) {
      current = nullptr;  // the unconditional RETURN that closes a user chain
      continue;
    }

    if (++rule_count > limits.max_rules_per_netns) {
      return SourceError{SourceName(family),
                         "IPT_SO_GET_ENTRIES(" + table_name + "): more than " +
                             std::to_string(limits.max_rules_per_netns) + " rules (truncated)",
                         EFBIG};
    }
    Rule rule;
    rule.has_counter = true;  // x_tables counts every rule
    bool is_goto = false;
    auto matches = DecodeEntryMatches<Traits>(family, table_name, blob, entry, resolve_set,
                                              &is_goto, &rule.comment);
    if (!matches.ok()) {
      return matches.error();
    }
    rule.sem.matches = std::move(*matches);
    if (auto verdict = StandardVerdict(entry)) {
      if (*verdict >= 0) {
        const uint32_t to = static_cast<uint32_t>(*verdict);
        if (auto chain = chain_by_start.find(to); chain != chain_by_start.end()) {
          rule.sem.action.kind = is_goto ? ActionKind::kGoto : ActionKind::kJump;
          rule.sem.action.text = chain->second;
        } else if (to == entry.offset + entry.next_offset) {
          rule.sem.action.kind = ActionKind::kContinue;  // rule without a target
        } else {
          return CorruptError(family, table_name, "jump to unknown offset " + std::to_string(to));
        }
      } else if (auto action = VerdictAction(*verdict)) {
        rule.sem.action = *action;
      } else {
        return CorruptError(family, table_name, "bad verdict " + std::to_string(*verdict));
      }
    } else if (entry.target_name.empty()) {
      return CorruptError(family, table_name, "short standard target");
    } else {
      rule.sem.action =
          xt::DecodeTarget(family, entry.target_name, entry.target_revision, entry.target_payload);
    }
    Canonicalize(rule.sem);
    current->rules.push_back(std::move(rule));
  }
  return table;
}

template <typename Traits>
Result<Table> ReadOneTable(Family family, int sock, const std::string& table_name,
                           const ReadLimits& limits, const xt::SetNameResolver& resolve_set) {
  typename Traits::GetInfo info{};
  if (table_name.size() >= sizeof(info.name)) {
    return SourceError{Traits::kSource, "table name too long: " + table_name, EINVAL};
  }
  // The table can change between GET_INFO and GET_ENTRIES (size mismatch -> EAGAIN): retry.
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::memset(&info, 0, sizeof(info));
    std::memcpy(info.name, table_name.data(), table_name.size());
    socklen_t info_length = sizeof(info);
    if (::getsockopt(sock, Traits::kLevel, Traits::kGetInfo, &info, &info_length) != 0) {
      return ErrnoError(Traits::kSource, "getsockopt(GET_INFO, " + table_name + ")");
    }
    TableLayout layout;
    layout.valid_hooks = info.valid_hooks;
    for (int hook = 0; hook < kNumHooks; ++hook) {
      layout.hook_entry[hook] = info.hook_entry[hook];
      layout.underflow[hook] = info.underflow[hook];
    }
    layout.num_entries = info.num_entries;
    layout.size = info.size;
    // Builtin chains add a policy entry each, user chains a head and a tail, the table an end.
    if (info.num_entries > limits.max_rules_per_netns + 2 * kNumHooks + 1) {
      return SourceError{Traits::kSource,
                         "IPT_SO_GET_INFO(" + table_name + "): " +
                             std::to_string(info.num_entries) + " entries exceed the limit of " +
                             std::to_string(limits.max_rules_per_netns) + " rules (truncated)",
                         EFBIG};
    }
    // next_offset is 16 bits, so no valid table is larger than this.
    if (static_cast<uint64_t>(info.size) > static_cast<uint64_t>(info.num_entries) * 0xffff) {
      return CorruptError(family, table_name, "announced size " + std::to_string(info.size));
    }
    using GetEntries = typename Traits::GetEntries;
    std::vector<uint8_t> buffer(sizeof(GetEntries) + info.size);
    GetEntries request{};
    std::memcpy(request.name, info.name, sizeof(request.name));
    request.size = info.size;
    std::memcpy(buffer.data(), &request, sizeof(request));
    socklen_t entries_length = static_cast<socklen_t>(buffer.size());
    if (::getsockopt(sock, Traits::kLevel, Traits::kGetEntries, buffer.data(), &entries_length) !=
        0) {
      if (errno == EAGAIN) {
        continue;
      }
      return ErrnoError(Traits::kSource, "getsockopt(GET_ENTRIES, " + table_name + ")");
    }
    std::span<const uint8_t> blob(buffer.data() + sizeof(GetEntries), info.size);
    return DecodeBlob<Traits>(family, table_name, layout, blob, limits, resolve_set);
  }
  return SourceError{Traits::kSource,
                     "getsockopt(GET_ENTRIES, " + table_name + "): table kept changing", EAGAIN};
}

template <typename Traits>
Result<std::vector<Table>> ReadTables(Family family, const std::vector<std::string>& table_names,
                                      const ReadLimits& limits) {
  std::vector<Table> tables;
  if (table_names.empty()) {
    return tables;  // no socket at all: nothing to query, nothing to instantiate
  }
  // The socket binds to the calling thread's current netns (the one NetnsGuard entered).
  UniqueFd sock(::socket(Traits::kDomain, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
  if (!sock.valid()) {
    return ErrnoError(Traits::kSource, "socket(SOCK_RAW, IPPROTO_RAW)");
  }
  IpSetNameCache set_names;
  xt::SetNameResolver resolve = [&set_names](uint16_t index) { return set_names.Name(index); };
  size_t rules_so_far = 0;
  for (const std::string& name : table_names) {
    ReadLimits remaining = limits;
    remaining.max_rules_per_netns = limits.max_rules_per_netns - rules_so_far;
    auto table = ReadOneTable<Traits>(family, sock.get(), name, remaining, resolve);
    if (!table.ok()) {
      return table.error();
    }
    for (const Chain& chain : table->chains) {
      rules_so_far += chain.rules.size();
    }
    tables.push_back(std::move(*table));
  }
  return tables;
}

}  // namespace

Result<Table> DecodeTableBlob(Family family, const std::string& table_name,
                              const TableLayout& layout, std::span<const uint8_t> blob,
                              const ReadLimits& limits, const xt::SetNameResolver& resolve_set) {
  if (family == Family::kIpv6) {
    return DecodeBlob<Ipv6>(family, table_name, layout, blob, limits, resolve_set);
  }
  return DecodeBlob<Ipv4>(family, table_name, layout, blob, limits, resolve_set);
}

}  // namespace legacy

Result<std::vector<std::string>> ReadLegacyTableNames(Family family) {
  const char* path = family == Family::kIpv6 ? legacy::Ipv6::kNamesFile : legacy::Ipv4::kNamesFile;
  const SourceKind source = legacy::SourceName(family);
  std::vector<std::string> names;
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) {
      return names;  // x_tables not built in: no legacy tables
    }
    return ErrnoError(source, std::string("open(") + path + ")");
  }
  // Usually one read: the file lists a handful of short names. seq_file stops a read early only
  // at end of file or when the next record does not fit its page-sized buffer, so a read that
  // left room for a whole record (a name + newline) reached the end: no read() returning 0.
  constexpr size_t kMaxRecord = XT_TABLE_MAXNAMELEN + 1;
  std::string content;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(source, std::string("read(") + path + ")");
    }
    content.append(buffer, static_cast<size_t>(n));
    if (static_cast<size_t>(n) + kMaxRecord < sizeof(buffer)) break;
  }
  std::string_view rest = content;
  while (!rest.empty()) {
    const size_t end = std::min(rest.find('\n'), rest.size());
    if (end > 0) {
      names.emplace_back(rest.substr(0, end));
    }
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
  return names;
}

Result<std::vector<Table>> ReadLegacyTables(Family family,
                                            const std::vector<std::string>& table_names,
                                            const ReadLimits& limits) {
  if (family == Family::kIpv6) {
    return legacy::ReadTables<legacy::Ipv6>(family, table_names, limits);
  }
  if (family != Family::kIpv4) {
    return SourceError{SourceKind::kLegacyIpv4, "only ipv4 and ipv6 have legacy tables", EINVAL};
  }
  return legacy::ReadTables<legacy::Ipv4>(family, table_names, limits);
}

}  // namespace ad
