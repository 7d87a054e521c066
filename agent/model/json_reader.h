// Bounded JSON reading (RFC 8259) over RapidJSON for what peers and files give us: ztunnel's
// /config_dump (streamed through a SAX handler, never held as a tree), the CNI config and the CRI
// verbose info (small documents). Input size and nesting depth are limited — RapidJSON's reader
// has no depth limit of its own, so DepthLimit enforces one on the events — and malformed input
// gives an error message, never a crash. Numbers outside a double's range are malformed input.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ad {

struct JsonLimits {
  size_t max_bytes = 64 << 20;
  size_t max_depth = 64;  // containers a value may sit in ([[1]]: the 1 sits in two)
};

// The outcome of reading a text: ok, or why not ("offset 17: missing a colon after a name of
// object member", "input of 9 bytes exceeds the limit of 4", "offset 70: nesting deeper than 64").
struct [[nodiscard]] JsonStatus {
  std::string error;  // empty when the text was read whole
  bool ok() const { return error.empty(); }
};

namespace json_internal {

std::string SizeError(size_t size, size_t limit);
std::string ParseError(const rapidjson::ParseResult& result, bool too_deep, size_t max_depth);
std::string TrailingError(size_t offset);

// Forwards RapidJSON's SAX events to `Handler` and stops the reader at a value nested deeper than
// `max_depth` (before it recurses into it).
template <typename Handler>
class DepthLimit {
 public:
  using Ch = char;
  DepthLimit(Handler& handler, size_t max_depth) : handler_(handler), max_depth_(max_depth) {}

  bool too_deep() const { return too_deep_; }

  bool Null() { return Fits() && handler_.Null(); }
  bool Bool(bool b) { return Fits() && handler_.Bool(b); }
  bool Int(int i) { return Fits() && handler_.Int(i); }
  bool Uint(unsigned u) { return Fits() && handler_.Uint(u); }
  bool Int64(int64_t i) { return Fits() && handler_.Int64(i); }
  bool Uint64(uint64_t u) { return Fits() && handler_.Uint64(u); }
  bool Double(double d) { return Fits() && handler_.Double(d); }
  bool RawNumber(const Ch* s, rapidjson::SizeType n, bool copy) {
    return Fits() && handler_.RawNumber(s, n, copy);
  }
  bool String(const Ch* s, rapidjson::SizeType n, bool copy) {
    return Fits() && handler_.String(s, n, copy);
  }
  bool Key(const Ch* s, rapidjson::SizeType n, bool copy) { return handler_.Key(s, n, copy); }
  bool StartObject() { return Fits() && (++depth_, handler_.StartObject()); }
  bool EndObject(rapidjson::SizeType members) { return --depth_, handler_.EndObject(members); }
  bool StartArray() { return Fits() && (++depth_, handler_.StartArray()); }
  bool EndArray(rapidjson::SizeType items) { return --depth_, handler_.EndArray(items); }

 private:
  bool Fits() {
    too_deep_ = depth_ > max_depth_;
    return !too_deep_;
  }

  Handler& handler_;
  size_t max_depth_;
  size_t depth_ = 0;
  bool too_deep_ = false;
};

}  // namespace json_internal

// Streams `text` through `handler` (RapidJSON's Handler concept: Null, Bool, Int, ..., String,
// Key, StartObject, EndObject(n), StartArray, EndArray(n); false stops the read). The handler
// sees every event of a text that turns out malformed up to the error, so it keeps nothing it
// cannot drop.
template <typename Handler>
JsonStatus ReadJson(std::string_view text, Handler& handler, const JsonLimits& limits = {}) {
  if (text.size() > limits.max_bytes)
    return {json_internal::SizeError(text.size(), limits.max_bytes)};
  // A MemoryStream (not a StringStream): the text needs no terminating NUL, and the reader stops
  // at an embedded one, which the Tell() check below turns into an error.
  rapidjson::MemoryStream stream(text.data(), text.size());
  json_internal::DepthLimit<Handler> limited(handler, limits.max_depth);
  rapidjson::Reader reader;
  const rapidjson::ParseResult result = reader.Parse(stream, limited);
  if (result.IsError()) {
    return {json_internal::ParseError(result, limited.too_deep(), limits.max_depth)};
  }
  if (stream.Tell() != text.size()) return {json_internal::TrailingError(stream.Tell())};
  return {};
}

// A whole small document as a tree, under the same bounds. On error `document` is left null.
JsonStatus ParseJsonDocument(std::string_view text, rapidjson::Document& document,
                             const JsonLimits& limits = {});

// The member named `key`, the last one when the name repeats (as Go's encoding/json and serde
// read it); nullptr when absent or when `object` is not an object.
const rapidjson::Value* JsonMember(const rapidjson::Value& object, std::string_view key);
// The value's text; "" when it is absent or not a string.
std::string_view JsonText(const rapidjson::Value* value);
// JsonText(JsonMember(object, key)).
std::string_view JsonStringMember(const rapidjson::Value& object, std::string_view key);

}  // namespace ad
