// The JSON writer of outputs that have no proto message (findings -o json, the daemon's JSON log
// lines, fixtures): RapidJSON's Writer (compact) or PrettyWriter (two-space indent) behind a
// chainable API, so a document's schema is visible in one place.
#pragma once

#include <rapidjson/prettywriter.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ad {

class JsonWriter {
 public:
  explicit JsonWriter(bool pretty = true);
  JsonWriter(const JsonWriter&) = delete;  // the writer points at out_
  JsonWriter& operator=(const JsonWriter&) = delete;

  JsonWriter& BeginObject();
  JsonWriter& EndObject();  // pretty: the document ends with a newline after the root object
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);

  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);  // three decimals ("0.500"); NaN and infinities as null
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

  const std::string& str() const { return out_.text; }

 private:
  // RapidJSON's output stream concept over a std::string.
  struct Output {
    using Ch = char;
    void Put(char c) { text.push_back(c); }
    void Flush() {}
    std::string text;
  };
  using Compact = rapidjson::Writer<Output>;
  using Pretty = rapidjson::PrettyWriter<Output>;

  template <typename F>
  JsonWriter& Apply(F&& write) {
    std::visit(write, writer_);
    return *this;
  }

  Output out_;
  std::variant<Compact, Pretty> writer_;  // declared after out_, which it writes to
};

// `s` as the inside of a JSON string literal, escaped as the writer escapes it.
std::string JsonEscape(std::string_view s);

}  // namespace ad
