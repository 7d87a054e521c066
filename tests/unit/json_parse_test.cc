// The bounded JSON reader over RapidJSON (model/json_reader.h): values, the size and depth
// bounds, and the error paths every peer and file parser relies on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/json_reader.h"

namespace ad {
namespace {

JsonStatus Parse(std::string_view text, const JsonLimits& limits = {}) {
  rapidjson::Document document;
  return ParseJsonDocument(text, document, limits);
}

TEST(JsonParse, ParsesNestedDocument) {
  rapidjson::Document v;
  const JsonStatus r =
      ParseJsonDocument(R"({"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "x\u00e9\n"}})", v);
  ASSERT_TRUE(r.ok()) << r.error;
  const rapidjson::Value* a = JsonMember(v, "a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->Size(), 6u);
  EXPECT_DOUBLE_EQ((*a)[2].GetDouble(), -300);
  EXPECT_TRUE((*a)[3].GetBool());
  EXPECT_TRUE((*a)[5].IsNull());
  EXPECT_EQ(JsonStringMember(*JsonMember(v, "b"), "c"), "x\xc3\xa9\n");
  EXPECT_EQ(JsonMember(v, "missing"), nullptr);
  EXPECT_EQ(JsonMember(*a, "x"), nullptr);  // not an object
  EXPECT_EQ(JsonStringMember(v, "a"), "");  // not a string
}

TEST(JsonParse, RepeatedNamesReadAsTheLast) {
  rapidjson::Document v;
  ASSERT_TRUE(ParseJsonDocument(R"({"k": "first", "k": "last"})", v).ok());
  EXPECT_EQ(JsonStringMember(v, "k"), "last");
}

TEST(JsonParse, SurrogatePairsDecodeToUtf8) {
  rapidjson::Document v;
  const JsonStatus r = ParseJsonDocument(R"("\ud83d\ude00")", v);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(JsonText(&v), "\xf0\x9f\x98\x80");
}

TEST(JsonParse, MalformedInputGivesAnErrorWithOffset) {
  for (const char* bad :
       {"", "{", "[1,", "{\"a\" 1}", "tru", "\"abc", "01x", "[1 2]", "{\"a\":}", "\"\\x\"",
        "\"\\u12\"", "1 2", "-", "1.", "1e", "{\"a\":1,}", "[1,]", "\"tab\there\"", "1e400"}) {
    rapidjson::Document v;
    const JsonStatus r = ParseJsonDocument(bad, v);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.error.starts_with("offset ")) << bad << ": " << r.error;
    EXPECT_TRUE(v.IsNull()) << bad;
  }
  EXPECT_EQ(Parse(R"({"a" 1})").error, "offset 5: missing a colon after a name of object member");
  EXPECT_EQ(Parse("[1 2]").error, "offset 3: missing a comma or ']' after an array element");
}

TEST(JsonParse, NothingMayFollowTheValue) {
  EXPECT_EQ(Parse("{} x").error,
            "offset 3: the document root must not be followed by other values");
  // RapidJSON reads NUL as the end of its input: what follows one must not go unseen.
  EXPECT_EQ(Parse(std::string("{}\0x", 4)).error, "offset 2: trailing data after the JSON value");
  EXPECT_FALSE(Parse(std::string("\0{}", 3)).ok());
  EXPECT_TRUE(Parse(" {} \n").ok());
}

TEST(JsonParse, DepthAndSizeAreBounded) {
  const std::string deep(10000, '[');
  const JsonStatus r = Parse(deep);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("nesting deeper than 64"), std::string::npos) << r.error;
  JsonLimits small;
  small.max_bytes = 4;
  EXPECT_EQ(Parse("[1,2,3]", small).error, "input of 7 bytes exceeds the limit of 4");
  EXPECT_TRUE(Parse("[1,2]", JsonLimits{.max_bytes = 5}).ok());
}

// The depth counts the containers around a value, the root's not counted: 64 are allowed.
TEST(JsonParse, DepthLimitIsExact) {
  auto nested = [](size_t depth, const std::string& inner) {
    return std::string(depth, '[') + inner + std::string(depth, ']');
  };
  EXPECT_TRUE(Parse(nested(64, "1")).ok());
  EXPECT_FALSE(Parse(nested(65, "1")).ok());
  EXPECT_TRUE(Parse(nested(65, "")).ok());  // the innermost (empty) array is at depth 64
  EXPECT_FALSE(Parse(nested(66, "")).ok());
  EXPECT_TRUE(Parse(nested(2, "1"), JsonLimits{.max_depth = 2}).ok());
  EXPECT_FALSE(Parse(nested(3, "1"), JsonLimits{.max_depth = 2}).ok());
}

TEST(JsonParse, EveryPrefixOfAValidDocumentIsHandled) {
  const std::string doc = R"({"workloadState": {"u1": {"state": "Up", "info": {"name": "a"}}}})";
  for (size_t n = 0; n < doc.size(); ++n) {
    EXPECT_FALSE(Parse(doc.substr(0, n)).ok()) << n;
  }
  EXPECT_TRUE(Parse(doc).ok());
}

// The streaming form: a SAX handler sees the events and nothing is built.
struct Recorder : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Recorder> {
  std::vector<std::string> events;
  bool Default() {
    events.push_back("value");
    return true;
  }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    events.push_back("string " + std::string(s, n));
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    events.push_back("key " + std::string(s, n));
    return true;
  }
  bool StartObject() {
    events.push_back("{");
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    events.push_back("}");
    return true;
  }
};

TEST(JsonParse, StreamsEventsToAHandler) {
  Recorder recorder;
  ASSERT_TRUE(ReadJson(R"({"a": "b", "c": {"d": null}})", recorder).ok());
  EXPECT_EQ(recorder.events, (std::vector<std::string>{"{", "key a", "string b", "key c", "{",
                                                       "key d", "value", "}", "}"}));
  Recorder deep;
  const JsonStatus r = ReadJson(R"({"a": {"b": {"c": 1}}})", deep, JsonLimits{.max_depth = 2});
  EXPECT_EQ(r.error, "offset 18: nesting deeper than 2");  // at the 1, three containers deep
}

}  // namespace
}  // namespace ad
