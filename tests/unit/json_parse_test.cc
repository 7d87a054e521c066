#include "model/json_parse.h"

#include <gtest/gtest.h>

#include <string>

namespace ad {
namespace {

TEST(JsonParse, ParsesNestedDocument) {
  auto r = ParseJson(R"({"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "x\u00e9\n"}})");
  ASSERT_TRUE(r.value) << r.error;
  const JsonValue& v = *r.value;
  ASSERT_EQ(v.Get("a")->items().size(), 6u);
  EXPECT_DOUBLE_EQ(v.Get("a")->items()[2].AsNumber(), -300);
  EXPECT_TRUE(v.Get("a")->items()[3].AsBool());
  EXPECT_TRUE(v.Get("a")->items()[5].is_null());
  EXPECT_EQ(v.Get("b")->GetString("c"), "x\xc3\xa9\n");
  EXPECT_EQ(v.Get("missing"), nullptr);
  EXPECT_EQ(v.GetString("a"), "");
}

TEST(JsonParse, SurrogatePairsDecodeToUtf8) {
  auto r = ParseJson(R"("\ud83d\ude00")");
  ASSERT_TRUE(r.value) << r.error;
  EXPECT_EQ(r.value->AsString(), "\xf0\x9f\x98\x80");
}

TEST(JsonParse, MalformedInputGivesAnErrorWithOffset) {
  for (const char* bad : {"", "{", "[1,", "{\"a\" 1}", "tru", "\"abc", "01x", "[1 2]", "{\"a\":}",
                          "\"\\x\"", "\"\\u12\"", "1 2", "-", "1.", "1e"}) {
    auto r = ParseJson(bad);
    EXPECT_FALSE(r.value) << bad;
    EXPECT_FALSE(r.error.empty()) << bad;
  }
}

TEST(JsonParse, DepthAndSizeAreBounded) {
  std::string deep(10000, '[');
  auto r = ParseJson(deep);
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.error.find("nesting"), std::string::npos);
  JsonLimits small;
  small.max_bytes = 4;
  EXPECT_FALSE(ParseJson("[1,2,3]", small).value);
}

TEST(JsonParse, EveryPrefixOfAValidDocumentIsHandled) {
  const std::string doc = R"({"workloadState": {"u1": {"state": "Up", "info": {"name": "a"}}}})";
  for (size_t n = 0; n < doc.size(); ++n) {
    auto r = ParseJson(doc.substr(0, n));
    EXPECT_FALSE(r.value) << n;
  }
  EXPECT_TRUE(ParseJson(doc).value);
}

}  // namespace
}  // namespace ad
