// The BASELINE of config_dump_bench, nothing else: the hand-written JSON tree parser and the
// /config_dump reader over its tree that the agent used before it read JSON with RapidJSON's SAX
// reader (agent/model/json_reader.h, agent/sources/ztunnel/admin_parse.cc). Kept verbatim, in
// its own namespace, so the bench compares the two in one run. Not linked into the product.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"
#include "sources/ztunnel/admin_parse.h"

namespace ad::bench::legacy {

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

// The old ztunnel::ParseConfigDump: the whole dump as a tree, then read from it.
Result<ztunnel::ConfigDump> ParseConfigDump(std::string_view json);

}  // namespace ad::bench::legacy
