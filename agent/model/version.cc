#include "model/version.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ad {
namespace {

constexpr size_t kMaxComponents = 8;
constexpr size_t kMaxDigits = 9;  // fits uint32_t

std::optional<std::vector<uint32_t>> ParseVersion(std::string_view text) {
  std::vector<uint32_t> components;
  if (text.empty()) return std::nullopt;
  while (true) {
    const size_t dot = text.find('.');
    const std::string_view part = text.substr(0, dot);
    if (part.empty() || part.size() > kMaxDigits || components.size() == kMaxComponents) {
      return std::nullopt;
    }
    uint32_t value = 0;
    for (char c : part) {
      if (c < '0' || c > '9') return std::nullopt;
      value = value * 10 + static_cast<uint32_t>(c - '0');
    }
    components.push_back(value);
    if (dot == std::string_view::npos) break;
    text.remove_prefix(dot + 1);
  }
  return components;
}

}  // namespace

std::optional<int> CompareVersions(std::string_view a, std::string_view b) {
  const std::optional<std::vector<uint32_t>> left = ParseVersion(a);
  const std::optional<std::vector<uint32_t>> right = ParseVersion(b);
  if (!left || !right) return std::nullopt;
  const size_t n = std::max(left->size(), right->size());
  for (size_t i = 0; i < n; ++i) {
    const uint32_t x = i < left->size() ? (*left)[i] : 0;
    const uint32_t y = i < right->size() ? (*right)[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

}  // namespace ad
