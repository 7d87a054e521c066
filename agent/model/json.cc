#include "model/json.h"

#include <cmath>
#include <cstdio>

namespace ad {
namespace {

// RapidJSON wants a pointer that is never null, even for an empty string.
const char* Chars(std::string_view s) { return s.data() != nullptr ? s.data() : ""; }
rapidjson::SizeType Size(std::string_view s) { return static_cast<rapidjson::SizeType>(s.size()); }

}  // namespace

JsonWriter::JsonWriter(bool pretty)
    : writer_(pretty ? decltype(writer_)(std::in_place_type<Pretty>, out_)
                     : decltype(writer_)(std::in_place_type<Compact>, out_)) {
  if (auto* p = std::get_if<Pretty>(&writer_)) p->SetIndent(' ', 2);
}

JsonWriter& JsonWriter::BeginObject() {
  return Apply([](auto& w) { w.StartObject(); });
}

JsonWriter& JsonWriter::EndObject() {
  Apply([](auto& w) { w.EndObject(); });
  if (std::holds_alternative<Pretty>(writer_) && std::get<Pretty>(writer_).IsComplete()) {
    out_.text += '\n';
  }
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  return Apply([](auto& w) { w.StartArray(); });
}

JsonWriter& JsonWriter::EndArray() {
  return Apply([](auto& w) { w.EndArray(); });
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  return Apply([key](auto& w) { w.Key(Chars(key), Size(key)); });
}

JsonWriter& JsonWriter::String(std::string_view value) {
  return Apply([value](auto& w) { w.String(Chars(value), Size(value)); });
}

JsonWriter& JsonWriter::Int(int64_t value) {
  return Apply([value](auto& w) { w.Int64(value); });
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  return Apply([value](auto& w) { w.Uint64(value); });
}

JsonWriter& JsonWriter::Double(double value) {
  if (!std::isfinite(value)) return Null();
  // A fixed three decimals (RapidJSON writes the shortest form): outputs keep one shape.
  char buf[320];  // room for DBL_MAX's 309 digits
  const int n = std::snprintf(buf, sizeof(buf), "%.3f", value);
  return Apply([&](auto& w) { w.RawValue(buf, static_cast<size_t>(n), rapidjson::kNumberType); });
}

JsonWriter& JsonWriter::Bool(bool value) {
  return Apply([value](auto& w) { w.Bool(value); });
}

JsonWriter& JsonWriter::Null() {
  return Apply([](auto& w) { w.Null(); });
}

JsonWriter& JsonWriter::StringArray(std::string_view key, const std::vector<std::string>& values) {
  Key(key).BeginArray();
  for (const auto& v : values) String(v);
  return EndArray();
}

std::string JsonEscape(std::string_view s) {
  JsonWriter writer(/*pretty=*/false);
  const std::string& quoted = writer.String(s).str();
  return quoted.substr(1, quoted.size() - 2);
}

}  // namespace ad
