#include "capture/redact_ips.h"

#include <arpa/inet.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

#include "model/istio_facts.h"

namespace ad::capture {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool IsAddressChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
         c == '.';
}

// The canonical text of an address, or "" when `text` is none.
std::string Canonical(const std::string& text, bool v6) {
  std::array<unsigned char, 16> raw{};
  if (inet_pton(v6 ? AF_INET6 : AF_INET, text.c_str(), raw.data()) != 1) return "";
  std::array<char, INET6_ADDRSTRLEN> out{};
  if (inet_ntop(v6 ? AF_INET6 : AF_INET, raw.data(), out.data(), out.size()) == nullptr) return "";
  return out.data();
}

// Addresses no one needs hidden and the checks compare against.
bool SpecialAddress(const std::string& canonical, bool v6) {
  std::array<unsigned char, 16> raw{};
  inet_pton(v6 ? AF_INET6 : AF_INET, canonical.c_str(), raw.data());
  if (!v6) {
    const uint32_t a = raw[0], b = raw[1];
    return a == 0 || a == 127 || (a == 169 && b == 254) || a >= 224;
  }
  static constexpr std::array<unsigned char, 16> kZero{};
  std::array<unsigned char, 16> loopback{};
  loopback[15] = 1;
  return raw == kZero || raw == loopback || (raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80) ||
         raw[0] == 0xff;
}

// The prefix length written right after an address ("/8"), or -1.
int PrefixAfter(const std::string& text, size_t end) {
  if (end >= text.size() || text[end] != '/') return -1;
  int len = 0;
  size_t i = end + 1;
  for (; i < text.size() && i < end + 4 && text[i] >= '0' && text[i] <= '9'; ++i) {
    len = len * 10 + (text[i] - '0');
  }
  return i == end + 1 ? -1 : len;
}

}  // namespace

IpRedactor::IpRedactor(std::set<std::string> keep) : keep_(std::move(keep)) {
  keep_.insert(std::string(istio::kProbeSnatV4));
  keep_.insert(Canonical(std::string(istio::kProbeSnatV6), true));
  keep_.insert(Canonical(std::string(istio::kProbeSnatV6IstioTests), true));
}

bool IpRedactor::Keep(const std::string& canonical, bool v6) const {
  return SpecialAddress(canonical, v6) || keep_.contains(canonical);
}

std::string IpRedactor::StandIn(const std::string& canonical, bool v6) {
  std::map<std::string, std::string>& mapping = v6 ? v6_ : v4_;
  if (auto it = mapping.find(canonical); it != mapping.end()) return it->second;
  const uint32_t n = static_cast<uint32_t>(mapping.size()) + 1;
  std::string stand_in;
  if (v6) {
    char buf[48];
    std::snprintf(buf, sizeof(buf), "2001:db8::%x:%x", n >> 16, n & 0xffff);
    stand_in = Canonical(buf, true);
  } else {
    // 198.18.0.0/15 holds 131,070 host stand-ins; beyond that the mapping wraps (and says so by
    // staying inside the range: never a real pod's address).
    const uint32_t host = 198u << 24 | 18u << 16 | (n % 0x1ffffu);
    stand_in = std::to_string(host >> 24) + "." + std::to_string(host >> 16 & 0xff) + "." +
               std::to_string(host >> 8 & 0xff) + "." + std::to_string(host & 0xff);
  }
  mapping.emplace(canonical, stand_in);
  return stand_in;
}

std::string IpRedactor::Redact(const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const bool starts_word = i == 0 || !(IsAddressChar(text[i - 1]) ||
                                         std::isalnum(static_cast<unsigned char>(text[i - 1])));
    if (!starts_word || !IsAddressChar(text[i])) {
      out += text[i++];
      continue;
    }
    size_t end = i;
    while (end < text.size() && IsAddressChar(text[end])) ++end;
    // An IPv4 address may be followed by ":port" inside one run; an IPv6 one is bracketed then.
    std::string run = text.substr(i, end - i);
    while (!run.empty() && (run.back() == '.' || run.back() == ':')) run.pop_back();
    size_t used = run.size();
    bool v6 = std::count(run.begin(), run.end(), ':') >= 2;
    std::string canonical = Canonical(run, v6);
    if (canonical.empty() && !v6 && run.find(':') != std::string::npos) {
      used = run.find(':');
      canonical = Canonical(run.substr(0, used), false);
    }
    const int prefix = PrefixAfter(text, i + used);
    const bool host = prefix < 0 || prefix == (v6 ? 128 : 32);
    if (canonical.empty() || !host || Keep(canonical, v6)) {
      out.append(text, i, used);
    } else {
      out += StandIn(canonical, v6);
    }
    i += used;
    if (used == 0) out += text[i++];
  }
  return out;
}

namespace {

// Version strings look like IPv4 addresses ("1.1.5.1"): fields named for a version are left, and
// so are the scan flags (configuration, replayed as given).
bool Skipped(const FieldDescriptor& field) {
  return field.name().find("version") != std::string::npos || field.name() == "format" ||
         field.name() == "agent_flags";
}

void RedactMessage(Message& message, IpRedactor& redactor) {
  const Reflection& reflection = *message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection.ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (!field->is_repeated()) {
        RedactMessage(*reflection.MutableMessage(&message, field), redactor);
        continue;
      }
      for (int i = 0; i < reflection.FieldSize(message, field); ++i) {
        RedactMessage(*reflection.MutableRepeatedMessage(&message, field, i), redactor);
      }
      continue;
    }
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_STRING || Skipped(*field)) continue;
    if (!field->is_repeated()) {
      reflection.SetString(&message, field, redactor.Redact(reflection.GetString(message, field)));
      continue;
    }
    for (int i = 0; i < reflection.FieldSize(message, field); ++i) {
      reflection.SetRepeatedString(
          &message, field, i, redactor.Redact(reflection.GetRepeatedString(message, field, i)));
    }
  }
}

}  // namespace

size_t RedactIps(::ambientdoctor::v1::Capture& capture, const std::set<std::string>& keep) {
  IpRedactor redactor(keep);
  RedactMessage(capture, redactor);
  capture.mutable_manifest()->set_ips_redacted(true);
  return redactor.replaced();
}

}  // namespace ad::capture
