#include "text/text_util.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <charconv>

namespace ad::text {

std::vector<std::string> Tokenize(std::string_view line, bool nft_punctuation) {
  std::vector<std::string> words;
  std::string current;
  bool in_word = false;
  bool quoted = false;
  const auto flush = [&] {
    if (in_word) words.push_back(std::move(current));
    current.clear();
    in_word = false;
  };
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '\\' && i + 1 < line.size()) {
        current += line[++i];
      } else if (c == '"') {
        quoted = false;
      } else {
        current += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else if (nft_punctuation && (c == '{' || c == '}' || c == ';')) {
      flush();
      words.emplace_back(1, c);
    } else {
      current += c;
      in_word = true;
    }
  }
  flush();
  return words;
}

std::optional<uint32_t> ParseU32(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return std::nullopt;
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

namespace {

// Parses an address into network-order bytes; returns the byte count (4, 16) or 0.
size_t ParseAddressBytes(std::string_view text, std::array<uint8_t, 16>& bytes) {
  const std::string str(text);
  if (str.find(':') != std::string::npos) {
    return inet_pton(AF_INET6, str.c_str(), bytes.data()) == 1 ? 16 : 0;
  }
  return inet_pton(AF_INET, str.c_str(), bytes.data()) == 1 ? 4 : 0;
}

std::string AddressToText(const std::array<uint8_t, 16>& bytes, size_t size) {
  std::array<char, INET6_ADDRSTRLEN> buf{};
  inet_ntop(size == 16 ? AF_INET6 : AF_INET, bytes.data(), buf.data(), buf.size());
  return buf.data();
}

// Length of a contiguous dotted netmask ("255.255.0.0" -> 16), nullopt if not contiguous.
std::optional<uint32_t> NetmaskLength(std::string_view mask) {
  std::array<uint8_t, 16> bytes{};
  if (ParseAddressBytes(mask, bytes) != 4) return std::nullopt;
  const uint32_t m = (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) |
                     (uint32_t{bytes[2]} << 8) | bytes[3];
  const uint32_t len = static_cast<uint32_t>(std::countl_one(m));
  if (len < 32 && (m << len) != 0) return std::nullopt;
  return len;
}

}  // namespace

std::optional<std::string> CanonicalPrefix(std::string_view text) {
  const auto slash = text.find('/');
  std::array<uint8_t, 16> bytes{};
  const size_t size = ParseAddressBytes(text.substr(0, slash), bytes);
  if (size == 0) return std::nullopt;
  const uint32_t max_len = static_cast<uint32_t>(size * 8);
  uint32_t len = max_len;
  if (slash != std::string_view::npos) {
    const std::string_view len_text = text.substr(slash + 1);
    auto parsed = ParseU32(len_text);
    if (!parsed && size == 4) parsed = NetmaskLength(len_text);
    if (!parsed || *parsed > max_len) return std::nullopt;
    len = *parsed;
  }
  for (size_t i = 0; i < size; ++i) {
    const uint32_t bit = static_cast<uint32_t>(i * 8);
    if (bit >= len) {
      bytes[i] = 0;
    } else if (len - bit < 8) {
      bytes[i] &= static_cast<uint8_t>(0xff << (8 - (len - bit)));
    }
  }
  return AddressToText(bytes, size) + "/" + std::to_string(len);
}

std::optional<std::string> CanonicalAddress(std::string_view text) {
  std::array<uint8_t, 16> bytes{};
  const size_t size = ParseAddressBytes(text, bytes);
  if (size == 0) return std::nullopt;
  return AddressToText(bytes, size);
}

std::optional<uint32_t> ProtocolNumber(std::string_view name) {
  const std::string lower = Lower(name);
  if (lower == "tcp") return 6;
  if (lower == "udp") return 17;
  if (lower == "icmp") return 1;
  if (lower == "icmpv6" || lower == "ipv6-icmp") return 58;
  if (lower == "sctp") return 132;
  return ParseU32(name);
}

std::optional<std::pair<uint32_t, uint32_t>> ParsePortRange(std::string_view text) {
  const auto sep = text.find_first_of(":-");
  if (sep == std::string_view::npos) {
    const auto port = ParseU32(text);
    if (!port || *port > 65535) return std::nullopt;
    return std::make_pair(*port, *port);
  }
  // iptables allows open ends: ":b" from 0, "a:" to 65535.
  const std::string_view first_text = text.substr(0, sep);
  const std::string_view last_text = text.substr(sep + 1);
  const auto first = first_text.empty() ? std::optional<uint32_t>(0) : ParseU32(first_text);
  const auto last = last_text.empty() ? std::optional<uint32_t>(65535) : ParseU32(last_text);
  if (!first || !last || *first > *last || *last > 65535) return std::nullopt;
  return std::make_pair(*first, *last);
}

std::optional<uint32_t> ParseCtStates(std::string_view list) {
  uint32_t mask = 0;
  size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    const std::string word =
        Lower(list.substr(start, comma == std::string_view::npos ? list.npos : comma - start));
    if (word == "invalid") {
      mask |= 1;
    } else if (word == "established") {
      mask |= 2;
    } else if (word == "related") {
      mask |= 4;
    } else if (word == "new") {
      mask |= 8;
    } else if (word == "untracked") {
      mask |= 64;
    } else {
      return std::nullopt;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return mask;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

std::string Join(const std::vector<std::string>& words, size_t first, size_t last) {
  std::string out;
  for (size_t i = first; i < last && i < words.size(); ++i) {
    if (!out.empty()) out += ' ';
    // Words that held blanks came from quotes; keep them quoted so the text re-parses.
    if (words[i].find_first_of(" \t") != std::string::npos || words[i].empty()) {
      out += '"' + words[i] + '"';
    } else {
      out += words[i];
    }
  }
  return out;
}

SourceError ParseError(SourceKind source, size_t line_number, std::string_view message) {
  std::string text = line_number ? "line " + std::to_string(line_number) + ": " : "";
  return SourceError{source, text + std::string(message), 0};
}

}  // namespace ad::text
