// nft scripts ("add table/chain/rule/set/element") and "nft list ruleset" blocks -> normalized
// Tables, and back.
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
using Words = std::vector<std::string>;

constexpr uint32_t kFullMask = 0xffffffff;
constexpr SourceKind kSource = SourceKind::kNftText;

std::optional<Family> FamilyFromName(std::string_view name) {
  if (name == "ip") return Family::kIpv4;
  if (name == "ip6") return Family::kIpv6;
  if (name == "inet") return Family::kInet;
  if (name == "arp" || name == "bridge" || name == "netdev") return Family::kOther;
  return std::nullopt;
}

// Named chain priorities of the ip/ip6/inet families (nft(8), "CHAINS").
std::optional<int32_t> NamedPriority(std::string_view name) {
  if (name == "raw") return -300;
  if (name == "mangle") return -150;
  if (name == "dstnat") return -100;
  if (name == "filter") return 0;
  if (name == "security") return 50;
  if (name == "srcnat") return 100;
  return std::nullopt;
}

std::optional<int32_t> ParseI32(std::string_view s) {
  const bool negative = !s.empty() && s.front() == '-';
  if (negative) s.remove_prefix(1);
  const auto magnitude = ParseU32(s);
  if (!magnitude || *magnitude > 0x7fffffffu) return std::nullopt;
  return negative ? -static_cast<int32_t>(*magnitude) : static_cast<int32_t>(*magnitude);
}

// Mark arithmetic as nft's bitwise expression keeps it: result = (source & and_mask) ^ xor_value.
struct MarkExpr {
  enum class Source { kConstant, kPacketMark, kConnMark };
  Source source = Source::kConstant;
  uint32_t and_mask = kFullMask;
  uint32_t xor_value = 0;
  std::vector<char> ops;  // '&', '|', '^' in order, to recognise libxtables translations
};

class RuleParser {
 public:
  explicit RuleParser(const Words& words) : w_(words) {}

  Result<Rule> Parse() {
    while (i_ < w_.size()) {
      const std::string& word = w_[i_];
      if (word == "#") {  // "# handle N" as printed by nft -a
        for (size_t k = i_ + 1; k + 1 < w_.size(); ++k) {
          if (w_[k] == "handle") rule_.handle = ParseU32(w_[k + 1]).value_or(0);
        }
        break;
      }
      const size_t start = i_;
      if (ParseStatement()) {
        FlushUnknown();
        continue;
      }
      i_ = start;
      unknown_.push_back(w_[i_++]);
    }
    FlushUnknown();
    rule_.sem.action = ComposeAction();
    Canonicalize(rule_.sem);
    return std::move(rule_);
  }

 private:
  bool Peek(std::string_view word, size_t ahead = 0) const {
    return i_ + ahead < w_.size() && w_[i_ + ahead] == word;
  }
  bool HasWord(size_t ahead = 0) const { return i_ + ahead < w_.size(); }
  const std::string& Next() { return w_[i_++]; }

  void FlushUnknown() {
    if (unknown_.empty()) return;
    rule_.sem.matches.push_back(
        Match{MatchKind::kUnknown, false, 0, 0, Join(unknown_, 0, unknown_.size())});
    unknown_.clear();
  }

  void AddMatch(MatchKind kind, bool negated, uint32_t value = 0, uint32_t value2 = 0,
                std::string text = {}) {
    rule_.sem.matches.push_back(Match{kind, negated, value, value2, std::move(text)});
  }

  // Relational operator before a value: "==", "!=", "eq", "ne" or none; nullopt for <, > etc.
  std::optional<bool> ReadOp() {
    if (!HasWord()) return std::nullopt;
    const std::string& op = w_[i_];
    if (op == "==" || op == "eq") {
      ++i_;
      return false;
    }
    if (op == "!=" || op == "ne") {
      ++i_;
      return true;
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=" || op == "lt" || op == "gt" ||
        op == "le" || op == "ge") {
      return std::nullopt;
    }
    return false;
  }

  // Reads "{ ... }" (anonymous set) as text, or nullopt if the next word does not open one.
  std::optional<std::string> ReadBraces() {
    if (!Peek("{")) return std::nullopt;
    const size_t start = i_;
    int depth = 0;
    while (i_ < w_.size()) {
      const std::string& word = w_[i_++];
      if (word == "{") ++depth;
      if (word == "}" && --depth == 0) break;
    }
    return Join(w_, start, i_);
  }

  // "{ 80, 1000-2000 }" -> {"80", "1000-2000"} in value order, as the nft reader inlines an
  // anonymous port set; nullopt (nothing consumed worth keeping) for anything else.
  std::optional<std::vector<std::string>> ReadPortSet() {
    const auto braces = ReadBraces();
    if (!braces) return std::nullopt;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    std::string item;
    for (char c : braces->substr(1, braces->size() - 2) + ",") {
      if (c == ' ') continue;
      if (c != ',') {
        item += c;
        continue;
      }
      if (item.empty()) continue;
      const auto range = text::ParsePortRange(item);
      if (!range) return std::nullopt;
      ranges.push_back(*range);
      item.clear();
    }
    if (ranges.empty()) return std::nullopt;
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::string> elements;
    for (const auto& [first, last] : ranges) {
      elements.push_back(first == last ? std::to_string(first)
                                       : std::to_string(first) + "-" + std::to_string(last));
    }
    return elements;
  }

  // Statement dispatch: true when words were consumed as a known statement.
  bool ParseStatement() {
    stmt_start_ = i_;
    const std::string& word = w_[i_];
    if (word == "counter") {
      ++i_;
      rule_.has_counter = true;
      if (Peek("packets") && Peek("bytes", 2)) i_ += 4;
      return true;
    }
    if (word == "comment") {
      ++i_;
      if (!HasWord()) return false;
      rule_.comment = Next();
      return true;
    }
    if (word == "meta") {
      ++i_;
      if (!HasWord()) return false;
      return ParseMetaKey(Next());
    }
    if (word == "mark" || word == "skuid" || word == "skgid" || word == "iifname" ||
        word == "oifname" || word == "iif" || word == "oif" || word == "l4proto") {
      return ParseMetaKey(Next());
    }
    if (word == "ct") return ParseCt();
    if (word == "ip" || word == "ip6") return ParseIp();
    if (word == "tcp" || word == "udp" || word == "sctp" || word == "th") return ParseTransport();
    if (word == "fib") return ParseFib();
    if (word == "xt") {
      if (!HasWord(2)) return false;
      const std::string text = Join(w_, i_, i_ + 3);
      const bool is_target = w_[i_ + 1] == "target";
      i_ += 3;
      if (is_target) {
        AddEffect(Action{ActionKind::kUnknown, 0, 0, 0, text}, text);
      } else {
        AddMatch(MatchKind::kUnknown, false, 0, 0, text);
      }
      return true;
    }
    return ParseActionStatement();
  }

  bool ParseMetaKey(const std::string& key) {
    if (key == "mark") {
      if (Peek("set")) {
        ++i_;
        return ParseMarkSet(/*conntrack=*/false);
      }
      return ParseMarkMatch(MatchKind::kMark);
    }
    const auto negated = ReadOp();
    if (!negated || !HasWord() || w_[i_].empty()) return false;
    const std::string& value = Next();
    if (value.size() > 1 && value.front() == '@') {
      // A named set keyed on this meta field (see "Set lookups" in model/rule.h).
      if (key != "l4proto" && key != "skuid" && key != "skgid" && key != "iifname" &&
          key != "oifname" && key != "iif" && key != "oif") {
        return false;
      }
      AddMatch(MatchKind::kSet, *negated, 0, 0, value.substr(1) + " " + key);
      return true;
    }
    if (key == "l4proto") {
      const auto proto = text::ProtocolNumber(value);
      if (!proto) return false;
      AddMatch(MatchKind::kProtocol, *negated, *proto);
      return true;
    }
    if (key == "skuid" || key == "skgid") {
      const auto id = ParseU32(value);
      if (!id) return false;
      AddMatch(key == "skuid" ? MatchKind::kSocketUid : MatchKind::kSocketGid, *negated, *id);
      return true;
    }
    if (key == "iifname" || key == "oifname" || key == "iif" || key == "oif") {
      if (value == "{" || value.front() == '@') return false;
      std::string name = value;
      if (name.ends_with('*')) name.back() = '+';  // nft wildcard -> iptables spelling
      const bool in = key == "iifname" || key == "iif";
      AddMatch(in ? MatchKind::kInIface : MatchKind::kOutIface, *negated, 0, 0, name);
      return true;
    }
    return false;
  }

  // "[and|& MASK] [==|!=] VALUE" after "mark" / "ct mark".
  bool ParseMarkMatch(MatchKind kind) {
    const size_t start = i_;
    if (const auto negated = ReadOp();
        negated && HasWord() && w_[i_].size() > 1 && w_[i_].front() == '@') {
      const std::string field = kind == MatchKind::kMark ? "mark" : "ctmark";
      AddMatch(MatchKind::kSet, *negated, 0, 0, Next().substr(1) + " " + field);
      return true;
    }
    i_ = start;
    uint32_t mask = kFullMask;
    if (Peek("and") || Peek("&")) {
      ++i_;
      if (!HasWord()) return false;
      const auto m = ParseU32(Next());
      if (!m) return false;
      mask = *m;
    }
    const auto negated = ReadOp();
    if (!negated || !HasWord()) return false;
    const auto value = ParseU32(Next());
    if (!value) return false;
    AddMatch(kind, *negated, *value, mask);
    return true;
  }

  std::optional<MarkExpr> ReadMarkExpr() {
    MarkExpr expr;
    if (!HasWord()) return std::nullopt;
    if (Peek("ct") && Peek("mark", 1)) {
      expr.source = MarkExpr::Source::kConnMark;
      i_ += 2;
    } else if (Peek("meta") && Peek("mark", 1)) {
      expr.source = MarkExpr::Source::kPacketMark;
      i_ += 2;
    } else if (Peek("mark")) {
      expr.source = MarkExpr::Source::kPacketMark;
      ++i_;
    } else {
      const auto value = ParseU32(w_[i_]);
      if (!value) return std::nullopt;
      ++i_;
      expr.and_mask = 0;
      expr.xor_value = *value;
      return expr;
    }
    while (HasWord(1)) {
      const std::string& op = w_[i_];
      char kind = 0;
      if (op == "&" || op == "and") kind = '&';
      if (op == "|" || op == "or") kind = '|';
      if (op == "^" || op == "xor") kind = '^';
      const auto operand = kind ? ParseU32(w_[i_ + 1]) : std::nullopt;
      if (!operand) break;
      i_ += 2;
      expr.ops.push_back(kind);
      if (kind == '&') {
        expr.and_mask &= *operand;
        expr.xor_value &= *operand;
      } else if (kind == '|') {
        expr.and_mask &= ~*operand;
        expr.xor_value |= *operand;
      } else {
        expr.xor_value ^= *operand;
      }
    }
    return expr;
  }

  // "meta mark set EXPR" / "ct mark set EXPR" (the words before EXPR are already consumed).
  bool ParseMarkSet(bool conntrack) {
    const size_t start = stmt_start_;
    const auto expr = ReadMarkExpr();
    if (!expr) return false;
    Action a;
    using Source = MarkExpr::Source;
    const bool plain = expr->ops.empty();
    if (expr->source == Source::kConstant) {
      a.kind = conntrack ? ActionKind::kSetConnmark : ActionKind::kSetMark;
      a.value = expr->xor_value;
      a.value2 = kFullMask;
    } else if ((expr->source == Source::kConnMark) == conntrack) {
      a.kind = conntrack ? ActionKind::kSetConnmark : ActionKind::kSetMark;
      a.value = expr->xor_value;
      a.value2 = ~expr->and_mask;
      // libxtables translates CONNMARK/MARK --set-xmark V/M as "... xor V and ~M" (nft list of
      // an iptables-nft rule); the kernel runs the x_tables target, i.e. (old & ~M) ^ V.
      if (expr->ops == std::vector<char>{'^', '&'}) {
        const size_t and_operand = i_ - 1;
        const size_t xor_operand = i_ - 3;
        a.value = ParseU32(w_[xor_operand]).value_or(0);
        a.value2 = ~ParseU32(w_[and_operand]).value_or(kFullMask);
      }
    } else if (plain) {
      // The other register copied whole: CONNMARK --restore-mark / --save-mark with full masks.
      a.kind = conntrack ? ActionKind::kSaveConnmark : ActionKind::kRestoreConnmark;
      a.value = kFullMask;
      a.value2 = kFullMask;
    } else {
      a.kind = ActionKind::kUnknown;
      a.text = Join(w_, start, i_);
    }
    AddEffect(a, Join(w_, start, i_));
    return true;
  }

  bool ParseCt() {
    const size_t start = i_;
    ++i_;
    if (!HasWord()) return false;
    const std::string key = Next();
    if (key == "mark") {
      if (Peek("set")) {
        ++i_;
        return ParseMarkSet(/*conntrack=*/true);
      }
      return ParseMarkMatch(MatchKind::kConnmark);
    }
    if (key == "zone" && Peek("set")) {
      ++i_;
      if (!HasWord()) return false;
      const auto zone = ParseU32(Next());
      if (!zone) return false;
      AddEffect(Action{ActionKind::kCtZone, *zone, 0, 0, {}}, Join(w_, start, i_));
      return true;
    }
    if (key == "state") {
      const auto negated = ReadOp();
      if (!negated || !HasWord()) return false;
      std::string list;
      if (const auto braces = ReadBraces()) {
        for (char c : *braces) {
          if (c != '{' && c != '}' && c != ' ') list += c;
        }
      } else {
        list = Next();
        while (Peek("|") && HasWord(1)) {  // nft list prints "established | related"
          list += "," + w_[i_ + 1];
          i_ += 2;
        }
      }
      const auto states = text::ParseCtStates(list);
      if (!states) return false;
      AddMatch(MatchKind::kCtState, *negated, *states);
      return true;
    }
    return false;
  }

  bool ParseIp() {
    const bool v6 = w_[i_] == "ip6";
    ++i_;
    if (!HasWord()) return false;
    const std::string field = Next();
    const auto negated = ReadOp();
    if (!negated || !HasWord()) return false;
    if (field == "protocol" || field == "nexthdr") {
      const auto proto = text::ProtocolNumber(Next());
      if (!proto) return false;
      AddMatch(MatchKind::kProtocol, *negated, *proto);
      return true;
    }
    if (field != "saddr" && field != "daddr") return false;
    const bool src = field == "saddr";
    const std::string& value = Next();
    if (value.size() > 1 && value.front() == '@') {
      // An inet-table "ip daddr @set" also implies nfproto ipv4; the set's key type says so.
      AddMatch(MatchKind::kSet, *negated, 0, 0, value.substr(1) + (src ? " src" : " dst"));
      return true;
    }
    const auto prefix = text::CanonicalPrefix(value);
    if (!prefix || (prefix->find(':') != std::string::npos) != v6) return false;
    AddMatch(src ? MatchKind::kSrcAddr : MatchKind::kDstAddr, *negated, 0, 0, *prefix);
    return true;
  }

  bool ParseTransport() {
    const std::string proto_name = Next();
    if (!HasWord()) return false;
    const std::string field = Next();
    // Other header fields (tcp flags ...) stay undecoded, as one kUnknown with their values.
    if (field != "dport" && field != "sport") return false;
    if (proto_name != "th") {
      // "tcp dport X" carries a payload dependency on the protocol: match it explicitly.
      AddMatch(MatchKind::kProtocol, false, *text::ProtocolNumber(proto_name));
    }
    const size_t value_start = i_;
    const auto negated = ReadOp();
    if (negated && HasWord() && w_[i_].size() > 1 && w_[i_].front() == '@') {
      AddMatch(MatchKind::kSet, *negated, 0, 0, w_[i_++].substr(1) + " " + field);
      return true;
    }
    if (negated && Peek("{")) {
      const size_t braces_start = i_;
      if (auto elements = ReadPortSet()) {
        // The model of an anonymous set (see "Set lookups" in model/rule.h).
        Match m{MatchKind::kSet, *negated, 0, 0, std::string(kInlineSet) + " " + field};
        m.elements = std::move(*elements);
        rule_.sem.matches.push_back(std::move(m));
        return true;
      }
      i_ = braces_start;
    }
    std::optional<std::pair<uint32_t, uint32_t>> range;
    if (negated && HasWord() && !Peek("{")) range = text::ParsePortRange(w_[i_]);
    if (!range) {
      i_ = value_start;
      unknown_.push_back(proto_name);
      unknown_.push_back(field);
      if (!negated || !HasWord()) return true;
      if (Peek("!=") || Peek("==") || Peek("eq") || Peek("ne")) unknown_.push_back(Next());
      const size_t set_start = i_;
      if (ReadBraces()) {
        unknown_.insert(unknown_.end(), w_.begin() + static_cast<std::ptrdiff_t>(set_start),
                        w_.begin() + static_cast<std::ptrdiff_t>(i_));
      } else if (HasWord()) {
        unknown_.push_back(Next());
      }
      FlushUnknown();
      return true;
    }
    ++i_;
    AddMatch(field == "dport" ? MatchKind::kDstPort : MatchKind::kSrcPort, *negated, range->first,
             range->second);
    return true;
  }

  bool ParseFib() {
    ++i_;
    if (!HasWord(1)) return false;
    const std::string dir = Next();
    if ((dir != "saddr" && dir != "daddr") || !Peek("type")) return false;
    ++i_;
    const auto negated = ReadOp();
    if (!negated || !HasWord() || Peek("{")) return false;
    AddMatch(MatchKind::kAddrType, *negated, 0, 0,
             std::string(dir == "saddr" ? "src " : "dst ") + text::Upper(Next()));
    return true;
  }

  // ":P", ":P-Q", "P" -> port range.
  static std::optional<std::pair<uint32_t, uint32_t>> PortSpec(std::string_view spec) {
    if (!spec.empty() && spec.front() == ':') spec.remove_prefix(1);
    return text::ParsePortRange(spec);
  }

  bool ParseActionStatement() {
    const size_t start = i_;
    const std::string word = Next();
    const auto verdict = [&](ActionKind kind, std::string target = {}) {
      SetVerdict(Action{kind, 0, 0, 0, std::move(target)}, Join(w_, start, i_));
      return true;
    };
    if (word == "accept") return verdict(ActionKind::kAccept);
    if (word == "drop") return verdict(ActionKind::kDrop);
    if (word == "return") return verdict(ActionKind::kReturn);
    if (word == "continue") return verdict(ActionKind::kContinue);
    if (word == "jump" || word == "goto") {
      if (!HasWord()) return false;
      const std::string target = Next();
      return verdict(word == "jump" ? ActionKind::kJump : ActionKind::kGoto, target);
    }
    if (word == "reject") {
      if (Peek("with")) {
        // "with icmp[x|v6] type X" or "with tcp reset"
        i_ = std::min(w_.size(), i_ + (Peek("tcp", 1) ? 3 : 4));
        const std::string text = Join(w_, start, i_);
        SetVerdict(Action{ActionKind::kReject, 0, 0, 0, text.substr(text.find("with") + 5)}, text);
        return true;
      }
      return verdict(ActionKind::kReject);
    }
    if (word == "redirect" || word == "masquerade") {
      Action a{word == "redirect" ? ActionKind::kRedirect : ActionKind::kMasquerade, 0, 0, 0, {}};
      if (Peek("to")) {
        ++i_;
        if (!HasWord()) return false;
        const auto range = PortSpec(Next());
        if (!range) return false;
        a.value = range->first;
        a.value2 = range->second;
      }
      AddEffect(a, Join(w_, start, i_));
      return true;
    }
    if (word == "snat" || word == "dnat") {
      if (Peek("ip") || Peek("ip6")) ++i_;
      if (!Peek("to") || !HasWord(1)) return false;
      ++i_;
      const std::string to = Next();
      Action a{word == "snat" ? ActionKind::kSnat : ActionKind::kDnat, 0, 0, 0,
               text::CanonicalAddress(to).value_or(to)};
      AddEffect(a, Join(w_, start, i_));
      return true;
    }
    if (word == "tproxy") {
      if (Peek("ip") || Peek("ip6")) ++i_;
      if (!Peek("to") || !HasWord(1)) return false;
      ++i_;
      const std::string to = Next();
      if (to.empty()) return false;
      Action a{ActionKind::kTproxy, 0, 0, 0, {}};
      // "[addr]:port", "addr:port", ":port" or a bare address.
      std::string addr = to;
      std::string port;
      if (to.front() == '[') {
        const auto close = to.find(']');
        if (close == std::string::npos) return false;
        addr = to.substr(1, close - 1);
        if (close + 1 < to.size() && to[close + 1] == ':') port = to.substr(close + 2);
      } else if (std::count(to.begin(), to.end(), ':') == 1) {
        addr = to.substr(0, to.find(':'));
        port = to.substr(to.find(':') + 1);
      }
      if (!addr.empty()) {
        const auto canonical = text::CanonicalAddress(addr);
        if (!canonical) return false;
        a.text = *canonical;
      }
      if (!port.empty()) {
        const auto p = ParseU32(port);
        if (!p) return false;
        a.value = *p;
      }
      AddEffect(a, Join(w_, start, i_));
      return true;
    }
    if (word == "notrack") {
      AddEffect(Action{ActionKind::kNotrack, 0, 0, 0, {}}, Join(w_, start, i_));
      return true;
    }
    if (word == "log") {
      Action a{ActionKind::kLog, 0, 0, 0, {}};
      while (HasWord(1) && (Peek("prefix") || Peek("level") || Peek("group") || Peek("snaplen") ||
                            Peek("queue-threshold") || Peek("flags"))) {
        if (Peek("prefix")) a.text = w_[i_ + 1];
        i_ += 2;
      }
      AddEffect(a, Join(w_, start, i_));
      return true;
    }
    return false;
  }

  void AddEffect(Action a, std::string text) {
    effects_.push_back(std::move(a));
    action_text_.push_back(std::move(text));
  }
  void SetVerdict(Action a, std::string text) {
    verdict_ = std::move(a);
    action_text_.push_back(std::move(text));
  }

  // One Action per rule: a lone statement or verdict maps directly; nft's TPROXY idiom
  // "tproxy to :P [meta mark set M] accept" is the x_tables TPROXY target; anything else that
  // combines several statements is kept as text.
  Action ComposeAction() {
    if (effects_.empty()) return verdict_.value_or(Action{});
    if (effects_.front().kind == ActionKind::kTproxy && effects_.size() <= 2 &&
        (!verdict_ || verdict_->kind == ActionKind::kAccept)) {
      Action tproxy = effects_.front();
      if (effects_.size() == 2) {
        if (effects_[1].kind != ActionKind::kSetMark) return UnknownAction();
        tproxy.value2 = effects_[1].value;
        tproxy.value3 = effects_[1].value2;
      }
      return tproxy;
    }
    if (effects_.size() == 1 && !verdict_) return effects_.front();
    return UnknownAction();
  }

  Action UnknownAction() const {
    return Action{ActionKind::kUnknown, 0, 0, 0, Join(action_text_, 0, action_text_.size())};
  }

  const Words& w_;
  size_t i_ = 0;
  size_t stmt_start_ = 0;  // first word of the statement being parsed
  Rule rule_;
  Words unknown_;
  std::vector<Action> effects_;
  std::optional<Action> verdict_;
  Words action_text_;
};

// Builds Tables from nft scripts and "nft list" block text.
class NftTextParser {
 public:
  Result<std::vector<Table>> Parse(std::string_view input) {
    size_t line_number = 0;
    size_t start = 0;
    while (start < input.size()) {
      const size_t end = std::min(input.find('\n', start), input.size());
      const std::string_view line = input.substr(start, end - start);
      start = end + 1;
      ++line_number;
      const Words words = text::Tokenize(line, true);
      if (words.empty() || words[0].front() == '#') continue;
      if (auto err = ParseLine(words, line_number)) return *err;
    }
    return std::move(tables_);
  }

 private:
  enum class Block { kTable, kChain, kSet };

  std::optional<SourceError> Error(size_t line_number, std::string message) const {
    return text::ParseError(kSource, line_number, message);
  }

  std::optional<SourceError> ParseLine(const Words& words, size_t line_number) {
    if (in_elements_) return ReadElements(words, 0);
    if (words[0] == "}") {
      if (!blocks_.empty()) blocks_.pop_back();
      return std::nullopt;
    }
    if (blocks_.empty()) return ParseTopLevel(words, line_number);
    switch (blocks_.back()) {
      case Block::kTable:
        return ParseInTable(words);
      case Block::kChain:
        return ParseInChain(words, line_number);
      case Block::kSet:
        return ParseSetBody(words, 0);
    }
    return std::nullopt;
  }

  std::optional<SourceError> ParseTopLevel(const Words& words, size_t line_number) {
    const std::string& verb = words[0];
    if (verb == "table") {  // block syntax: "table inet name {"
      size_t i = 1;
      const Family family = ReadFamily(words, &i);
      if (i >= words.size()) return Error(line_number, "table name missing");
      table_ = &GetTable(family, words[i]);
      if (words.back() == "{") blocks_.push_back(Block::kTable);
      return std::nullopt;
    }
    if (verb == "define" || verb == "include" || verb == "list") return std::nullopt;
    if (verb != "add" && verb != "create" && verb != "insert" && verb != "replace" &&
        verb != "flush" && verb != "delete" && verb != "destroy") {
      return Error(line_number, "unknown command: " + verb);
    }
    if (words.size() < 2) return Error(line_number, verb + " needs an object");
    const std::string& object = words[1];
    if (object == "ruleset") {
      if (verb == "flush") tables_.clear();
      return std::nullopt;
    }
    size_t i = 2;
    const Family family = ReadFamily(words, &i);
    if (i >= words.size()) return Error(line_number, object + " name missing");
    if (object == "table") {
      if (verb == "delete" || verb == "destroy") {
        std::erase_if(tables_,
                      [&](const Table& t) { return t.family == family && t.name == words[i]; });
        return std::nullopt;
      }
      Table& table = GetTable(family, words[i]);
      if (verb == "flush") {
        for (auto& chain : table.chains) chain.rules.clear();
      }
      return std::nullopt;
    }
    if (i + 1 >= words.size()) return Error(line_number, object + " needs a table and a name");
    Table& table = GetTable(family, words[i]);
    const std::string& name = words[i + 1];
    i += 2;
    if (object == "chain") {
      if (verb == "delete" || verb == "destroy") {
        std::erase_if(table.chains, [&](const Chain& c) { return c.name == name; });
        return std::nullopt;
      }
      Chain& chain = GetChain(table, name);
      if (verb == "flush") chain.rules.clear();
      if (i < words.size() && words[i] == "{") ParseChainSpec(words, i + 1, chain);
      return std::nullopt;
    }
    if (object == "rule") return AddRule(verb, table, name, words, i, line_number);
    if (object == "set" || object == "map") {
      NftSet& set = GetSet(table, name);
      if (verb == "flush") set.elements.clear();
      if (verb == "delete" || verb == "destroy") {
        std::erase_if(table.sets, [&](const NftSet& s) { return s.name == name; });
        return std::nullopt;
      }
      if (i < words.size() && words[i] == "{") {
        set_ = &set;
        blocks_.push_back(Block::kSet);
        return ParseSetBody(words, i + 1);
      }
      return std::nullopt;
    }
    if (object == "element") {
      set_ = &GetSet(table, name);
      if (i < words.size() && words[i] == "{") {
        removing_elements_ = verb == "delete" || verb == "destroy";
        in_elements_ = true;
        return ReadElements(words, i + 1);
      }
      return std::nullopt;
    }
    return std::nullopt;  // counters, quotas, flowtables ... carry no rule meaning for us
  }

  std::optional<SourceError> AddRule(const std::string& verb, Table& table,
                                     const std::string& chain_name, const Words& words, size_t i,
                                     size_t line_number) {
    Chain& chain = GetChain(table, chain_name);
    std::optional<size_t> index;
    if (i + 1 < words.size() &&
        (words[i] == "index" || words[i] == "position" || words[i] == "handle")) {
      if (words[i] == "index") index = ParseU32(words[i + 1]);
      i += 2;
    }
    const Words stmts(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
    auto rule = RuleParser(stmts).Parse();
    if (!rule) return Error(line_number, rule.error().message);
    size_t at = chain.rules.size();
    if (verb == "insert") at = index ? std::min(*index, chain.rules.size()) : 0;
    if (verb == "add" && index) at = std::min(*index + 1, chain.rules.size());
    if (verb == "replace" && index && *index < chain.rules.size()) {
      chain.rules[*index] = std::move(*rule);
      return std::nullopt;
    }
    chain.rules.insert(chain.rules.begin() + static_cast<std::ptrdiff_t>(at), std::move(*rule));
    return std::nullopt;
  }

  std::optional<SourceError> ParseInTable(const Words& words) {
    if (words.size() < 2) return std::nullopt;  // "flags dormant" and the like
    if (words[0] == "chain") {
      chain_ = &GetChain(*table_, words[1]);
      if (words.back() == "{") blocks_.push_back(Block::kChain);
      return std::nullopt;
    }
    if (words[0] == "set" || words[0] == "map") {
      set_ = &GetSet(*table_, words[1]);
      if (words.back() == "{") blocks_.push_back(Block::kSet);
      return std::nullopt;
    }
    if (words.back() == "{") blocks_.push_back(Block::kTable);  // flowtable etc.: skip its body
    return std::nullopt;
  }

  std::optional<SourceError> ParseInChain(const Words& words, size_t line_number) {
    if (words[0] == "type" || words[0] == "policy") {
      ParseChainSpec(words, 0, *chain_);
      return std::nullopt;
    }
    if (words[0] == "comment" && words.size() == 2) return std::nullopt;
    auto rule = RuleParser(words).Parse();
    if (!rule) return Error(line_number, rule.error().message);
    chain_->rules.push_back(std::move(*rule));
    return std::nullopt;
  }

  // "type T hook H [device D] priority P ; policy Q ;" (with or without braces around it).
  static void ParseChainSpec(const Words& words, size_t i, Chain& chain) {
    while (i < words.size()) {
      const std::string& key = words[i++];
      if (i >= words.size()) break;
      if (key == "type") {
        chain.type = words[i++];
        chain.is_base = true;
        if (chain.policy.empty()) chain.policy = "accept";
      } else if (key == "hook") {
        chain.hook = words[i++];
      } else if (key == "device") {
        ++i;
      } else if (key == "priority") {
        const std::string& base = words[i++];
        int32_t priority = NamedPriority(base).value_or(ParseI32(base).value_or(0));
        if (i + 1 < words.size() && (words[i] == "+" || words[i] == "-")) {
          const int32_t offset = ParseI32(words[i + 1]).value_or(0);
          priority += words[i] == "+" ? offset : -offset;
          i += 2;
        }
        chain.priority = priority;
      } else if (key == "policy") {
        chain.policy = text::Lower(words[i++]);
      }
    }
  }

  // Set body words: "type X", "flags ...", "comment "x"", "elements = { ... }", ";" separators.
  std::optional<SourceError> ParseSetBody(const Words& words, size_t i) {
    while (i < words.size()) {
      const std::string& key = words[i++];
      if (key == "}") {
        if (!blocks_.empty()) blocks_.pop_back();
        return std::nullopt;
      }
      if (key == "type" || key == "typeof") {
        std::string type;
        while (i < words.size() && words[i] != ";" && words[i] != "}") {
          type += (type.empty() ? "" : " ") + words[i++];
        }
        // A map's "type K : V" keeps V apart, as the nft reader does.
        const size_t colon = type.find(" : ");
        set_->key_type = type.substr(0, colon);
        if (colon != std::string::npos) set_->data_type = type.substr(colon + 3);
      } else if (key == "flags") {
        while (i < words.size() && words[i] != ";" && words[i] != "}") {
          // "flags constant,interval" may arrive as one word or several.
          const std::string flags = "," + words[i++] + ",";
          if (flags.find(",interval,") != std::string::npos) set_->interval = true;
        }
      } else if (key == "comment" && i < words.size()) {
        set_->comment = words[i++];
      } else if (key == "elements") {
        if (i < words.size() && words[i] == "=") ++i;
        if (i < words.size() && words[i] == "{") {
          in_elements_ = true;
          removing_elements_ = false;
          return ReadElements(words, i + 1);
        }
      }
    }
    return std::nullopt;
  }

  // Element list up to "}", possibly spread over several lines.
  std::optional<SourceError> ReadElements(const Words& words, size_t i) {
    while (i < words.size()) {
      std::string word = words[i++];
      if (word == "}") {
        in_elements_ = false;
        // A trailing "}" closes the enclosing one-line "add set ... { ... }" body, if any.
        return i < words.size() ? ParseSetBody(words, i) : std::nullopt;
      }
      if (word == "comment" || word == "timeout" || word == "expires") {
        ++i;
        continue;
      }
      while (!word.empty() && word.back() == ',') word.pop_back();
      if (word.empty()) continue;
      const std::string element = text::CanonicalAddress(word).value_or(word);
      auto& elems = set_->elements;
      const auto it = std::find(elems.begin(), elems.end(), element);
      if (removing_elements_) {
        if (it != elems.end()) elems.erase(it);
      } else if (it == elems.end()) {
        elems.push_back(element);
      }
    }
    return std::nullopt;
  }

  static Family ReadFamily(const Words& words, size_t* i) {
    if (*i + 1 < words.size()) {
      if (const auto family = FamilyFromName(words[*i])) {
        ++*i;
        return *family;
      }
    }
    return Family::kIpv4;  // nft's default family
  }

  Table& GetTable(Family family, const std::string& name) {
    for (auto& t : tables_) {
      if (t.family == family && t.name == name) return t;
    }
    Table table;
    table.backend = Backend::kNft;
    table.family = family;
    table.name = name;
    tables_.push_back(std::move(table));
    // Pointers into tables_ (table_, chain_, set_) are refreshed by every caller after this.
    return tables_.back();
  }

  static Chain& GetChain(Table& table, const std::string& name) {
    for (auto& c : table.chains) {
      if (c.name == name) return c;
    }
    Chain chain;
    chain.name = name;
    table.chains.push_back(std::move(chain));
    return table.chains.back();
  }

  static NftSet& GetSet(Table& table, const std::string& name) {
    for (auto& s : table.sets) {
      if (s.name == name) return s;
    }
    NftSet set;
    set.name = name;
    table.sets.push_back(std::move(set));
    return table.sets.back();
  }

  std::vector<Table> tables_;
  std::vector<Block> blocks_;
  Table* table_ = nullptr;  // block syntax: the table being read
  Chain* chain_ = nullptr;  // block syntax: the chain being read
  NftSet* set_ = nullptr;   // the set whose body or elements are being read
  bool in_elements_ = false;
  bool removing_elements_ = false;
};

std::string QuoteNft(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

Result<Rule> ParseNftRuleText(std::string_view text, Family /*table_family*/) {
  // The table family adds nothing: every nft expression names its own protocol layer.
  const Words words = text::Tokenize(text, true);
  return RuleParser(words).Parse();
}

Result<std::vector<Table>> ParseNftText(std::string_view text) {
  NftTextParser parser;
  return parser.Parse(text);
}

std::string RenderNftScript(const std::vector<Table>& tables) {
  std::string out;
  for (const auto& table : tables) {
    const std::string_view family = NftFamilyKeyword(table.family);
    if (family.empty()) {
      out += "# table " + table.name + ": family not representable, skipped\n";
      continue;
    }
    const std::string prefix = std::string(family) + " " + table.name;
    out += "add table " + prefix + "\n";
    out += "flush table " + prefix + "\n";
    for (const auto& set : table.sets) {
      if (set.anonymous) continue;  // only kept when truncated; nft cannot name it anyway
      const bool map = !set.data_type.empty();
      out += std::string(map ? "add map " : "add set ") + prefix + " " + set.name + " { type " +
             (set.key_type.empty() ? "ipv4_addr" : set.key_type) +
             (map ? " : " + set.data_type : "") + " ;";
      if (set.interval) out += " flags interval ;";
      if (!set.comment.empty()) out += " comment " + QuoteNft(set.comment) + " ;";
      out += " }\n";
      if (!set.elements.empty()) {
        out += "add element " + prefix + " " + set.name + " {";
        for (size_t i = 0; i < set.elements.size(); ++i) {
          out += (i ? ", " : " ") + set.elements[i];
        }
        out += " }\n";
      }
    }
    for (const auto& chain : table.chains) {
      out += "add chain " + prefix + " " + chain.name;
      if (chain.is_base) {
        out += " { type " + (chain.type.empty() ? std::string("filter") : chain.type) + " hook " +
               chain.hook + " priority " + std::to_string(chain.priority) + " ; policy " +
               (chain.policy.empty() ? std::string("accept") : chain.policy) + " ; }";
      }
      out += "\n";
    }
    for (const auto& chain : table.chains) {
      for (const auto& rule : chain.rules) {
        // In an inet table a set lookup needs ip/ip6: take it from the set's key type.
        Family rule_family = table.family;
        for (const auto& m : rule.sem.matches) {
          if (m.kind != MatchKind::kSet || table.family != Family::kInet) continue;
          const std::string name = m.text.substr(0, m.text.find(' '));
          for (const auto& set : table.sets) {
            if (set.name == name && set.key_type == "ipv6_addr") rule_family = Family::kIpv6;
            if (set.name == name && set.key_type == "ipv4_addr") rule_family = Family::kIpv4;
          }
        }
        std::string body = RenderRule(Backend::kNft, rule_family, chain.name, rule);
        if (body.empty()) body = "continue";  // nft needs at least one statement
        out += "add rule " + prefix + " " + chain.name + " " + body + "\n";
      }
    }
  }
  return out;
}

}  // namespace ad
