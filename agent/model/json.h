// Minimal streaming JSON writer (RFC 8259 escaping). Outputs are built with it so the schema is
// visible in one place per document and needs no third-party library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ad {

class JsonWriter {
 public:
  explicit JsonWriter(bool pretty = true) : pretty_(pretty) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);

  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // Shorthands for "key": value.
  JsonWriter& Field(std::string_view key, std::string_view value) { return Key(key).String(value); }
  JsonWriter& Field(std::string_view key, const char* value) { return Key(key).String(value); }
  JsonWriter& Field(std::string_view key, const std::string& value) {
    return Key(key).String(value);
  }
  JsonWriter& Field(std::string_view key, bool value) { return Key(key).Bool(value); }
  JsonWriter& Field(std::string_view key, int value) { return Key(key).Int(value); }
  JsonWriter& Field(std::string_view key, int64_t value) { return Key(key).Int(value); }
  JsonWriter& Field(std::string_view key, uint64_t value) { return Key(key).Uint(value); }
  JsonWriter& Field(std::string_view key, uint32_t value) { return Key(key).Uint(value); }
  JsonWriter& Field(std::string_view key, double value) { return Key(key).Double(value); }
  JsonWriter& StringArray(std::string_view key, const std::vector<std::string>& values);

  const std::string& str() const { return out_; }

 private:
  void BeforeValue();
  void Newline();

  struct Level {
    bool is_object;
    bool empty;
  };
  bool pretty_;
  bool after_key_ = false;
  std::vector<Level> stack_;
  std::string out_;
};

std::string JsonEscape(std::string_view s);

}  // namespace ad
