#include "sources/ztunnel/admin_parse.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <map>

#include "model/json_parse.h"

namespace ad::ztunnel {
namespace {

constexpr size_t kMaxWarnings = 8;
constexpr size_t kMaxKeyShown = 64;
constexpr std::string_view kActiveProxyCount = "workload_manager_active_proxy_count";
constexpr std::string_view kPendingProxyCount = "workload_manager_pending_proxy_count";

std::string_view Trim(std::string_view s, std::string_view blanks = " \t\r\n") {
  const size_t first = s.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(blanks) - first + 1);
}

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

// One Prometheus sample line "name{labels} value [timestamp]"; false when malformed.
bool ParseSample(std::string_view line, std::string_view& name, double& value) {
  auto is_name_char = [](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
  };
  size_t pos = 0;
  while (pos < line.size() && is_name_char(line[pos], pos == 0)) ++pos;
  if (pos == 0) return false;
  name = line.substr(0, pos);
  if (pos < line.size() && line[pos] == '{') {
    bool in_quotes = false;
    for (++pos; pos < line.size(); ++pos) {
      const char c = line[pos];
      if (in_quotes && c == '\\') {
        ++pos;  // escaped character inside a label value
      } else if (c == '"') {
        in_quotes = !in_quotes;
      } else if (c == '}' && !in_quotes) {
        break;
      }
    }
    if (pos >= line.size()) return false;  // unterminated label set
    ++pos;
  }
  if (pos >= line.size() || (line[pos] != ' ' && line[pos] != '\t')) return false;
  std::string_view rest = Trim(line.substr(pos));
  std::string_view token = rest.substr(0, rest.find_first_of(" \t"));
  if (!token.empty() && token.front() == '+') token.remove_prefix(1);  // "+Inf"
  if (token.empty()) return false;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  return ec == std::errc() && end == token.data() + token.size();
}

}  // namespace

std::optional<std::string> CanonicalWorkloadIp(std::string_view text) {
  text = Trim(text);
  if (const size_t slash = text.rfind('/'); slash != std::string_view::npos) {
    text.remove_prefix(slash + 1);  // "<network>/<ip>"
  }
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  const std::string address(text);
  char out[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    return std::string(::inet_ntop(AF_INET, &v4, out, sizeof(out)));
  }
  if (::inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    return std::string(::inet_ntop(AF_INET6, &v6, out, sizeof(out)));
  }
  return std::nullopt;
}

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

std::optional<int64_t> ParseRfc3339UnixMs(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)
  auto digits = [&text](size_t at, size_t count) -> std::optional<int64_t> {
    if (at + count > text.size()) return std::nullopt;
    int64_t value = 0;
    for (size_t i = at; i < at + count; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      value = value * 10 + (text[i] - '0');
    }
    return value;
  };
  if (text.size() < 20) return std::nullopt;
  const auto year = digits(0, 4), month = digits(5, 2), day = digits(8, 2);
  const auto hour = digits(11, 2), minute = digits(14, 2), second = digits(17, 2);
  if (!year || !month || !day || !hour || !minute || !second || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' ||
      text[16] != ':') {
    return std::nullopt;
  }
  if (*month < 1 || *month > 12 || *day < 1 || *day > 31 || *hour > 23 || *minute > 59 ||
      *second > 60) {
    return std::nullopt;
  }
  size_t pos = 19;
  int64_t millis = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t scale = 100;
    const size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      millis += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  int64_t offset_minutes = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const auto oh = digits(pos + 1, 2), om = digits(pos + 4, 2);
    if (!oh || !om || pos + 3 >= text.size() || text[pos + 3] != ':' || *oh > 23 || *om > 59) {
      return std::nullopt;
    }
    offset_minutes = (*oh * 60 + *om) * (text[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  // Days from the civil date (proleptic Gregorian), after H. Hinnant's days_from_civil.
  const int64_t y = *year - (*month <= 2 ? 1 : 0);
  const int64_t era = y / 400;
  const int64_t yoe = y - era * 400;
  const int64_t mp = (*month + 9) % 12;
  const int64_t doy = (153 * mp + 2) / 5 + *day - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = era * 146097 + doe - 719468;
  const int64_t seconds =
      days * 86400 + *hour * 3600 + *minute * 60 + *second - offset_minutes * 60;
  return seconds * 1000 + millis;
}

Result<Readiness> ParseReadiness(int status, std::string_view body) {
  Readiness readiness;
  if (status == 200) {
    readiness.ready = true;
    return readiness;
  }
  body = Trim(body);
  if (status != 500) {
    return SourceError{SourceKind::kZtunnelReadiness,
                       "unexpected HTTP status " + std::to_string(status) + " (body \"" +
                           std::string(body.substr(0, 80)) + "\")",
                       EPROTO};
  }
  constexpr std::string_view kPending = "pending:";
  const size_t at = body.find(kPending);
  if (at == std::string_view::npos) return readiness;
  // "a, b" as ztunnel prints it; braces and quotes tolerated in case the format shifts.
  std::string_view list = Trim(body.substr(at + kPending.size()), " \t\r\n{}[]");
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view task = Trim(list.substr(0, comma), " \t\r\n\"'");
    if (!task.empty()) readiness.pending_tasks.emplace_back(task);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return readiness;
}

ZtunnelMetrics ParseMetrics(std::string_view text) {
  ZtunnelMetrics metrics;
  auto add = [](std::optional<double>& total, double value) { total = total.value_or(0) + value; };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = Trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    std::string_view name;
    double value = 0;
    if (!ParseSample(line, name, value)) {
      ++metrics.malformed_lines;
      continue;
    }
    if (!std::isfinite(value)) continue;
    if (name == kActiveProxyCount) add(metrics.active_proxy_count, value);
    if (name == kPendingProxyCount) add(metrics.pending_proxy_count, value);
  }
  return metrics;
}

}  // namespace ad::ztunnel
