#include "sources/netfilter/nft_reader_decode.h"

#include <arpa/inet.h>
#include <libnftnl/expr.h>
#include <libnftnl/udata.h>
#include <linux/if_ether.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>

#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ad::nft {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr size_t kMaxRegisterBytes = 64;  // 4 x 16-byte registers; bounds every copy

// What a register holds at this point of the expression list.
struct RegValue {
  enum class Source : uint8_t { kMeta, kPayload, kCt, kImmediate, kNumgen, kUnknown };
  Source source = Source::kUnknown;
  uint32_t key = 0;  // meta/ct key; numgen type
  uint32_t base = 0;
  uint32_t offset = 0;
  uint32_t len = 0;
  Bytes data;  // immediate data
  bool has_bitwise = false;
  Bytes mask;
  Bytes xor_bits;
  std::string what;      // description for kUnknown
  uint64_t written = 0;  // order of the write: tells a concatenation's fields from stale slots
};

// Registers are addressed in 4-byte units: NFT_REG_1..4 are 16 bytes wide and alias
// NFT_REG32_00..15. Keying by the first 32-bit slot makes both spellings meet.
std::optional<uint32_t> SlotOf(uint32_t reg) {
  if (reg >= NFT_REG_1 && reg <= NFT_REG_4) {
    return (reg - NFT_REG_1) * 4;
  }
  if (reg >= NFT_REG32_00 && reg <= NFT_REG32_15) {
    return reg - NFT_REG32_00;
  }
  return std::nullopt;
}

std::span<const uint8_t> GetBytes(const nftnl_expr* e, uint16_t attr) {
  if (!nftnl_expr_is_set(e, attr)) {
    return {};
  }
  uint32_t len = 0;
  const void* data = nftnl_expr_get_data(e, attr, &len);
  if (data == nullptr || len > kMaxRegisterBytes) {
    return {};
  }
  return {static_cast<const uint8_t*>(data), len};
}

uint32_t GetU32(const nftnl_expr* e, uint16_t attr) {
  return nftnl_expr_is_set(e, attr) ? nftnl_expr_get_u32(e, attr) : 0;
}

std::string GetStr(const nftnl_expr* e, uint16_t attr) {
  if (!nftnl_expr_is_set(e, attr)) {
    return {};
  }
  const char* s = nftnl_expr_get_str(e, attr);
  return s ? std::string(s) : std::string();
}

uint32_t HostU32(std::span<const uint8_t> bytes) {
  uint32_t v = 0;
  std::memcpy(&v, bytes.data(), std::min<size_t>(bytes.size(), sizeof(v)));
  return v;
}

uint16_t NetU16(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2) {
    return 0;
  }
  return static_cast<uint16_t>((bytes[0] << 8) | bytes[1]);
}

std::string HexBytes(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  for (uint8_t b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 0xf];
  }
  return out;
}

bool AllZero(const Bytes& bytes) {
  for (uint8_t b : bytes) {
    if (b != 0) {
      return false;
    }
  }
  return true;
}

Family FamilyFromNfproto(uint32_t nfproto) {
  switch (nfproto) {
    case NFPROTO_IPV4:
      return Family::kIpv4;
    case NFPROTO_IPV6:
      return Family::kIpv6;
    case NFPROTO_INET:
      return Family::kInet;
    default:
      return Family::kOther;
  }
}

std::string_view CmpOpText(uint32_t op) {
  switch (op) {
    case NFT_CMP_EQ:
      return "==";
    case NFT_CMP_NEQ:
      return "!=";
    case NFT_CMP_LT:
      return "<";
    case NFT_CMP_LTE:
      return "<=";
    case NFT_CMP_GT:
      return ">";
    case NFT_CMP_GTE:
      return ">=";
    default:
      return "?";
  }
}

// Interface names are compared as NUL-padded IFNAMSIZ strings; a compare that stops before the
// NUL is a prefix match, which iptables spells "eth+" (nft: "eth*").
std::string InterfaceName(std::span<const uint8_t> data) {
  const auto* chars = reinterpret_cast<const char*>(data.data());
  size_t len = strnlen(chars, data.size());
  std::string name(chars, len);
  if (len == data.size()) {
    name += '+';
  }
  return name;
}

class RuleDecoder {
 public:
  RuleDecoder(Family table_family, const xt::SetNameResolver& resolve_ipset,
              const SetKeyWidth& key_width)
      : table_family_(table_family),
        l3_family_(table_family),
        resolve_ipset_(resolve_ipset),
        key_width_(key_width) {}

  void Expression(nftnl_expr* e) {
    std::string name = GetStr(e, NFTNL_EXPR_NAME);
    if (name == "meta") {
      Meta(e);
    } else if (name == "payload") {
      Payload(e);
    } else if (name == "ct") {
      Ct(e);
    } else if (name == "bitwise") {
      Bitwise(e);
    } else if (name == "cmp") {
      Cmp(e);
    } else if (name == "range") {
      Range(e);
    } else if (name == "lookup") {
      Lookup(e);
    } else if (name == "immediate") {
      Immediate(e);
    } else if (name == "counter") {
      result_.rule.has_counter = true;
    } else if (name == "redir") {
      Redir(e);
    } else if (name == "nat") {
      Nat(e);
    } else if (name == "masq") {
      SetAction(Action{ActionKind::kMasquerade, 0, 0, 0, ""});
    } else if (name == "tproxy") {
      Tproxy(e);
    } else if (name == "notrack") {
      SetAction(Action{ActionKind::kNotrack, 0, 0, 0, ""});
    } else if (name == "log") {
      SetAction(Action{ActionKind::kLog, 0, 0, 0, ""});
    } else if (name == "reject") {
      SetAction(Action{ActionKind::kReject, 0, 0, 0, ""});
    } else if (name == "match") {
      XtMatch(e);
    } else if (name == "target") {
      XtTarget(e);
    } else if (name == "numgen") {
      Numgen(e);
    } else if (name == "last") {
      // Timestamp of the last hit: like counter, no effect on packets.
    } else {
      // numgen, fib, hash, socket, rt, exthdr, limit, quota, dynset, ...: reported, and any
      // register they might have written is no longer trusted.
      Unknown("expression " + name);
      regs_.clear();
    }
  }

  DecodedRule Finish() {
    result_.rule.sem.action = action_;
    return std::move(result_);
  }

 private:
  void Unknown(std::string text) {
    Match m;
    m.kind = MatchKind::kUnknown;
    m.text = std::move(text);
    result_.rule.sem.matches.push_back(std::move(m));
    saw_unknown_ = true;
  }

  void UnknownStatement(std::string text) {
    SetAction(Action{ActionKind::kUnknown, 0, 0, 0, std::move(text)});
  }

  void Emit(Match m) { result_.rule.sem.matches.push_back(std::move(m)); }

  // One rule has one Action. nft allows several statements; the combinations with a single
  // meaning are merged, anything else is reported as kUnknown rather than silently dropped.
  void SetAction(Action a) {
    if (!action_set_ || action_.kind == ActionKind::kContinue) {
      action_ = std::move(a);
      action_set_ = true;
      return;
    }
    if (action_.kind == ActionKind::kTproxy && a.kind == ActionKind::kSetMark) {
      action_.value2 = a.value;
      action_.value3 = a.value2;
      return;
    }
    if (action_.kind == ActionKind::kSetMark && a.kind == ActionKind::kTproxy) {
      uint32_t mark = action_.value;
      uint32_t mask = action_.value2;
      action_ = std::move(a);
      action_.value2 = mark;
      action_.value3 = mask;
      return;
    }
    if (action_.kind == ActionKind::kTproxy && a.kind == ActionKind::kAccept) {
      return;  // TPROXY accepts by itself
    }
    if (a.kind == ActionKind::kContinue) {
      return;
    }
    std::string text = "multiple statements: " + std::to_string(static_cast<int>(action_.kind)) +
                       "+" + std::to_string(static_cast<int>(a.kind));
    if (!action_.text.empty()) {
      text += " (" + action_.text + ")";
    }
    if (!a.text.empty()) {
      text += " (" + a.text + ")";
    }
    action_ = Action{ActionKind::kUnknown, 0, 0, 0, std::move(text)};
  }

  RegValue* Reg(uint32_t reg) {
    auto slot = SlotOf(reg);
    if (!slot) {
      return nullptr;
    }
    auto it = regs_.find(*slot);
    return it == regs_.end() ? nullptr : &it->second;
  }

  void Store(uint32_t reg, RegValue value) {
    auto slot = SlotOf(reg);
    if (slot) {
      value.written = ++writes_;
      regs_[*slot] = std::move(value);
    }
  }

  const RegValue* SlotValue(uint32_t slot) const {
    auto it = regs_.find(slot);
    return it == regs_.end() ? nullptr : &it->second;
  }

  // "numgen random mod 2": only useful as a map key (kube-proxy's endpoint choice).
  void Numgen(nftnl_expr* e) {
    RegValue v;
    v.source = RegValue::Source::kNumgen;
    v.key = GetU32(e, NFTNL_EXPR_NG_TYPE);
    v.len = GetU32(e, NFTNL_EXPR_NG_MODULUS);
    v.offset = GetU32(e, NFTNL_EXPR_NG_OFFSET);
    Store(GetU32(e, NFTNL_EXPR_NG_DREG), std::move(v));
  }

  void Meta(nftnl_expr* e) {
    uint32_t key = GetU32(e, NFTNL_EXPR_META_KEY);
    if (nftnl_expr_is_set(e, NFTNL_EXPR_META_DREG)) {
      RegValue v;
      v.source = RegValue::Source::kMeta;
      v.key = key;
      Store(GetU32(e, NFTNL_EXPR_META_DREG), std::move(v));
      return;
    }
    const RegValue* src = Reg(GetU32(e, NFTNL_EXPR_META_SREG));
    if (key != NFT_META_MARK || src == nullptr) {
      UnknownStatement("meta set key " + std::to_string(key));
      return;
    }
    Action a;
    if (src->source == RegValue::Source::kImmediate && src->data.size() == 4) {
      a = Action{ActionKind::kSetMark, HostU32(src->data), 0xffffffffu, 0, ""};
    } else if (src->source == RegValue::Source::kMeta && src->key == NFT_META_MARK &&
               src->has_bitwise && src->mask.size() == 4) {
      // mark = (mark & m) ^ x  ==  MARK --set-xmark x/~m
      a = Action{ActionKind::kSetMark, HostU32(src->xor_bits), ~HostU32(src->mask), 0, ""};
    } else if (src->source == RegValue::Source::kCt && src->key == NFT_CT_MARK &&
               (!src->has_bitwise || (src->mask.size() == 4 && AllZero(src->xor_bits)))) {
      // mark = ct mark & m  ==  CONNMARK --restore-mark --nfmask 0xffffffff --ctmask m
      uint32_t ctmask = src->has_bitwise ? HostU32(src->mask) : 0xffffffffu;
      a = Action{ActionKind::kRestoreConnmark, 0xffffffffu, ctmask, 0, ""};
    } else {
      UnknownStatement("meta mark set from unsupported source");
      return;
    }
    SetAction(std::move(a));
  }

  void Ct(nftnl_expr* e) {
    uint32_t key = GetU32(e, NFTNL_EXPR_CT_KEY);
    if (nftnl_expr_is_set(e, NFTNL_EXPR_CT_DREG)) {
      RegValue v;
      v.source = RegValue::Source::kCt;
      v.key = key;
      if (nftnl_expr_is_set(e, NFTNL_EXPR_CT_DIR)) {
        v.source = RegValue::Source::kUnknown;
        v.what = "ct original/reply key " + std::to_string(key);
      }
      Store(GetU32(e, NFTNL_EXPR_CT_DREG), std::move(v));
      return;
    }
    const RegValue* src = Reg(GetU32(e, NFTNL_EXPR_CT_SREG));
    if (src == nullptr) {
      UnknownStatement("ct set key " + std::to_string(key) + " from unset register");
      return;
    }
    if (key == NFT_CT_ZONE && src->source == RegValue::Source::kImmediate &&
        src->data.size() >= 2) {
      uint16_t zone = 0;
      std::memcpy(&zone, src->data.data(), sizeof(zone));
      SetAction(Action{ActionKind::kCtZone, zone, 0, 0, ""});
      return;
    }
    if (key != NFT_CT_MARK) {
      UnknownStatement("ct set key " + std::to_string(key));
      return;
    }
    if (src->source == RegValue::Source::kImmediate && src->data.size() == 4) {
      SetAction(Action{ActionKind::kSetConnmark, HostU32(src->data), 0xffffffffu, 0, ""});
    } else if (src->source == RegValue::Source::kCt && src->key == NFT_CT_MARK &&
               src->has_bitwise && src->mask.size() == 4) {
      // ct mark = (ct mark & m) ^ x  ==  CONNMARK --set-xmark x/~m
      SetAction(
          Action{ActionKind::kSetConnmark, HostU32(src->xor_bits), ~HostU32(src->mask), 0, ""});
    } else if (src->source == RegValue::Source::kMeta && src->key == NFT_META_MARK &&
               (!src->has_bitwise || (src->mask.size() == 4 && AllZero(src->xor_bits)))) {
      // ct mark = mark & m  ==  CONNMARK --save-mark --nfmask m --ctmask 0xffffffff
      uint32_t nfmask = src->has_bitwise ? HostU32(src->mask) : 0xffffffffu;
      SetAction(Action{ActionKind::kSaveConnmark, nfmask, 0xffffffffu, 0, ""});
    } else {
      UnknownStatement("ct mark set from unsupported source");
    }
  }

  void Payload(nftnl_expr* e) {
    if (nftnl_expr_is_set(e, NFTNL_EXPR_PAYLOAD_SREG)) {
      UnknownStatement("payload write");
      return;
    }
    RegValue v;
    v.source = RegValue::Source::kPayload;
    v.base = GetU32(e, NFTNL_EXPR_PAYLOAD_BASE);
    v.offset = GetU32(e, NFTNL_EXPR_PAYLOAD_OFFSET);
    v.len = GetU32(e, NFTNL_EXPR_PAYLOAD_LEN);
    Store(GetU32(e, NFTNL_EXPR_PAYLOAD_DREG), std::move(v));
  }

  void Bitwise(nftnl_expr* e) {
    const RegValue* src = Reg(GetU32(e, NFTNL_EXPR_BITWISE_SREG));
    uint32_t op = GetU32(e, NFTNL_EXPR_BITWISE_OP);  // unset means mask/xor
    auto mask = GetBytes(e, NFTNL_EXPR_BITWISE_MASK);
    auto xor_bits = GetBytes(e, NFTNL_EXPR_BITWISE_XOR);
    uint32_t dreg = GetU32(e, NFTNL_EXPR_BITWISE_DREG);
    if (src == nullptr || op != NFT_BITWISE_BOOL || mask.empty() ||
        mask.size() != xor_bits.size()) {
      RegValue v;
      v.what = "bitwise op " + std::to_string(op);
      Store(dreg, std::move(v));
      return;
    }
    RegValue v = *src;
    if (!v.has_bitwise) {
      v.has_bitwise = true;
      v.mask.assign(mask.begin(), mask.end());
      v.xor_bits.assign(xor_bits.begin(), xor_bits.end());
    } else if (v.mask.size() == mask.size()) {
      // ((x & m1) ^ x1) & m2 ^ x2 == (x & (m1 & m2)) ^ ((x1 & m2) ^ x2)
      for (size_t i = 0; i < mask.size(); ++i) {
        v.xor_bits[i] = static_cast<uint8_t>((v.xor_bits[i] & mask[i]) ^ xor_bits[i]);
        v.mask[i] = static_cast<uint8_t>(v.mask[i] & mask[i]);
      }
    } else {
      v.source = RegValue::Source::kUnknown;
      v.what = "nested bitwise of different widths";
    }
    Store(dreg, std::move(v));
  }

  void Immediate(nftnl_expr* e) {
    uint32_t dreg = GetU32(e, NFTNL_EXPR_IMM_DREG);
    if (dreg != NFT_REG_VERDICT) {
      RegValue v;
      v.source = RegValue::Source::kImmediate;
      auto data = GetBytes(e, NFTNL_EXPR_IMM_DATA);
      v.data.assign(data.begin(), data.end());
      Store(dreg, std::move(v));
      return;
    }
    int32_t verdict = static_cast<int32_t>(GetU32(e, NFTNL_EXPR_IMM_VERDICT));
    Action a;
    switch (verdict) {
      case NF_ACCEPT:
        a.kind = ActionKind::kAccept;
        break;
      case NF_DROP:
        a.kind = ActionKind::kDrop;
        break;
      case NFT_RETURN:
        a.kind = ActionKind::kReturn;
        break;
      case NFT_JUMP:
        a.kind = ActionKind::kJump;
        a.text = GetStr(e, NFTNL_EXPR_IMM_CHAIN);
        break;
      case NFT_GOTO:
        a.kind = ActionKind::kGoto;
        a.text = GetStr(e, NFTNL_EXPR_IMM_CHAIN);
        break;
      case NFT_CONTINUE:
        a.kind = ActionKind::kContinue;
        break;
      default:
        a.kind = ActionKind::kUnknown;
        a.text = "verdict " + std::to_string(verdict);
        break;
    }
    SetAction(std::move(a));
  }

  // Address field (0 saddr, 1 daddr) of a network-header load, or nullopt.
  std::optional<int> AddressField(const RegValue& v, Family family, uint32_t* field_start) const {
    if (v.base != NFT_PAYLOAD_NETWORK_HEADER) {
      return std::nullopt;
    }
    uint32_t size = family == Family::kIpv6 ? 16 : 4;
    uint32_t saddr = family == Family::kIpv6 ? 8 : 12;
    for (int field = 0; field < 2; ++field) {
      uint32_t start = saddr + field * size;
      // Subtractions, not v.offset + v.len: an offset near 2^32 must not wrap into the field.
      if (v.len > 0 && v.len <= size && v.offset >= start && v.offset - start <= size - v.len) {
        *field_start = start;
        return field;
      }
    }
    return std::nullopt;
  }

  Family AddressFamily() const {
    if (l3_family_ == Family::kIpv4 || l3_family_ == Family::kIpv6) {
      return l3_family_;
    }
    return Family::kOther;
  }

  void Cmp(nftnl_expr* e) {
    const RegValue* src = Reg(GetU32(e, NFTNL_EXPR_CMP_SREG));
    uint32_t op = GetU32(e, NFTNL_EXPR_CMP_OP);
    auto data = GetBytes(e, NFTNL_EXPR_CMP_DATA);
    if (src == nullptr) {
      if (!saw_unknown_) {
        Unknown("cmp on an unset register");
      }
      return;
    }
    std::string op_text(CmpOpText(op));
    switch (src->source) {
      case RegValue::Source::kMeta:
        CmpMeta(*src, op, data);
        return;
      case RegValue::Source::kCt:
        CmpCt(*src, op, data);
        return;
      case RegValue::Source::kPayload:
        CmpPayload(*src, op, data);
        return;
      case RegValue::Source::kImmediate:
        Unknown("cmp on immediate data");
        return;
      case RegValue::Source::kNumgen:
        Unknown("numgen " + op_text + " " + HexBytes(data));
        return;
      case RegValue::Source::kUnknown:
        if (!saw_unknown_ || !src->what.empty()) {
          Unknown((src->what.empty() ? std::string("unknown load") : src->what) + " " + op_text +
                  " " + HexBytes(data));
        }
        return;
    }
  }

  void MarkLike(MatchKind kind, const RegValue& src, uint32_t op, std::span<const uint8_t> data,
                std::string_view what) {
    if ((op != NFT_CMP_EQ && op != NFT_CMP_NEQ) || data.size() != 4 ||
        (src.has_bitwise && (src.mask.size() != 4 || !AllZero(src.xor_bits)))) {
      Unknown(std::string(what) + " " + std::string(CmpOpText(op)) + " " + HexBytes(data));
      return;
    }
    Match m;
    m.kind = kind;
    m.value = HostU32(data);
    m.value2 = src.has_bitwise ? HostU32(src.mask) : 0xffffffffu;
    m.negated = op == NFT_CMP_NEQ;
    Emit(std::move(m));
  }

  void CmpMeta(const RegValue& src, uint32_t op, std::span<const uint8_t> data) {
    bool eq = op == NFT_CMP_EQ;
    bool equality = eq || op == NFT_CMP_NEQ;
    switch (src.key) {
      case NFT_META_NFPROTO:
        // Implied by the address match that follows; only narrows the address width.
        if (eq && data.size() == 1 && !src.has_bitwise) {
          l3_family_ = FamilyFromNfproto(data[0]);
          return;
        }
        break;
      case NFT_META_PROTOCOL:
        if (eq && data.size() == 2 && !src.has_bitwise) {
          uint16_t ethertype = NetU16(data);
          l3_family_ = ethertype == ETH_P_IP     ? Family::kIpv4
                       : ethertype == ETH_P_IPV6 ? Family::kIpv6
                                                 : l3_family_;
          return;
        }
        break;
      case NFT_META_L4PROTO:
        if (equality && data.size() == 1 && !src.has_bitwise) {
          Emit(Match{MatchKind::kProtocol, !eq, data[0], 0, ""});
          return;
        }
        break;
      case NFT_META_MARK:
        MarkLike(MatchKind::kMark, src, op, data, "meta mark");
        return;
      case NFT_META_IIFNAME:
      case NFT_META_OIFNAME:
        if (equality && !data.empty() && !src.has_bitwise) {
          Emit(Match{src.key == NFT_META_IIFNAME ? MatchKind::kInIface : MatchKind::kOutIface, !eq,
                     0, 0, InterfaceName(data)});
          return;
        }
        break;
      case NFT_META_SKUID:
      case NFT_META_SKGID:
        if (equality && data.size() == 4 && !src.has_bitwise) {
          Emit(Match{src.key == NFT_META_SKUID ? MatchKind::kSocketUid : MatchKind::kSocketGid, !eq,
                     HostU32(data), 0, ""});
          return;
        }
        break;
      default:
        break;
    }
    Unknown("meta key " + std::to_string(src.key) + " " + std::string(CmpOpText(op)) + " " +
            HexBytes(data));
  }

  void CmpCt(const RegValue& src, uint32_t op, std::span<const uint8_t> data) {
    if (src.key == NFT_CT_MARK) {
      MarkLike(MatchKind::kConnmark, src, op, data, "ct mark");
      return;
    }
    if (src.key == NFT_CT_STATE && data.size() == 4 && (op == NFT_CMP_EQ || op == NFT_CMP_NEQ)) {
      uint32_t value = HostU32(data);
      if (src.has_bitwise && src.mask.size() == 4 && AllZero(src.xor_bits) && value == 0) {
        // "ct state established,related": (state & bits) != 0
        Emit(Match{MatchKind::kCtState, op == NFT_CMP_EQ, HostU32(src.mask), 0, ""});
        return;
      }
      if (!src.has_bitwise) {
        Emit(Match{MatchKind::kCtState, op == NFT_CMP_NEQ, value, 0, ""});
        return;
      }
    }
    Unknown("ct key " + std::to_string(src.key) + " " + std::string(CmpOpText(op)) + " " +
            HexBytes(data));
  }

  std::optional<MatchKind> PortField(const RegValue& src) const {
    if (src.base != NFT_PAYLOAD_TRANSPORT_HEADER || src.len != 2 || src.has_bitwise) {
      return std::nullopt;
    }
    if (src.offset == 0) {
      return MatchKind::kSrcPort;
    }
    if (src.offset == 2) {
      return MatchKind::kDstPort;
    }
    return std::nullopt;
  }

  void CmpPayload(const RegValue& src, uint32_t op, std::span<const uint8_t> data) {
    bool eq = op == NFT_CMP_EQ;
    bool equality = eq || op == NFT_CMP_NEQ;
    if (auto port = PortField(src); port && data.size() == 2) {
      uint16_t value = NetU16(data);
      Match* last = result_.rule.sem.matches.empty() ? nullptr : &result_.rule.sem.matches.back();
      switch (op) {
        case NFT_CMP_EQ:
        case NFT_CMP_NEQ:
          Emit(Match{*port, !eq, value, value, ""});
          return;
        case NFT_CMP_GTE:
        case NFT_CMP_GT:
          Emit(Match{*port, false, op == NFT_CMP_GT ? value + 1u : value, 0xffff, ""});
          return;
        case NFT_CMP_LTE:
        case NFT_CMP_LT: {
          uint32_t hi = op == NFT_CMP_LT ? (value == 0 ? 0 : value - 1u) : value;
          // A ">= lo" then "<= hi" pair on the same port is one range (older iptables-nft).
          if (last != nullptr && last->kind == *port && !last->negated && last->value2 == 0xffff) {
            last->value2 = hi;
          } else {
            Emit(Match{*port, false, 0, hi, ""});
          }
          return;
        }
        default:
          break;
      }
    }
    Family family = AddressFamily();
    if (family == Family::kOther && table_family_ != Family::kInet) {
      family = table_family_;
    }
    if (equality && (family == Family::kIpv4 || family == Family::kIpv6)) {
      uint32_t field_start = 0;
      if (auto field = AddressField(src, family, &field_start);
          field && data.size() == src.len && (!src.has_bitwise || AllZero(src.xor_bits))) {
        std::array<uint8_t, 16> addr{};
        std::array<uint8_t, 16> mask{};
        uint32_t at = src.offset - field_start;
        for (uint32_t i = 0; i < src.len; ++i) {
          addr[at + i] = data[i];
          mask[at + i] = (src.has_bitwise && i < src.mask.size()) ? src.mask[i] : 0xff;
        }
        Emit(Match{*field == 0 ? MatchKind::kSrcAddr : MatchKind::kDstAddr, !eq, 0, 0,
                   xt::PrefixText(family, addr.data(), mask.data())});
        return;
      }
      bool protocol_field = src.base == NFT_PAYLOAD_NETWORK_HEADER && src.len == 1 &&
                            !src.has_bitwise &&
                            ((family == Family::kIpv4 && src.offset == 9) ||
                             (family == Family::kIpv6 && src.offset == 6));
      if (protocol_field && data.size() == 1) {
        Emit(Match{MatchKind::kProtocol, !eq, data[0], 0, ""});
        return;
      }
    }
    Unknown("payload base " + std::to_string(src.base) + " offset " + std::to_string(src.offset) +
            " len " + std::to_string(src.len) + (src.has_bitwise ? " masked " : " ") +
            std::string(CmpOpText(op)) + " " + HexBytes(data));
  }

  void Range(nftnl_expr* e) {
    const RegValue* src = Reg(GetU32(e, NFTNL_EXPR_RANGE_SREG));
    uint32_t op = GetU32(e, NFTNL_EXPR_RANGE_OP);
    auto from = GetBytes(e, NFTNL_EXPR_RANGE_FROM_DATA);
    auto to = GetBytes(e, NFTNL_EXPR_RANGE_TO_DATA);
    if (src != nullptr && src->source == RegValue::Source::kPayload && from.size() == 2 &&
        to.size() == 2) {
      if (auto port = PortField(*src)) {
        Emit(Match{*port, op == NFT_RANGE_NEQ, NetU16(from), NetU16(to), ""});
        return;
      }
    }
    Unknown("range " + HexBytes(from) + "-" + HexBytes(to));
  }

  struct KeyField {
    std::string name;    // as in the "Set lookups" key grammar of model/rule.h
    uint32_t bytes = 0;  // width in the key; each field starts on a 4-byte register slot
  };

  // One field a set lookup keys on, or nullopt when the register's value is not a known key.
  std::optional<KeyField> LookupField(const RegValue& src) const {
    if (src.has_bitwise) {
      return std::nullopt;
    }
    if (src.source == RegValue::Source::kPayload) {
      uint32_t field_start = 0;
      Family family = AddressFamily() == Family::kOther ? table_family_ : AddressFamily();
      uint32_t width = family == Family::kIpv6 ? 16 : 4;
      if (auto field = AddressField(src, family, &field_start);
          field && src.offset == field_start && src.len == width) {
        return KeyField{*field == 0 ? "src" : "dst", width};
      }
      if (auto port = PortField(src)) {
        return KeyField{*port == MatchKind::kSrcPort ? "sport" : "dport", 2};
      }
      return std::nullopt;
    }
    if (src.source == RegValue::Source::kMeta) {
      switch (src.key) {
        case NFT_META_IIFNAME:
          return KeyField{"iifname", 16};
        case NFT_META_OIFNAME:
          return KeyField{"oifname", 16};
        case NFT_META_IIF:
          return KeyField{"iif", 4};
        case NFT_META_OIF:
          return KeyField{"oif", 4};
        case NFT_META_L4PROTO:
          return KeyField{"l4proto", 1};
        case NFT_META_NFPROTO:
          return KeyField{"nfproto", 1};
        case NFT_META_MARK:
          return KeyField{"mark", 4};
        case NFT_META_SKUID:
          return KeyField{"skuid", 4};
        case NFT_META_SKGID:
          return KeyField{"skgid", 4};
        default:
          return std::nullopt;
      }
    }
    if (src.source == RegValue::Source::kCt && src.key == NFT_CT_MARK) {
      return KeyField{"ctmark", 4};
    }
    if (src.source == RegValue::Source::kNumgen && src.len > 0) {
      std::string name = std::string("numgen-") + (src.key == NFT_NG_RANDOM ? "random" : "inc") +
                         "-mod-" + std::to_string(src.len);
      if (src.offset != 0) {
        name += "-" + std::to_string(src.offset);
      }
      return KeyField{std::move(name), 4};
    }
    return std::nullopt;
  }

  // The key of a lookup on `sreg`: one field, or a concatenation whose fields sit in consecutive
  // register slots. With the set's key width known, the fields fill exactly that width. Without
  // it, fields are taken while each slot was written after the previous one (nft loads a
  // concatenation in order; an older slot is left over from an earlier expression). Empty when
  // a field is not decodable.
  std::string LookupKey(uint32_t sreg, uint32_t key_width) const {
    auto slot = SlotOf(sreg);
    if (!slot) {
      return {};
    }
    constexpr uint32_t kSlots = 16;
    std::string key;
    uint64_t previous_write = 0;
    uint32_t covered = 0;
    for (uint32_t at = *slot; at < kSlots;) {
      if (key_width != 0 && covered >= key_width) {
        break;
      }
      const RegValue* value = SlotValue(at);
      if (value == nullptr || (key_width == 0 && value->written <= previous_write)) {
        if (key_width != 0) {
          return {};
        }
        break;
      }
      auto field = LookupField(*value);
      if (!field) {
        return {};
      }
      if (!key.empty()) {
        key += '.';
      }
      key += field->name;
      previous_write = value->written;
      covered += (field->bytes + 3) / 4 * 4;
      at += (field->bytes + 3) / 4;
    }
    return key;
  }

  void Lookup(nftnl_expr* e) {
    uint32_t sreg = GetU32(e, NFTNL_EXPR_LOOKUP_SREG);
    std::string set = GetStr(e, NFTNL_EXPR_LOOKUP_SET);
    bool inverted = GetU32(e, NFTNL_EXPR_LOOKUP_FLAGS) & NFT_LOOKUP_F_INV;
    std::string key = LookupKey(sreg, key_width_ ? key_width_(set) : 0);
    if (nftnl_expr_is_set(e, NFTNL_EXPR_LOOKUP_DREG)) {
      uint32_t dreg = GetU32(e, NFTNL_EXPR_LOOKUP_DREG);
      if (dreg == NFT_REG_VERDICT && !key.empty()) {
        SetAction(Action{ActionKind::kVerdictMap, 0, 0, 0, set + " " + key});
      } else if (dreg == NFT_REG_VERDICT) {
        UnknownStatement("verdict map @" + set + " on an undecoded key");
      } else {
        RegValue v;
        v.what = "map @" + set;
        Store(dreg, std::move(v));
      }
      return;
    }
    if (key.empty()) {
      Unknown("lookup @" + set + " on an undecoded key");
      return;
    }
    Emit(Match{MatchKind::kSet, inverted, 0, 0, set + " " + key});
  }

  // Port from a register written by `immediate` (network order), or nullopt.
  std::optional<uint16_t> PortFromReg(const nftnl_expr* e, uint16_t attr) {
    if (!nftnl_expr_is_set(e, attr)) {
      return std::nullopt;
    }
    const RegValue* v = Reg(nftnl_expr_get_u32(e, attr));
    if (v == nullptr || v->source != RegValue::Source::kImmediate || v->data.size() < 2) {
      return std::nullopt;
    }
    return NetU16(v->data);
  }

  void Redir(nftnl_expr* e) {
    Action a;
    a.kind = ActionKind::kRedirect;
    bool has_min = nftnl_expr_is_set(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN);
    auto min_port = PortFromReg(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN);
    if (has_min && !min_port) {
      UnknownStatement("redirect to a computed port");
      return;
    }
    if (min_port) {
      a.value = *min_port;
      auto max_port = PortFromReg(e, NFTNL_EXPR_REDIR_REG_PROTO_MAX);
      a.value2 = max_port ? *max_port : *min_port;
    }
    SetAction(std::move(a));
  }

  void Nat(nftnl_expr* e) {
    uint32_t type = GetU32(e, NFTNL_EXPR_NAT_TYPE);
    Family family = FamilyFromNfproto(GetU32(e, NFTNL_EXPR_NAT_FAMILY));
    size_t addr_size = family == Family::kIpv6 ? 16 : 4;
    std::array<uint8_t, 16> min_addr{};
    std::array<uint8_t, 16> max_addr{};
    bool has_addr = false;
    if (nftnl_expr_is_set(e, NFTNL_EXPR_NAT_REG_ADDR_MIN)) {
      const RegValue* v = Reg(GetU32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN));
      if (v == nullptr || v->source != RegValue::Source::kImmediate || v->data.size() < addr_size) {
        UnknownStatement("nat to a computed address");
        return;
      }
      std::memcpy(min_addr.data(), v->data.data(), addr_size);
      max_addr = min_addr;
      has_addr = true;
      if (nftnl_expr_is_set(e, NFTNL_EXPR_NAT_REG_ADDR_MAX)) {
        const RegValue* vmax = Reg(GetU32(e, NFTNL_EXPR_NAT_REG_ADDR_MAX));
        if (vmax != nullptr && vmax->source == RegValue::Source::kImmediate &&
            vmax->data.size() >= addr_size) {
          std::memcpy(max_addr.data(), vmax->data.data(), addr_size);
        }
      }
    }
    auto min_port = PortFromReg(e, NFTNL_EXPR_NAT_REG_PROTO_MIN);
    auto max_port = PortFromReg(e, NFTNL_EXPR_NAT_REG_PROTO_MAX);
    Action a;
    a.kind = type == NFT_NAT_DNAT ? ActionKind::kDnat : ActionKind::kSnat;
    a.text =
        xt::NatTargetText(family, min_addr.data(), max_addr.data(), has_addr, min_port.value_or(0),
                          max_port.value_or(min_port.value_or(0)), min_port.has_value());
    SetAction(std::move(a));
  }

  void Tproxy(nftnl_expr* e) {
    Action a;
    a.kind = ActionKind::kTproxy;
    a.value = PortFromReg(e, NFTNL_EXPR_TPROXY_REG_PORT).value_or(0);
    SetAction(std::move(a));
  }

  void XtMatch(nftnl_expr* e) {
    result_.has_xt = true;
    std::string name = GetStr(e, NFTNL_EXPR_MT_NAME);
    uint32_t rev = GetU32(e, NFTNL_EXPR_MT_REV);
    uint32_t len = 0;
    const void* info = nftnl_expr_is_set(e, NFTNL_EXPR_MT_INFO)
                           ? nftnl_expr_get_data(e, NFTNL_EXPR_MT_INFO, &len)
                           : nullptr;
    std::span<const uint8_t> payload;
    if (info != nullptr) {
      payload = {static_cast<const uint8_t*>(info), len};
    }
    std::string comment;
    xt::DecodeMatch(table_family_, name, rev, payload, resolve_ipset_, &result_.rule.sem.matches,
                    &comment);
    if (!comment.empty()) {
      result_.rule.comment = std::move(comment);
    }
  }

  void XtTarget(nftnl_expr* e) {
    result_.has_xt = true;
    std::string name = GetStr(e, NFTNL_EXPR_TG_NAME);
    uint32_t rev = GetU32(e, NFTNL_EXPR_TG_REV);
    uint32_t len = 0;
    const void* info = nftnl_expr_is_set(e, NFTNL_EXPR_TG_INFO)
                           ? nftnl_expr_get_data(e, NFTNL_EXPR_TG_INFO, &len)
                           : nullptr;
    std::span<const uint8_t> payload;
    if (info != nullptr) {
      payload = {static_cast<const uint8_t*>(info), len};
    }
    SetAction(xt::DecodeTarget(table_family_, name, rev, payload));
  }

  Family table_family_;
  Family l3_family_;
  const xt::SetNameResolver& resolve_ipset_;
  const SetKeyWidth& key_width_;
  std::map<uint32_t, RegValue> regs_;
  uint64_t writes_ = 0;
  DecodedRule result_;
  Action action_;
  bool action_set_ = false;
  bool saw_unknown_ = false;
};

int VisitExpression(nftnl_expr* e, void* data) {
  static_cast<RuleDecoder*>(data)->Expression(e);
  return 0;
}

std::string RuleComment(nftnl_rule* rule) {
  if (!nftnl_rule_is_set(rule, NFTNL_RULE_USERDATA)) {
    return {};
  }
  uint32_t len = 0;
  const auto* data =
      static_cast<const uint8_t*>(nftnl_rule_get_data(rule, NFTNL_RULE_USERDATA, &len));
  return UserdataComment(data, len, NFTNL_UDATA_RULE_COMMENT);
}

}  // namespace

std::string UserdataComment(const uint8_t* data, uint32_t len, uint8_t comment_type) {
  size_t pos = 0;
  while (data != nullptr && pos + 2 <= len) {
    const uint8_t type = data[pos];
    const uint8_t value_len = data[pos + 1];
    if (pos + 2 + value_len > len) {
      break;
    }
    if (type == comment_type) {
      const auto* chars = reinterpret_cast<const char*>(data + pos + 2);
      return std::string(chars, strnlen(chars, value_len));
    }
    pos += 2 + value_len;
  }
  return {};
}

DecodedRule DecodeRule(nftnl_rule* rule, Family table_family,
                       const xt::SetNameResolver& resolve_ipset) {
  return DecodeRule(rule, table_family, resolve_ipset, SetKeyWidth());
}

DecodedRule DecodeRule(nftnl_rule* rule, Family table_family,
                       const xt::SetNameResolver& resolve_ipset, const SetKeyWidth& key_width) {
  RuleDecoder decoder(table_family, resolve_ipset, key_width);
  nftnl_expr_foreach(rule, VisitExpression, &decoder);
  DecodedRule decoded = decoder.Finish();
  if (nftnl_rule_is_set(rule, NFTNL_RULE_HANDLE)) {
    decoded.rule.handle = nftnl_rule_get_u64(rule, NFTNL_RULE_HANDLE);
  }
  std::string comment = RuleComment(rule);
  if (!comment.empty()) {
    decoded.rule.comment = std::move(comment);
  }
  return decoded;
}

}  // namespace ad::nft
