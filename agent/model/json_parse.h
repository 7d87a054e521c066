// A small, bounded JSON parser (RFC 8259) for peer responses: ztunnel /config_dump and the CRI
// verbose info. Input size and nesting depth are limited; malformed input gives an error message,
// never a crash.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ad {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  JsonValue() = default;
  static JsonValue MakeBool(bool b);
  static JsonValue MakeNumber(double d);
  static JsonValue MakeString(std::string s);
  static JsonValue MakeArray(std::vector<JsonValue> items);
  static JsonValue MakeObject(std::vector<std::pair<std::string, JsonValue>> members);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_object() const { return type_ == Type::kObject; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_string() const { return type_ == Type::kString; }

  bool AsBool(bool fallback = false) const { return type_ == Type::kBool ? bool_ : fallback; }
  double AsNumber(double fallback = 0) const { return type_ == Type::kNumber ? number_ : fallback; }
  // The string value; empty for non-strings.
  const std::string& AsString() const;
  const std::vector<JsonValue>& items() const;  // empty unless array
  // Object members in document order (duplicates kept; Get returns the last).
  const std::vector<std::pair<std::string, JsonValue>>& members() const;

  // Object member lookup; nullptr when absent or not an object.
  const JsonValue* Get(std::string_view key) const;
  // Convenience: string member or "".
  std::string GetString(std::string_view key) const;

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

struct JsonLimits {
  size_t max_bytes = 64 << 20;
  size_t max_depth = 64;
};

struct JsonParseResult {
  std::optional<JsonValue> value;
  std::string error;  // "offset 17: expected ':'" when value is empty
};

JsonParseResult ParseJson(std::string_view text, const JsonLimits& limits = {});

}  // namespace ad
