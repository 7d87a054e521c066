#include "bench/legacy_config_dump.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace ad::bench::legacy {

using ztunnel::CanonicalWorkloadIp;
using ztunnel::ConfigDump;
using ztunnel::ParseRfc3339UnixMs;

namespace {

const std::string kEmptyString;
const std::vector<JsonValue> kEmptyItems;
const std::vector<std::pair<std::string, JsonValue>> kEmptyMembers;

class Parser {
 public:
  Parser(std::string_view text, const JsonLimits& limits) : text_(text), limits_(limits) {}

  JsonParseResult Run() {
    JsonParseResult result;
    if (text_.size() > limits_.max_bytes) {
      result.error = "input of " + std::to_string(text_.size()) + " bytes exceeds the limit of " +
                     std::to_string(limits_.max_bytes);
      return result;
    }
    SkipSpace();
    JsonValue v;
    if (!ParseValue(0, v)) {
      result.error = "offset " + std::to_string(pos_) + ": " + error_;
      return result;
    }
    SkipSpace();
    if (pos_ != text_.size()) {
      result.error = "offset " + std::to_string(pos_) + ": trailing data after the JSON value";
      return result;
    }
    result.value = std::move(v);
    return result;
  }

 private:
  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return Fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool ParseValue(size_t depth, JsonValue& out) {
    if (depth > limits_.max_depth)
      return Fail("nesting deeper than " + std::to_string(limits_.max_depth));
    if (pos_ >= text_.size()) return Fail("unexpected end of input");
    switch (text_[pos_]) {
      case '{':
        return ParseObject(depth, out);
      case '[':
        return ParseArray(depth, out);
      case '"': {
        std::string s;
        if (!ParseString(s)) return false;
        out = JsonValue::MakeString(std::move(s));
        return true;
      }
      case 't':
        out = JsonValue::MakeBool(true);
        return Literal("true");
      case 'f':
        out = JsonValue::MakeBool(false);
        return Literal("false");
      case 'n':
        out = JsonValue();
        return Literal("null");
      default:
        return ParseNumber(out);
    }
  }

  bool ParseNumber(JsonValue& out) {
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      size_t n = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        ++pos_;
        ++n;
      }
      return n;
    };
    if (digits() == 0) return Fail("invalid value");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Fail("invalid number");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Fail("invalid number exponent");
    }
    std::string number(text_.substr(start, pos_ - start));
    out = JsonValue::MakeNumber(std::strtod(number.c_str(), nullptr));
    return true;
  }

  static void AppendUtf8(uint32_t cp, std::string& s) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool Hex4(uint32_t& out) {
    if (pos_ + 4 > text_.size()) return Fail("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      out <<= 4;
      if (c >= '0' && c <= '9') {
        out |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        out |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        out |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Fail("invalid \\u escape");
      }
    }
    return true;
  }

  bool ParseString(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return Fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return Fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF && pos_ + 6 <= text_.size() && text_[pos_] == '\\' &&
              text_[pos_ + 1] == 'u') {
            pos_ += 2;
            uint32_t low = 0;
            if (!Hex4(low)) return false;
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              AppendUtf8(0xFFFD, out);
              cp = low;
            }
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Fail("invalid escape");
      }
    }
  }

  bool ParseArray(size_t depth, JsonValue& out) {
    ++pos_;
    std::vector<JsonValue> items;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      out = JsonValue::MakeArray(std::move(items));
      return true;
    }
    while (true) {
      SkipSpace();
      JsonValue item;
      if (!ParseValue(depth + 1, item)) return false;
      items.push_back(std::move(item));
      SkipSpace();
      if (pos_ >= text_.size()) return Fail("unterminated array");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        out = JsonValue::MakeArray(std::move(items));
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }

  bool ParseObject(size_t depth, JsonValue& out) {
    ++pos_;
    std::vector<std::pair<std::string, JsonValue>> members;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      out = JsonValue::MakeObject(std::move(members));
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Fail("expected a member name");
      std::string key;
      if (!ParseString(key)) return false;
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Fail("expected ':'");
      ++pos_;
      SkipSpace();
      JsonValue value;
      if (!ParseValue(depth + 1, value)) return false;
      members.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (pos_ >= text_.size()) return Fail("unterminated object");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == '}') {
        ++pos_;
        out = JsonValue::MakeObject(std::move(members));
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

  std::string_view text_;
  JsonLimits limits_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

JsonValue JsonValue::MakeBool(bool b) {
  JsonValue v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}

JsonValue JsonValue::MakeNumber(double d) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.number_ = d;
  return v;
}

JsonValue JsonValue::MakeString(std::string s) {
  JsonValue v;
  v.type_ = Type::kString;
  v.string_ = std::move(s);
  return v;
}

JsonValue JsonValue::MakeArray(std::vector<JsonValue> items) {
  JsonValue v;
  v.type_ = Type::kArray;
  v.items_ = std::move(items);
  return v;
}

JsonValue JsonValue::MakeObject(std::vector<std::pair<std::string, JsonValue>> members) {
  JsonValue v;
  v.type_ = Type::kObject;
  v.members_ = std::move(members);
  return v;
}

const std::string& JsonValue::AsString() const {
  return type_ == Type::kString ? string_ : kEmptyString;
}

const std::vector<JsonValue>& JsonValue::items() const {
  return type_ == Type::kArray ? items_ : kEmptyItems;
}

const std::vector<std::pair<std::string, JsonValue>>& JsonValue::members() const {
  return type_ == Type::kObject ? members_ : kEmptyMembers;
}

const JsonValue* JsonValue::Get(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) {
    if (it->first == key) return &it->second;
  }
  return nullptr;
}

std::string JsonValue::GetString(std::string_view key) const {
  const JsonValue* v = Get(key);
  return v ? v->AsString() : std::string();
}

JsonParseResult ParseJson(std::string_view text, const JsonLimits& limits) {
  return Parser(text, limits).Run();
}

namespace {

constexpr size_t kMaxWarnings = 8;
constexpr size_t kMaxKeyShown = 64;
// A peer-chosen key, shortened for a warning.
std::string ShowKey(std::string_view key) {
  std::string out = "\"" + std::string(key.substr(0, kMaxKeyShown));
  if (key.size() > kMaxKeyShown) out += "...";
  return out + "\"";
}

class ConfigDumpReader {
 public:
  explicit ConfigDumpReader(ConfigDump& dump) : dump_(dump) {}

  void Skip(std::string message) {
    ++dump_.skipped_entries;
    if (dump_.warnings.size() < kMaxWarnings) dump_.warnings.push_back(std::move(message));
  }

  // A string member; "" when absent or null, "" plus a warning when of another type.
  std::string StringField(const JsonValue& object, std::string_view key, const std::string& where) {
    const JsonValue* value = object.Get(key);
    if (value == nullptr || value->is_null()) return {};
    if (!value->is_string()) {
      Skip(where + "." + std::string(key) + ": not a string");
      return {};
    }
    return value->AsString();
  }

  void ReadWorkloadState(const JsonValue& section) {
    if (!section.is_object()) {
      Skip("workloadState: not an object");
      return;
    }
    std::map<std::string, ZtunnelWorkloadState> by_uid;  // duplicate keys: the last wins
    for (const auto& [uid, entry] : section.members()) {
      const std::string where = "workloadState[" + ShowKey(uid) + "]";
      if (uid.empty()) {
        Skip(where + ": empty pod UID");
        continue;
      }
      if (!entry.is_object()) {
        Skip(where + ": not an object");
        continue;
      }
      ZtunnelWorkloadState state;
      state.pod_uid = uid;
      state.state = StringField(entry, "state", where);
      if (const JsonValue* info = entry.Get("info"); info != nullptr && !info->is_null()) {
        if (info->is_object()) {
          state.name = StringField(*info, "name", where + ".info");
          state.namespace_name = StringField(*info, "namespace", where + ".info");
          state.service_account = StringField(*info, "serviceAccount", where + ".info");
        } else {
          Skip(where + ".info: not an object");
        }
      }
      by_uid[uid] = std::move(state);
    }
    for (auto& [uid, state] : by_uid) dump_.workload_state.push_back(std::move(state));
  }

  void ReadWorkload(const JsonValue& entry, const std::string& where, std::string_view map_key) {
    if (!entry.is_object()) {
      Skip(where + ": not an object");
      return;
    }
    ZtunnelWorkload workload;
    workload.uid = StringField(entry, "uid", where);
    if (workload.uid.empty()) workload.uid = std::string(map_key);  // the old map is keyed by uid
    workload.name = StringField(entry, "name", where);
    workload.namespace_name = StringField(entry, "namespace", where);
    workload.node = StringField(entry, "node", where);
    workload.protocol = StringField(entry, "protocol", where);
    workload.network_mode = StringField(entry, "networkMode", where);
    if (const JsonValue* ips = entry.Get("workloadIps"); ips != nullptr && !ips->is_null()) {
      if (!ips->is_array()) {
        Skip(where + ".workloadIps: not an array");
      } else {
        for (size_t i = 0; i < ips->items().size(); ++i) {
          const JsonValue& ip = ips->items()[i];
          auto canonical = ip.is_string() ? CanonicalWorkloadIp(ip.AsString()) : std::nullopt;
          if (canonical) {
            workload.ips.push_back(std::move(*canonical));
          } else {
            Skip(where + ".workloadIps[" + std::to_string(i) + "]: not an IP address");
          }
        }
      }
    }
    dump_.workloads.push_back(std::move(workload));
  }

  // "certificates": [{identity, state, certChain: [{expirationTime, ...}], rootCerts}].
  void ReadCertificates(const JsonValue& section) {
    if (!section.is_array()) {
      Skip("certificates: not an array");
      return;
    }
    std::map<std::string, ZtunnelCertificate> by_identity;
    for (size_t i = 0; i < section.items().size(); ++i) {
      const JsonValue& entry = section.items()[i];
      const std::string where = "certificates[" + std::to_string(i) + "]";
      if (!entry.is_object()) {
        Skip(where + ": not an object");
        continue;
      }
      ZtunnelCertificate certificate;
      certificate.identity = StringField(entry, "identity", where);
      certificate.state = StringField(entry, "state", where);
      if (certificate.identity.empty()) {
        Skip(where + ": no identity");
        continue;
      }
      if (const JsonValue* chain = entry.Get("certChain"); chain != nullptr && !chain->is_null()) {
        if (!chain->is_array()) {
          Skip(where + ".certChain: not an array");
        } else {
          for (size_t j = 0; j < chain->items().size(); ++j) {
            const JsonValue& cert = chain->items()[j];
            const std::string cert_where = where + ".certChain[" + std::to_string(j) + "]";
            if (!cert.is_object()) {
              Skip(cert_where + ": not an object");
              continue;
            }
            ++certificate.chain_length;
            const std::string expiration = StringField(cert, "expirationTime", cert_where);
            if (expiration.empty()) continue;
            const std::optional<int64_t> at = ParseRfc3339UnixMs(expiration);
            if (!at) {
              Skip(cert_where + ".expirationTime: not an RFC 3339 time");
              continue;
            }
            if (certificate.expires_unix_ms == 0 || *at < certificate.expires_unix_ms) {
              certificate.expires_unix_ms = *at;
            }
          }
        }
      }
      by_identity[certificate.identity] = std::move(certificate);
    }
    for (auto& [identity, certificate] : by_identity) {
      dump_.certificates.push_back(std::move(certificate));
    }
  }

  void ReadWorkloads(const JsonValue& section) {
    if (section.is_array()) {
      for (size_t i = 0; i < section.items().size(); ++i) {
        ReadWorkload(section.items()[i], "workloads[" + std::to_string(i) + "]", {});
      }
    } else if (section.is_object()) {
      for (const auto& [key, entry] : section.members()) {
        ReadWorkload(entry, "workloads[" + ShowKey(key) + "]", key);
      }
    } else {
      Skip("workloads: neither an array nor an object");
    }
  }

 private:
  ConfigDump& dump_;
};

}  // namespace

Result<ConfigDump> ParseConfigDump(std::string_view json) {
  JsonParseResult parsed = ParseJson(json);
  if (!parsed.value) {
    return SourceError{SourceKind::kZtunnelConfigDump, "invalid JSON: " + parsed.error, EPROTO};
  }
  if (!parsed.value->is_object()) {
    return SourceError{SourceKind::kZtunnelConfigDump, "not a JSON object", EPROTO};
  }
  ConfigDump dump;
  ConfigDumpReader reader(dump);
  if (const JsonValue* state = parsed.value->Get("workloadState");
      state != nullptr && !state->is_null()) {
    dump.has_workload_state = true;
    reader.ReadWorkloadState(*state);
  }
  if (const JsonValue* workloads = parsed.value->Get("workloads");
      workloads != nullptr && !workloads->is_null()) {
    dump.has_workloads = true;
    reader.ReadWorkloads(*workloads);
  }
  if (const JsonValue* certificates = parsed.value->Get("certificates");
      certificates != nullptr && !certificates->is_null()) {
    dump.has_certificates = true;
    reader.ReadCertificates(*certificates);
  }
  return dump;
}

}  // namespace ad::bench::legacy
