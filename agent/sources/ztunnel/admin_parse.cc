#include "sources/ztunnel/admin_parse.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <iterator>
#include <numeric>
#include <vector>

#include "model/json_reader.h"

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

// Where a skipped value sits ("workloads[3]", "workloadState[\"uid\"].info"), spelt out only
// when a warning needs it: most entries need none.
struct Where {
  std::string_view section;
  bool keyed = false;       // the section is an object: entries are named by key
  std::string_view key;     // ... the entry's key
  size_t index = 0;         // the entry's position otherwise
  std::string_view member;  // ".info", or empty for the entry itself

  std::string Text() const {
    return std::string(section) + "[" + (keyed ? ShowKey(key) : std::to_string(index)) + "]" +
           std::string(member);
  }
  Where In(std::string_view inner) const {
    Where where = *this;
    where.member = inner;
    return where;
  }
};

// What one section of the dump gave besides its entries. A section named twice keeps its last
// occurrence, as a member lookup would, and its skips go with it.
struct SectionLog {
  bool present = false;
  size_t skipped = 0;
  std::vector<std::string> warnings;  // the first kMaxWarnings reasons

  void Skip(std::string message) {
    ++skipped;
    if (warnings.size() < kMaxWarnings) warnings.push_back(std::move(message));
  }
  void Skip(const Where& where, std::string_view reason) {
    ++skipped;
    if (warnings.size() < kMaxWarnings) warnings.push_back(where.Text() + std::string(reason));
  }
};

// A string member; "" when absent or null, "" plus a warning when of another type.
std::string StringField(const rapidjson::Value& object, std::string_view key, const Where& where,
                        SectionLog& log) {
  const rapidjson::Value* value = JsonMember(object, key);
  if (value == nullptr || value->IsNull()) return {};
  if (!value->IsString()) {
    log.Skip(where, "." + std::string(key) + ": not a string");
    return {};
  }
  return std::string(JsonText(value));
}

// The readers of one entry (an object; Convert skips the rest).
void ReadWorkloadState(const Where& where, const rapidjson::Value& entry, SectionLog& log,
                       std::vector<ZtunnelWorkloadState>& out) {
  ZtunnelWorkloadState state;
  state.pod_uid = where.key;
  state.state = StringField(entry, "state", where, log);
  if (const rapidjson::Value* info = JsonMember(entry, "info");
      info != nullptr && !info->IsNull()) {
    if (info->IsObject()) {
      const Where in_info = where.In(".info");
      state.name = StringField(*info, "name", in_info, log);
      state.namespace_name = StringField(*info, "namespace", in_info, log);
      state.service_account = StringField(*info, "serviceAccount", in_info, log);
    } else {
      log.Skip(where, ".info: not an object");
    }
  }
  out.push_back(std::move(state));
}

void ReadWorkloadIps(const rapidjson::Value& ips, const Where& where, SectionLog& log,
                     std::vector<std::string>& out) {
  if (!ips.IsArray()) {
    log.Skip(where, ".workloadIps: not an array");
    return;
  }
  for (rapidjson::SizeType i = 0; i < ips.Size(); ++i) {
    auto canonical = ips[i].IsString() ? CanonicalWorkloadIp(JsonText(&ips[i])) : std::nullopt;
    if (canonical) {
      out.push_back(std::move(*canonical));
    } else {
      log.Skip(where, ".workloadIps[" + std::to_string(i) + "]: not an IP address");
    }
  }
}

void ReadWorkload(const Where& where, const rapidjson::Value& entry, SectionLog& log,
                  const ConfigDumpFilter& filter, std::vector<ZtunnelWorkload>& out) {
  ZtunnelWorkload workload;
  workload.uid = StringField(entry, "uid", where, log);
  if (workload.uid.empty()) workload.uid = where.key;  // the old map is keyed by uid
  workload.name = StringField(entry, "name", where, log);
  workload.namespace_name = StringField(entry, "namespace", where, log);
  workload.node = StringField(entry, "node", where, log);
  workload.protocol = StringField(entry, "protocol", where, log);
  workload.network_mode = StringField(entry, "networkMode", where, log);
  if (const rapidjson::Value* ips = JsonMember(entry, "workloadIps");
      ips != nullptr && !ips->IsNull()) {
    ReadWorkloadIps(*ips, where, log, workload.ips);
  }
  if (filter.node && !IsLocalHboneWorkload(workload, *filter.node)) return;
  out.push_back(std::move(workload));
}

// certChain: [{expirationTime, ...}]: its length and earliest expiry.
void ReadCertChain(const rapidjson::Value& chain, const Where& where, SectionLog& log,
                   ZtunnelCertificate& certificate) {
  if (!chain.IsArray()) {
    log.Skip(where, ".certChain: not an array");
    return;
  }
  for (rapidjson::SizeType j = 0; j < chain.Size(); ++j) {
    const rapidjson::Value& cert = chain[j];
    const std::string member = ".certChain[" + std::to_string(j) + "]";
    if (!cert.IsObject()) {
      log.Skip(where, member + ": not an object");
      continue;
    }
    ++certificate.chain_length;
    const std::string expiration = StringField(cert, "expirationTime", where.In(member), log);
    if (expiration.empty()) continue;
    const std::optional<int64_t> at = ParseRfc3339UnixMs(expiration);
    if (!at) {
      log.Skip(where, member + ".expirationTime: not an RFC 3339 time");
      continue;
    }
    if (certificate.expires_unix_ms == 0 || *at < certificate.expires_unix_ms) {
      certificate.expires_unix_ms = *at;
    }
  }
}

// One entry of "certificates": [{identity, state, certChain: [...], rootCerts}].
void ReadCertificate(const Where& where, const rapidjson::Value& entry, SectionLog& log,
                     std::vector<ZtunnelCertificate>& out) {
  ZtunnelCertificate certificate;
  certificate.identity = StringField(entry, "identity", where, log);
  certificate.state = StringField(entry, "state", where, log);
  if (certificate.identity.empty()) {
    log.Skip(where, ": no identity");
    return;
  }
  if (const rapidjson::Value* chain = JsonMember(entry, "certChain");
      chain != nullptr && !chain->IsNull()) {
    ReadCertChain(*chain, where, log, certificate);
  }
  out.push_back(std::move(certificate));
}

// Moves items[order[i]] to position i, following each cycle of the permutation with one
// temporary: no second array of items (a stable_sort of the items themselves would allocate one
// and move every item once per merge pass).
template <typename T>
void Permute(std::vector<T>& items, std::vector<uint32_t>& order) {
  for (uint32_t start = 0; start < order.size(); ++start) {
    if (order[start] == start) continue;
    T held = std::move(items[start]);
    uint32_t at = start;
    while (order[at] != start) {
      const uint32_t from = order[at];
      items[at] = std::move(items[from]);
      order[at] = at;
      at = from;
    }
    items[at] = std::move(held);
    order[at] = at;
  }
}

// Sorts by `key`; of entries with the same key the last in document order stays, as a map
// assignment in document order would leave it.
template <typename T>
void SortKeepingLast(std::vector<T>& items, std::string T::*key) {
  const auto less = [key](const T& a, const T& b) { return a.*key < b.*key; };
  if (!std::is_sorted(items.begin(), items.end(), less)) {
    std::vector<uint32_t> order(items.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return less(items[a], items[b]); });
    Permute(items, order);
  }
  auto write = items.begin();
  for (auto it = items.begin(); it != items.end(); ++it) {
    const auto next = std::next(it);
    if (next != items.end() && (*next).*key == (*it).*key) continue;
    if (write != it) *write = std::move(*it);
    ++write;
  }
  items.erase(write, items.end());
}

enum class Section : uint8_t { kNone, kWorkloadState, kWorkloads, kCertificates };

Section SectionNamed(std::string_view key) {
  if (key == "workloadState") return Section::kWorkloadState;
  if (key == "workloads") return Section::kWorkloads;
  if (key == "certificates") return Section::kCertificates;
  return Section::kNone;
}

// The members of an entry the checks read; the rest (a workload's services and addresses of
// other kinds, a pod's connections, a certificate's PEM roots) is never kept.
bool KeptField(Section section, std::string_view key) {
  switch (section) {
    case Section::kWorkloadState:
      return key == "state" || key == "info";
    case Section::kWorkloads:
      return key == "uid" || key == "name" || key == "namespace" || key == "node" ||
             key == "protocol" || key == "networkMode" || key == "workloadIps";
    case Section::kCertificates:
      return key == "identity" || key == "state" || key == "certChain";
    case Section::kNone:
      return false;
  }
  return false;
}

// RapidJSON SAX handler over the whole dump; the dump's tree is never built. Each entry of the
// three sections the checks read is gathered alone (its kept members only) into a small
// document, converted, and dropped before the next entry. Depths: 1 = a member of the root
// object (a section), 2 = an entry of a section, 3 = a member of an entry.
class ConfigDumpHandler {
 public:
  using Ch = char;
  using SizeType = rapidjson::SizeType;

  explicit ConfigDumpHandler(const ConfigDumpFilter& filter) : filter_(filter) {}

  bool Null() { return !Route(rapidjson::kNullType) || entry_.Null(); }
  bool Bool(bool b) {
    return !Route(b ? rapidjson::kTrueType : rapidjson::kFalseType) || entry_.Bool(b);
  }
  bool Int(int i) { return !Route(rapidjson::kNumberType) || entry_.Int(i); }
  bool Uint(unsigned u) { return !Route(rapidjson::kNumberType) || entry_.Uint(u); }
  bool Int64(int64_t i) { return !Route(rapidjson::kNumberType) || entry_.Int64(i); }
  bool Uint64(uint64_t u) { return !Route(rapidjson::kNumberType) || entry_.Uint64(u); }
  bool Double(double d) { return !Route(rapidjson::kNumberType) || entry_.Double(d); }
  bool RawNumber(const Ch* s, SizeType n, bool copy) {
    return !Route(rapidjson::kNumberType) || entry_.RawNumber(s, n, copy);
  }
  bool String(const Ch* s, SizeType n, bool copy) {
    return !Route(rapidjson::kStringType) || entry_.String(s, n, copy);
  }
  bool StartObject() {
    const bool forward = Route(rapidjson::kObjectType);
    ++depth_;
    return !forward || entry_.StartObject();
  }
  bool StartArray() {
    const bool forward = Route(rapidjson::kArrayType);
    ++depth_;
    return !forward || entry_.StartArray();
  }
  bool Key(const Ch* s, SizeType n, bool copy);
  bool EndObject(SizeType members);
  bool EndArray(SizeType items);

  Result<ConfigDump> Finish() &&;

 private:
  bool Route(rapidjson::Type type);
  void BeginSection(rapidjson::Type type);
  bool BeginEntry(rapidjson::Type type);
  bool FinishEntry();
  void Convert(const rapidjson::Value& entry);
  bool InKeptField() const { return collecting_ && field_kept_; }

  const ConfigDumpFilter& filter_;
  ConfigDump dump_;
  SectionLog state_log_, workloads_log_, certificates_log_;
  size_t depth_ = 0;  // containers open around the next event
  bool root_is_object_ = false;
  Section key_section_ = Section::kNone;  // the section named by the last root member's key
  Section active_ = Section::kNone;       // the section whose entries are being read
  bool active_is_array_ = false;
  size_t entry_index_ = 0;
  std::string entry_key_;     // the entry's key in a section that is an object
  bool collecting_ = false;   // an entry object is being gathered into entry_
  bool field_kept_ = false;   // ... and the member being read is one of KeptField's
  SizeType kept_fields_ = 0;  // members of the entry gathered
  // One entry at a time: a few KiB, from a buffer reused for every entry.
  alignas(8) char pool_buffer_[4096];
  rapidjson::MemoryPoolAllocator<> pool_{pool_buffer_, sizeof(pool_buffer_), 16 << 10};
  rapidjson::Document entry_{&pool_};
};

// Where a value (a scalar, or the start of a container) belongs; true: to the entry gathered.
bool ConfigDumpHandler::Route(rapidjson::Type type) {
  switch (depth_) {
    case 0:
      root_is_object_ = type == rapidjson::kObjectType;
      return false;
    case 1:
      if (root_is_object_ && key_section_ != Section::kNone) BeginSection(type);
      return false;
    case 2:
      return active_ != Section::kNone && BeginEntry(type);
    default:
      return InKeptField();
  }
}

bool ConfigDumpHandler::Key(const Ch* s, SizeType n, bool copy) {
  const std::string_view key(s, n);
  switch (depth_) {
    case 1:
      key_section_ = SectionNamed(key);
      return true;
    case 2:
      if (active_ != Section::kNone) entry_key_.assign(key);
      return true;
    case 3:
      if (!collecting_) return true;
      field_kept_ = KeptField(active_, key);
      if (!field_kept_) return true;
      ++kept_fields_;
      return entry_.Key(s, n, copy);
    default:
      return !InKeptField() || entry_.Key(s, n, copy);
  }
}

bool ConfigDumpHandler::EndObject(SizeType members) {
  --depth_;
  if (depth_ >= 3) return !InKeptField() || entry_.EndObject(members);
  if (depth_ == 2 && collecting_) return FinishEntry();
  if (depth_ == 1) active_ = Section::kNone;
  return true;
}

bool ConfigDumpHandler::EndArray(SizeType items) {
  --depth_;
  if (depth_ >= 3) return !InKeptField() || entry_.EndArray(items);
  if (depth_ == 1) active_ = Section::kNone;
  return true;
}

void ConfigDumpHandler::BeginSection(rapidjson::Type type) {
  const bool is_array = type == rapidjson::kArrayType;
  const bool is_object = type == rapidjson::kObjectType;
  SectionLog* log = nullptr;
  bool fits = false;
  std::string_view wrong_shape;
  switch (key_section_) {
    case Section::kWorkloadState:
      log = &state_log_;
      dump_.workload_state.clear();
      fits = is_object;
      wrong_shape = "workloadState: not an object";
      break;
    case Section::kWorkloads:
      log = &workloads_log_;
      dump_.workloads.clear();
      fits = is_array || is_object;
      wrong_shape = "workloads: neither an array nor an object";
      break;
    case Section::kCertificates:
      log = &certificates_log_;
      dump_.certificates.clear();
      fits = is_array;
      wrong_shape = "certificates: not an array";
      break;
    case Section::kNone:
      return;
  }
  *log = SectionLog{.present = type != rapidjson::kNullType};
  active_ = Section::kNone;
  entry_index_ = 0;
  if (!log->present) return;  // null reads as absent
  if (!fits) {
    log->Skip(std::string(wrong_shape));
    return;
  }
  active_ = key_section_;
  active_is_array_ = is_array;
}

bool ConfigDumpHandler::BeginEntry(rapidjson::Type type) {
  if (type == rapidjson::kObjectType) {
    collecting_ = true;
    field_kept_ = false;
    kept_fields_ = 0;
    return true;
  }
  // Not an object: only its kind matters (it is skipped with a warning), not its contents.
  Convert(rapidjson::Value(type));
  return false;
}

bool ConfigDumpHandler::FinishEntry() {
  collecting_ = false;
  if (!entry_.EndObject(kept_fields_)) return false;
  // entry_ received the entry's events as they came (a Document is a SAX handler); a generator
  // that sends nothing more moves the finished value off its stack into the document.
  auto finished = [](rapidjson::Document&) { return true; };
  entry_.Populate(finished);
  Convert(entry_);
  entry_.SetNull();
  pool_.Clear();
  return true;
}

void ConfigDumpHandler::Convert(const rapidjson::Value& entry) {
  const bool state = active_ == Section::kWorkloadState;
  const bool workloads = active_ == Section::kWorkloads;
  SectionLog& log = state ? state_log_ : workloads ? workloads_log_ : certificates_log_;
  const Where where{.section = state       ? "workloadState"
                               : workloads ? "workloads"
                                           : "certificates",
                    .keyed = !active_is_array_,
                    .key = active_is_array_ ? std::string_view() : std::string_view(entry_key_),
                    .index = entry_index_++};
  if (state && where.key.empty()) {
    log.Skip(where, ": empty pod UID");
  } else if (!entry.IsObject()) {
    log.Skip(where, ": not an object");
  } else if (state) {
    ReadWorkloadState(where, entry, log, dump_.workload_state);
  } else if (workloads) {
    ++dump_.workloads_seen;
    ReadWorkload(where, entry, log, filter_, dump_.workloads);
  } else {
    ReadCertificate(where, entry, log, dump_.certificates);
  }
}

Result<ConfigDump> ConfigDumpHandler::Finish() && {
  if (!root_is_object_) {
    return SourceError{SourceKind::kZtunnelConfigDump, "not a JSON object", EPROTO};
  }
  SortKeepingLast(dump_.workload_state, &ZtunnelWorkloadState::pod_uid);
  SortKeepingLast(dump_.certificates, &ZtunnelCertificate::identity);
  dump_.has_workload_state = state_log_.present;
  dump_.has_workloads = workloads_log_.present;
  dump_.has_certificates = certificates_log_.present;
  // Reasons in section order (workloadState, workloads, certificates), the first few in all.
  for (SectionLog* log : {&state_log_, &workloads_log_, &certificates_log_}) {
    dump_.skipped_entries += log->skipped;
    for (std::string& warning : log->warnings) {
      if (dump_.warnings.size() < kMaxWarnings) dump_.warnings.push_back(std::move(warning));
    }
  }
  return std::move(dump_);
}

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
  // glibc's inet_pton takes only the dotted-quad form without leading zeros, which is already
  // what inet_ntop would print.
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) return address;
  if (::inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    return std::string(::inet_ntop(AF_INET6, &v6, out, sizeof(out)));
  }
  return std::nullopt;
}

Result<ConfigDump> ParseConfigDump(std::string_view json, const ConfigDumpFilter& filter) {
  ConfigDumpHandler handler(filter);
  if (const JsonStatus read = ReadJson(json, handler); !read.ok()) {
    return SourceError{SourceKind::kZtunnelConfigDump, "invalid JSON: " + read.error, EPROTO};
  }
  return std::move(handler).Finish();
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
