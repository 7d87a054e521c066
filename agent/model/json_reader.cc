#include "model/json_reader.h"

#include <rapidjson/error/en.h>

#include <cctype>

namespace ad {
namespace json_internal {

std::string SizeError(size_t size, size_t limit) {
  return "input of " + std::to_string(size) + " bytes exceeds the limit of " +
         std::to_string(limit);
}

std::string ParseError(const rapidjson::ParseResult& result, bool too_deep, size_t max_depth) {
  std::string message = "offset " + std::to_string(result.Offset()) + ": ";
  if (too_deep) return message + "nesting deeper than " + std::to_string(max_depth);
  // RapidJSON's English sentences ("Missing a colon after a name of object member."), in the
  // lower-case, unpunctuated form of the messages they are embedded in.
  std::string reason = rapidjson::GetParseError_En(result.Code());
  if (!reason.empty() && reason.back() == '.') reason.pop_back();
  if (!reason.empty()) reason[0] = static_cast<char>(std::tolower(reason[0]));
  return message + reason;
}

std::string TrailingError(size_t offset) {
  return "offset " + std::to_string(offset) + ": trailing data after the JSON value";
}

}  // namespace json_internal

JsonStatus ParseJsonDocument(std::string_view text, rapidjson::Document& document,
                             const JsonLimits& limits) {
  JsonStatus status;
  // Populate hands the document (a SAX handler itself) to the bounded reader and keeps the value
  // only when the generator reports success.
  auto generate = [&](rapidjson::Document& handler) {
    status = ReadJson(text, handler, limits);
    return status.ok();
  };
  document.Populate(generate);
  if (!status.ok()) document.SetNull();
  return status;
}

const rapidjson::Value* JsonMember(const rapidjson::Value& object, std::string_view key) {
  if (!object.IsObject()) return nullptr;
  for (auto it = object.MemberEnd(); it != object.MemberBegin();) {
    --it;
    if (std::string_view(it->name.GetString(), it->name.GetStringLength()) == key) {
      return &it->value;
    }
  }
  return nullptr;
}

std::string_view JsonText(const rapidjson::Value* value) {
  if (value == nullptr || !value->IsString()) return {};
  return {value->GetString(), value->GetStringLength()};
}

std::string_view JsonStringMember(const rapidjson::Value& object, std::string_view key) {
  return JsonText(JsonMember(object, key));
}

}  // namespace ad
