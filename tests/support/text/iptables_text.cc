// iptables-save / iptables-restore text -> normalized Tables, and back.
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "text/rule_text.h"
#include "text/text_util.h"

namespace ad {

namespace {

using text::Join;
using text::ParseU32;

constexpr uint32_t kFullMask = 0xffffffff;
constexpr SourceKind kSource = SourceKind::kIptablesText;

// Built-in chains in kernel hook order, with the priorities of the iptable_* modules.
struct BuiltinChain {
  std::string_view table;
  std::string_view chain;
  std::string_view hook;
  int32_t priority;
  std::string_view type;
};
constexpr std::array<BuiltinChain, 18> kBuiltinChains = {{
    {"raw", "PREROUTING", "prerouting", -300, "filter"},
    {"raw", "OUTPUT", "output", -300, "filter"},
    {"mangle", "PREROUTING", "prerouting", -150, "filter"},
    {"mangle", "INPUT", "input", -150, "filter"},
    {"mangle", "FORWARD", "forward", -150, "filter"},
    {"mangle", "OUTPUT", "output", -150, "route"},
    {"mangle", "POSTROUTING", "postrouting", -150, "filter"},
    {"nat", "PREROUTING", "prerouting", -100, "nat"},
    {"nat", "INPUT", "input", 100, "nat"},
    {"nat", "OUTPUT", "output", -100, "nat"},
    {"nat", "POSTROUTING", "postrouting", 100, "nat"},
    {"filter", "INPUT", "input", 0, "filter"},
    {"filter", "FORWARD", "forward", 0, "filter"},
    {"filter", "OUTPUT", "output", 0, "filter"},
    {"security", "INPUT", "input", 50, "filter"},
    {"security", "FORWARD", "forward", 50, "filter"},
    {"security", "OUTPUT", "output", 50, "filter"},
    {"broute", "BROUTING", "prerouting", -200, "filter"},  // ebtables, for completeness
}};

const BuiltinChain* FindBuiltin(std::string_view table, std::string_view chain) {
  for (const auto& b : kBuiltinChains) {
    if (b.table == table && b.chain == chain) return &b;
  }
  return nullptr;
}

// xt targets that exist but that we do not decode: never mistake them for user chains.
constexpr std::array<std::string_view, 22> kOpaqueTargets = {
    "NFLOG",    "NFQUEUE",  "QUEUE",   "TEE",         "CLASSIFY", "DSCP",  "TOS",    "TCPMSS",
    "AUDIT",    "CHECKSUM", "SECMARK", "CONNSECMARK", "HMARK",    "TRACE", "NETMAP", "SET",
    "SYNPROXY", "TTL",      "HL",      "IDLETIMER",   "LED",      "ULOG"};

// One "--option args..." group after -m or -j, with the "!" that preceded it.
struct Option {
  bool negated = false;
  std::string name;
  std::vector<std::string> args;
  std::string text;  // verbatim, for kUnknown
};

bool IsOptionStart(const std::string& word) { return word.size() > 1 && word[0] == '-'; }

// Generic (non-extension) options that end a -m/-j option list.
bool IsGenericOption(const std::string& word) {
  static constexpr std::array<std::string_view, 22> kGeneric = {"-p",
                                                                "--protocol",
                                                                "-s",
                                                                "--source",
                                                                "--src",
                                                                "-d",
                                                                "--destination",
                                                                "--dst",
                                                                "-i",
                                                                "--in-interface",
                                                                "-o",
                                                                "--out-interface",
                                                                "-m",
                                                                "--match",
                                                                "-j",
                                                                "--jump",
                                                                "-g",
                                                                "--goto",
                                                                "-f",
                                                                "--fragment",
                                                                "-c",
                                                                "--set-counters"};
  return std::find(kGeneric.begin(), kGeneric.end(), word) != kGeneric.end();
}

// Reads "[!] --opt args" groups starting at *pos until a generic option or the end.
std::vector<Option> ReadOptions(const std::vector<std::string>& words, size_t* pos) {
  std::vector<Option> options;
  size_t i = *pos;
  while (i < words.size()) {
    bool negated = false;
    size_t start = i;
    if (words[i] == "!") {
      if (i + 1 >= words.size() || IsGenericOption(words[i + 1])) break;
      negated = true;
      ++i;
    }
    if (IsGenericOption(words[i]) || !IsOptionStart(words[i])) {
      i = start;
      break;
    }
    Option opt;
    opt.negated = negated;
    opt.name = words[i++];
    while (i < words.size() && !IsOptionStart(words[i]) && words[i] != "!") {
      opt.args.push_back(words[i++]);
    }
    opt.text = Join(words, start, i);
    options.push_back(std::move(opt));
  }
  *pos = i;
  return options;
}

// "v" or "v/m" -> (value, mask); the mask defaults to all ones.
std::optional<std::pair<uint32_t, uint32_t>> ParseMarkMask(std::string_view text) {
  const auto slash = text.find('/');
  const auto value = ParseU32(text.substr(0, slash));
  if (!value) return std::nullopt;
  if (slash == std::string_view::npos) return std::make_pair(*value, kFullMask);
  const auto mask = ParseU32(text.substr(slash + 1));
  if (!mask) return std::nullopt;
  return std::make_pair(*value, *mask);
}

Match MakeMatch(MatchKind kind, bool negated, uint32_t value = 0, uint32_t value2 = 0,
                std::string text = {}) {
  return Match{kind, negated, value, value2, std::move(text)};
}

Match Unknown(std::string text) {
  return MakeMatch(MatchKind::kUnknown, false, 0, 0, std::move(text));
}

// Decodes one option of match extension `module`; false when we do not understand it.
bool DecodeMatchOption(std::string_view module, const Option& opt, Rule& rule) {
  auto& ms = rule.sem.matches;
  const auto one_arg = [&]() -> const std::string* {
    return opt.args.size() == 1 ? &opt.args[0] : nullptr;
  };
  if (module == "tcp" || module == "udp" || module == "sctp" || module == "multiport") {
    const bool multi = module == "multiport";
    MatchKind kind;
    if (opt.name == "--dport" || opt.name == "--destination-port" ||
        (multi && (opt.name == "--dports" || opt.name == "--destination-ports"))) {
      kind = MatchKind::kDstPort;
    } else if (opt.name == "--sport" || opt.name == "--source-port" ||
               (multi && (opt.name == "--sports" || opt.name == "--source-ports"))) {
      kind = MatchKind::kSrcPort;
    } else {
      return false;
    }
    const std::string* arg = one_arg();
    // A multiport list of several ports is not one range: left undecoded.
    if (!arg || (multi && arg->find(',') != std::string::npos)) return false;
    const auto range = text::ParsePortRange(*arg);
    if (!range) return false;
    ms.push_back(MakeMatch(kind, opt.negated, range->first, range->second));
    return true;
  }
  if (module == "mark" || module == "connmark") {
    const std::string* arg = one_arg();
    if (opt.name != "--mark" || !arg) return false;
    const auto mm = ParseMarkMask(*arg);
    if (!mm) return false;
    ms.push_back(MakeMatch(module == "mark" ? MatchKind::kMark : MatchKind::kConnmark, opt.negated,
                           mm->first, mm->second));
    return true;
  }
  if (module == "set") {
    if ((opt.name != "--match-set" && opt.name != "--set") || opt.args.size() != 2) return false;
    ms.push_back(MakeMatch(MatchKind::kSet, opt.negated, 0, 0, opt.args[0] + " " + opt.args[1]));
    return true;
  }
  if (module == "owner") {
    if (opt.name == "--socket-exists" && opt.args.empty()) {
      ms.push_back(MakeMatch(MatchKind::kSocketExists, opt.negated));
      return true;
    }
    const std::string* arg = one_arg();
    const auto id = arg ? ParseU32(*arg) : std::nullopt;
    if (!id) return false;
    if (opt.name == "--uid-owner") {
      ms.push_back(MakeMatch(MatchKind::kSocketUid, opt.negated, *id));
      return true;
    }
    if (opt.name == "--gid-owner") {
      ms.push_back(MakeMatch(MatchKind::kSocketGid, opt.negated, *id));
      return true;
    }
    return false;
  }
  if (module == "conntrack" || module == "state") {
    const std::string* arg = one_arg();
    if ((opt.name != "--ctstate" && opt.name != "--state") || !arg) return false;
    const auto states = text::ParseCtStates(*arg);
    if (!states) return false;
    ms.push_back(MakeMatch(MatchKind::kCtState, opt.negated, *states));
    return true;
  }
  if (module == "addrtype") {
    const std::string* arg = one_arg();
    if (!arg) return false;
    if (opt.name == "--src-type" || opt.name == "--dst-type") {
      const std::string dir = opt.name == "--src-type" ? "src " : "dst ";
      ms.push_back(MakeMatch(MatchKind::kAddrType, opt.negated, 0, 0, dir + text::Upper(*arg)));
      return true;
    }
    return false;
  }
  if (module == "comment") {
    const std::string* arg = one_arg();
    if (opt.name != "--comment" || !arg || opt.negated) return false;
    rule.comment = *arg;
    return true;
  }
  return false;
}

bool HasOnly(const std::vector<Option>& opts, std::initializer_list<std::string_view> allowed) {
  return std::all_of(opts.begin(), opts.end(), [&](const Option& o) {
    return !o.negated &&
           std::find(allowed.begin(), allowed.end(), std::string_view(o.name)) != allowed.end();
  });
}

const Option* FindOption(const std::vector<Option>& opts,
                         std::initializer_list<std::string_view> names) {
  for (const auto& o : opts) {
    if (std::find(names.begin(), names.end(), std::string_view(o.name)) != names.end()) return &o;
  }
  return nullptr;
}

std::optional<std::string> SingleArg(const Option* opt) {
  if (!opt || opt->args.size() != 1) return std::nullopt;
  return opt->args[0];
}

// MARK / CONNMARK value writes, all as x-mark (value, mask): new = (old & ~mask) ^ value.
// Mirrors libxt_MARK / libxt_CONNMARK option handling.
std::optional<std::pair<uint32_t, uint32_t>> DecodeMarkWrite(const Option& opt) {
  if (opt.args.size() != 1) return std::nullopt;
  const auto mm = ParseMarkMask(opt.args[0]);
  if (!mm) return std::nullopt;
  const auto [value, mask] = *mm;
  if (opt.name == "--set-xmark") return std::make_pair(value, mask);
  if (opt.name == "--set-mark") return std::make_pair(value, mask | value);
  if (opt.args[0].find('/') != std::string::npos) return std::nullopt;
  if (opt.name == "--and-mark") return std::make_pair(0u, ~value);
  if (opt.name == "--or-mark") return std::make_pair(value, value);
  if (opt.name == "--xor-mark") return std::make_pair(value, 0u);
  return std::nullopt;
}

// Decodes a -j/-g target; nullopt when the target or one of its options is not understood.
std::optional<Action> DecodeTarget(const std::string& name, bool is_goto,
                                   const std::vector<Option>& opts, Family family) {
  Action a;
  if (is_goto) {
    if (!opts.empty()) return std::nullopt;
    a.kind = ActionKind::kGoto;
    a.text = name;
    return a;
  }
  if (name == "ACCEPT" || name == "DROP" || name == "RETURN") {
    if (!opts.empty()) return std::nullopt;
    a.kind = name == "ACCEPT" ? ActionKind::kAccept
             : name == "DROP" ? ActionKind::kDrop
                              : ActionKind::kReturn;
    return a;
  }
  if (name == "REJECT") {
    if (!HasOnly(opts, {"--reject-with"})) return std::nullopt;
    a.kind = ActionKind::kReject;
    if (const auto with = SingleArg(FindOption(opts, {"--reject-with"}))) {
      // iptables-save prints the default explicitly; keep "" for it so both spellings compare
      // equal.
      const std::string_view dflt =
          family == Family::kIpv6 ? "icmp6-port-unreachable" : "icmp-port-unreachable";
      if (*with != dflt) a.text = *with;
    }
    return a;
  }
  if (name == "REDIRECT" || name == "MASQUERADE") {
    if (!HasOnly(opts, {"--to-ports", "--to-port"})) return std::nullopt;
    a.kind = name == "REDIRECT" ? ActionKind::kRedirect : ActionKind::kMasquerade;
    if (const auto ports = SingleArg(FindOption(opts, {"--to-ports", "--to-port"}))) {
      const auto range = text::ParsePortRange(*ports);
      if (!range) return std::nullopt;
      a.value = range->first;
      a.value2 = range->second;
    }
    return a;
  }
  if (name == "DNAT" || name == "SNAT") {
    const bool dnat = name == "DNAT";
    const std::string_view to_name = dnat ? "--to-destination" : "--to-source";
    if (!HasOnly(opts, {to_name, "--to"})) return std::nullopt;
    const auto to = SingleArg(FindOption(opts, {to_name, "--to"}));
    if (!to) return std::nullopt;
    a.kind = dnat ? ActionKind::kDnat : ActionKind::kSnat;
    a.text = text::CanonicalAddress(*to).value_or(*to);
    return a;
  }
  if (name == "TPROXY") {
    if (!HasOnly(opts, {"--on-port", "--on-ip", "--tproxy-mark"})) return std::nullopt;
    const auto port = SingleArg(FindOption(opts, {"--on-port"}));
    const auto port_value = port ? ParseU32(*port) : std::nullopt;
    if (!port_value) return std::nullopt;
    a.kind = ActionKind::kTproxy;
    a.value = *port_value;
    if (const auto ip = SingleArg(FindOption(opts, {"--on-ip"}))) {
      a.text = text::CanonicalAddress(*ip).value_or(*ip);
    }
    if (const auto mark = SingleArg(FindOption(opts, {"--tproxy-mark"}))) {
      const auto mm = ParseMarkMask(*mark);
      if (!mm) return std::nullopt;
      a.value2 = mm->first;
      a.value3 = mm->second;
    }
    return a;
  }
  if (name == "MARK") {
    if (opts.size() != 1 || opts[0].negated) return std::nullopt;
    const auto write = DecodeMarkWrite(opts[0]);
    if (!write) return std::nullopt;
    a.kind = ActionKind::kSetMark;
    a.value = write->first;
    a.value2 = write->second;
    return a;
  }
  if (name == "CONNMARK") {
    const Option* save = FindOption(opts, {"--save-mark"});
    const Option* restore = FindOption(opts, {"--restore-mark"});
    if (save || restore) {
      if (!HasOnly(opts, {"--save-mark", "--restore-mark", "--nfmask", "--ctmask", "--mask"}) ||
          (save && restore)) {
        return std::nullopt;
      }
      uint32_t nfmask = kFullMask;
      uint32_t ctmask = kFullMask;
      for (const auto& o : opts) {
        if (o.name == "--save-mark" || o.name == "--restore-mark") continue;
        const auto mask = o.args.size() == 1 ? ParseU32(o.args[0]) : std::nullopt;
        if (!mask) return std::nullopt;
        if (o.name != "--ctmask") nfmask = *mask;
        if (o.name != "--nfmask") ctmask = *mask;
      }
      a.kind = save ? ActionKind::kSaveConnmark : ActionKind::kRestoreConnmark;
      a.value = nfmask;
      a.value2 = ctmask;
      return a;
    }
    if (opts.size() != 1 || opts[0].negated) return std::nullopt;
    const auto write = DecodeMarkWrite(opts[0]);
    if (!write) return std::nullopt;
    a.kind = ActionKind::kSetConnmark;
    a.value = write->first;
    a.value2 = write->second;
    return a;
  }
  if (name == "CT") {
    if (opts.size() != 1 || opts[0].negated) return std::nullopt;
    if (opts[0].name == "--notrack" && opts[0].args.empty()) {
      a.kind = ActionKind::kNotrack;
      return a;
    }
    const auto zone = opts[0].name == "--zone" ? SingleArg(&opts[0]) : std::nullopt;
    const auto zone_value = zone ? ParseU32(*zone) : std::nullopt;
    if (!zone_value) return std::nullopt;
    a.kind = ActionKind::kCtZone;
    a.value = *zone_value;
    return a;
  }
  if (name == "NOTRACK") {
    if (!opts.empty()) return std::nullopt;
    a.kind = ActionKind::kNotrack;
    return a;
  }
  if (name == "LOG") {
    // Only the prefix is kept: level and flags change what is logged, not the packet's fate.
    a.kind = ActionKind::kLog;
    if (const auto prefix = SingleArg(FindOption(opts, {"--log-prefix"}))) a.text = *prefix;
    return a;
  }
  if (std::find(kOpaqueTargets.begin(), kOpaqueTargets.end(), name) != kOpaqueTargets.end() ||
      !opts.empty()) {
    return std::nullopt;
  }
  a.kind = ActionKind::kJump;
  a.text = name;
  return a;
}

bool IsCounterWord(const std::string& w) {
  return w.size() > 2 && w.front() == '[' && w.back() == ']' && w.find(':') != std::string::npos;
}

std::string PolicyName(std::string_view policy) { return text::Lower(policy); }

// Parse state for one iptables text.
class IptablesTextParser {
 public:
  IptablesTextParser(Backend backend, Family family) : backend_(backend), family_(family) {}

  Result<std::vector<Table>> Parse(std::string_view input) {
    size_t line_number = 0;
    size_t start = 0;
    while (start <= input.size()) {
      const size_t end = std::min(input.find('\n', start), input.size());
      std::string_view line = input.substr(start, end - start);
      start = end + 1;
      ++line_number;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
        line.remove_suffix(1);
      }
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      if (line.empty() || line.front() == '#') {
        if (end == input.size()) break;
        continue;
      }
      if (auto err = ParseLine(line, line_number)) return *err;
      if (end == input.size()) break;
    }
    for (auto& table : tables_) SortChains(table);
    return std::move(tables_);
  }

 private:
  std::optional<SourceError> ParseLine(std::string_view line, size_t line_number) {
    if (line.front() == '*') {
      std::string name(line.substr(1));
      name.erase(0, name.find_first_not_of(" \t"));
      if (name.empty()) return text::ParseError(kSource, line_number, "table name missing");
      OpenTable(name);
      return std::nullopt;
    }
    if (!current_) return std::nullopt;  // command log ("iptables-save") and other preamble
    if (line == "COMMIT") {
      current_ = nullptr;
      return std::nullopt;
    }
    if (line.front() == ':') return ParseChainDecl(line, line_number);
    const auto words = text::Tokenize(line, false);
    const std::string& cmd = words[0];
    const auto need_chain = [&]() -> std::optional<SourceError> {
      if (words.size() < 2) return text::ParseError(kSource, line_number, cmd + " needs a chain");
      return std::nullopt;
    };
    if (cmd == "-N" || cmd == "--new-chain" || cmd == "--new") {
      if (auto err = need_chain()) return err;
      GetChain(words[1]);
      return std::nullopt;
    }
    if (cmd == "-A" || cmd == "--append" || cmd == "-I" || cmd == "--insert" || cmd == "-D" ||
        cmd == "--delete") {
      if (auto err = need_chain()) return err;
      return ParseRuleCommand(words, line_number);
    }
    if (cmd == "-F" || cmd == "--flush") {
      for (auto& chain : current_->chains) {
        if (words.size() < 2 || chain.name == words[1]) chain.rules.clear();
      }
      return std::nullopt;
    }
    if (cmd == "-X" || cmd == "--delete-chain") {
      std::erase_if(current_->chains, [&](const Chain& c) {
        return !c.is_base && (words.size() < 2 || c.name == words[1]);
      });
      return std::nullopt;
    }
    if (cmd == "-P" || cmd == "--policy") {
      if (words.size() < 3) return text::ParseError(kSource, line_number, "-P needs a policy");
      GetChain(words[1]).policy = PolicyName(words[2]);
      return std::nullopt;
    }
    if (cmd == "-E" || cmd == "--rename-chain") {
      if (words.size() < 3) return text::ParseError(kSource, line_number, "-E needs two chains");
      GetChain(words[1]).name = words[2];
      return std::nullopt;
    }
    if (cmd == "-Z" || cmd == "--zero") return std::nullopt;
    return text::ParseError(kSource, line_number, "unknown command: " + std::string(line));
  }

  std::optional<SourceError> ParseChainDecl(std::string_view line, size_t line_number) {
    const auto words = text::Tokenize(line.substr(1), false);
    if (words.empty()) return text::ParseError(kSource, line_number, "chain name missing");
    Chain& chain = GetChain(words[0]);
    if (chain.is_base && words.size() > 1 && words[1] != "-") chain.policy = PolicyName(words[1]);
    return std::nullopt;
  }

  std::optional<SourceError> ParseRuleCommand(const std::vector<std::string>& words,
                                              size_t line_number) {
    const std::string& cmd = words[0];
    Chain& chain = GetChain(words[1]);
    size_t spec_start = 2;
    std::optional<uint32_t> position;
    if (spec_start < words.size()) {
      if (auto n = ParseU32(words[spec_start]); n && !IsCounterWord(words[spec_start])) {
        position = *n;
        ++spec_start;
      }
    }
    const bool is_delete = cmd == "-D" || cmd == "--delete";
    if (is_delete && position && spec_start == words.size()) {
      if (*position >= 1 && *position <= chain.rules.size()) {
        chain.rules.erase(chain.rules.begin() + (*position - 1));
      }
      return std::nullopt;
    }
    std::string spec;
    for (size_t i = spec_start; i < words.size(); ++i) {
      spec += (i > spec_start ? " " : "") + QuoteIfNeeded(words[i]);
    }
    auto rule = ParseIptablesRuleSpec(spec, family_);
    if (!rule) return text::ParseError(kSource, line_number, rule.error().message);
    if (is_delete) {
      auto it = std::find_if(chain.rules.begin(), chain.rules.end(), [&](const Rule& r) {
        return r.sem == rule->sem && r.comment == rule->comment;
      });
      if (it != chain.rules.end()) chain.rules.erase(it);
      return std::nullopt;
    }
    if (cmd == "-I" || cmd == "--insert") {
      const uint32_t one_based = position.value_or(1);
      const size_t index = std::min<size_t>(one_based > 0 ? one_based - 1 : 0, chain.rules.size());
      chain.rules.insert(chain.rules.begin() + static_cast<std::ptrdiff_t>(index),
                         std::move(*rule));
    } else {
      chain.rules.push_back(std::move(*rule));
    }
    return std::nullopt;
  }

  static std::string QuoteIfNeeded(const std::string& word) {
    if (!word.empty() && word.find_first_of(" \t\"\\") == std::string::npos) return word;
    std::string out = "\"";
    for (char c : word) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  }

  void OpenTable(const std::string& name) {
    for (auto& t : tables_) {
      if (t.name == name) {
        current_ = &t;
        return;
      }
    }
    Table table;
    table.backend = backend_;
    table.family = family_;
    table.name = name;
    // The kernel has every built-in chain of a table once the table exists; iptables-save prints
    // them all, so restore input and save output describe the same table.
    for (const auto& b : kBuiltinChains) {
      if (b.table == name) table.chains.push_back(MakeBuiltin(b));
    }
    tables_.push_back(std::move(table));
    current_ = &tables_.back();
  }

  static Chain MakeBuiltin(const BuiltinChain& b) {
    Chain chain;
    chain.name = b.chain;
    chain.is_base = true;
    chain.hook = b.hook;
    chain.priority = b.priority;
    chain.type = b.type;
    chain.policy = "accept";
    return chain;
  }

  Chain& GetChain(const std::string& name) {
    for (auto& c : current_->chains) {
      if (c.name == name) return c;
    }
    if (const auto* b = FindBuiltin(current_->name, name)) {
      current_->chains.push_back(MakeBuiltin(*b));
    } else {
      Chain chain;
      chain.name = name;
      current_->chains.push_back(std::move(chain));
    }
    return current_->chains.back();
  }

  // iptables-save order: built-in chains in hook order, then user chains by name.
  static void SortChains(Table& table) {
    const auto rank = [&](const Chain& c) -> size_t {
      for (size_t i = 0; i < kBuiltinChains.size(); ++i) {
        if (kBuiltinChains[i].table == table.name && kBuiltinChains[i].chain == c.name) return i;
      }
      return kBuiltinChains.size();
    };
    std::stable_sort(table.chains.begin(), table.chains.end(), [&](const Chain& a, const Chain& b) {
      const size_t ra = rank(a);
      const size_t rb = rank(b);
      if (ra != rb) return ra < rb;
      return ra == kBuiltinChains.size() && a.name < b.name;
    });
  }

  Backend backend_;
  Family family_;
  std::vector<Table> tables_;
  Table* current_ = nullptr;  // points into tables_; tables_ only grows when current_ is reset
};

}  // namespace

Result<Rule> ParseIptablesRuleSpec(std::string_view spec, Family family) {
  const auto words = text::Tokenize(spec, false);
  Rule rule;
  auto& ms = rule.sem.matches;
  bool negate = false;
  std::optional<uint32_t> protocol;
  const auto missing = [](const std::string& opt) {
    return SourceError{kSource, "option " + opt + " needs an argument", 0};
  };
  size_t i = 0;
  while (i < words.size()) {
    const std::string& w = words[i];
    if (w == "!") {
      negate = true;
      ++i;
      continue;
    }
    if (IsCounterWord(w)) {
      ++i;
      continue;
    }
    if (w == "-c" || w == "--set-counters") {
      i += 3;
      continue;
    }
    const bool takes_arg = w == "-p" || w == "--protocol" || w == "-s" || w == "--source" ||
                           w == "--src" || w == "-d" || w == "--destination" || w == "--dst" ||
                           w == "-i" || w == "--in-interface" || w == "-o" ||
                           w == "--out-interface";
    if (takes_arg) {
      if (i + 1 >= words.size()) return missing(w);
      size_t arg_index = i + 1;
      if (words[arg_index] == "!" && arg_index + 1 < words.size()) {  // old "-s ! addr" syntax
        negate = true;
        ++arg_index;
      }
      const std::string& arg = words[arg_index];
      const std::string verbatim = Join(words, i, arg_index + 1);
      if (w == "-p" || w == "--protocol") {
        const auto proto = text::ProtocolNumber(arg);
        if (text::Lower(arg) == "all" || (proto && *proto == 0 && !negate)) {
          // "-p all" matches every packet: a no-op.
        } else if (proto) {
          ms.push_back(MakeMatch(MatchKind::kProtocol, negate, *proto));
          if (!negate) protocol = *proto;
        } else {
          ms.push_back(Unknown((negate ? "! " : "") + verbatim));
        }
      } else if (w == "-i" || w == "--in-interface" || w == "-o" || w == "--out-interface") {
        const bool in = w == "-i" || w == "--in-interface";
        ms.push_back(MakeMatch(in ? MatchKind::kInIface : MatchKind::kOutIface, negate, 0, 0, arg));
      } else {
        const bool src = w == "-s" || w == "--source" || w == "--src";
        if (const auto prefix = text::CanonicalPrefix(arg)) {
          ms.push_back(
              MakeMatch(src ? MatchKind::kSrcAddr : MatchKind::kDstAddr, negate, 0, 0, *prefix));
        } else {
          ms.push_back(Unknown((negate ? "! " : "") + verbatim));
        }
      }
      negate = false;
      i = arg_index + 1;
      continue;
    }
    if (w == "-f" || w == "--fragment") {
      ms.push_back(Unknown(negate ? "! -f" : "-f"));
      negate = false;
      ++i;
      continue;
    }
    if (w == "-m" || w == "--match") {
      if (i + 1 >= words.size()) return missing(w);
      const std::string module = words[i + 1];
      i += 2;
      const auto options = ReadOptions(words, &i);
      if (options.empty() && module != "tcp" && module != "udp" && module != "comment") {
        ms.push_back(Unknown("-m " + module));
      }
      for (const auto& opt : options) {
        if (!DecodeMatchOption(module, opt, rule))
          ms.push_back(Unknown("-m " + module + " " + opt.text));
      }
      negate = false;
      continue;
    }
    if (w == "-j" || w == "--jump" || w == "-g" || w == "--goto") {
      if (i + 1 >= words.size()) return missing(w);
      const size_t start = i;
      const std::string name = words[i + 1];
      i += 2;
      const auto options = ReadOptions(words, &i);
      const auto action = DecodeTarget(name, w == "-g" || w == "--goto", options, family);
      rule.sem.action =
          action.value_or(Action{ActionKind::kUnknown, 0, 0, 0, Join(words, start, i)});
      negate = false;
      continue;
    }
    if (IsOptionStart(w)) {
      // Extension options without "-m": iptables loads tcp/udp implicitly after "-p tcp|udp".
      const auto options = ReadOptions(words, &i);
      if (options.empty()) {  // a generic option we do not decode
        ms.push_back(Unknown(w));
        ++i;
        continue;
      }
      const std::string implicit = protocol == 6 ? "tcp" : protocol == 17 ? "udp" : "";
      for (const auto& opt : options) {
        Option effective = opt;
        effective.negated = effective.negated || negate;
        negate = false;
        if (implicit.empty() || !DecodeMatchOption(implicit, effective, rule)) {
          ms.push_back(Unknown((opt.negated || !effective.negated ? "" : "! ") + effective.text));
        }
      }
      continue;
    }
    ms.push_back(Unknown(w));
    ++i;
  }
  Canonicalize(rule.sem);
  return rule;
}

Result<std::vector<Table>> ParseIptablesText(std::string_view input, Backend backend,
                                             Family family) {
  IptablesTextParser parser(backend, family);
  return parser.Parse(input);
}

std::string RenderIptablesRestore(const std::vector<Table>& tables) {
  std::string out;
  for (const auto& table : tables) {
    out += "*" + table.name + "\n";
    for (const auto& chain : table.chains) {
      const std::string policy =
          chain.is_base ? text::Upper(chain.policy.empty() ? "accept" : chain.policy) : "-";
      out += ":" + chain.name + " " + policy + " [0:0]\n";
    }
    for (const auto& chain : table.chains) {
      for (const auto& rule : chain.rules) {
        // Whatever the table's origin, restore input is iptables syntax.
        out += RenderRule(table.backend == Backend::kNft ? Backend::kIptablesNft : table.backend,
                          table.family, chain.name, rule);
        out += '\n';
      }
    }
    out += "COMMIT\n";
  }
  return out;
}

}  // namespace ad
