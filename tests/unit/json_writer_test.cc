#include <gtest/gtest.h>

#include <string>

#include "model/json.h"
#include "model/json_reader.h"

namespace ad {
namespace {

TEST(JsonWriter, EscapesControlCharactersAndQuotes) {
  EXPECT_EQ(JsonEscape("a\"b\\c\n\x01"), "a\\\"b\\\\c\\n\\u0001");
  // RapidJSON's short forms for backspace and form feed, upper-case hex for the rest; bytes from
  // 0x20 up (UTF-8 included) as they are.
  EXPECT_EQ(JsonEscape("\b\f\r\t\x1f/\xc3\xa9"), "\\b\\f\\r\\t\\u001F/\xc3\xa9");
}

TEST(JsonWriter, CompactNestedDocument) {
  JsonWriter j(/*pretty=*/false);
  j.BeginObject().Field("a", 1).Key("b").BeginArray().String("x").Null().Bool(true).EndArray();
  j.Key("c").BeginObject().EndObject().EndObject();
  EXPECT_EQ(j.str(), R"({"a":1,"b":["x",null,true],"c":{}})");
}

TEST(JsonWriter, NonFiniteDoubleBecomesNull) {
  JsonWriter j(false);
  j.BeginArray().Double(1.0 / 0.0).Double(2.5).EndArray();
  EXPECT_EQ(j.str(), "[null,2.500]");
}

// The shapes `report -o json` writes (pretty is the default): nested objects in arrays, string
// arrays, null, empty containers, numbers too wide for an int.
void WriteReportLikeDocument(JsonWriter& j) {
  j.BeginObject();
  j.Field("schema", "ambient-doctor/report/v1");
  j.Field("taken_at_unix_ms", int64_t{1796000000123});
  j.Key("netns").BeginArray();
  j.BeginObject()
      .Field("path", "/run/netns/pod a")
      .Field("inode", uint64_t{4026532300})
      .Key("pod")
      .Null()
      .EndObject();
  j.BeginObject().EndObject();
  j.EndArray();
  j.StringArray("evidence", {"rule \"x\"", "tab\there"});
  j.Key("errors").BeginArray().EndArray();
  j.Field("ratio", 0.5);
  j.Field("ok", true);
  j.EndObject();
}

TEST(JsonWriter, PrettyIndentsByTwoAndEndsTheDocumentWithNewline) {
  JsonWriter j;  // the default, what report -o json uses
  WriteReportLikeDocument(j);
  EXPECT_EQ(j.str(), R"({
  "schema": "ambient-doctor/report/v1",
  "taken_at_unix_ms": 1796000000123,
  "netns": [
    {
      "path": "/run/netns/pod a",
      "inode": 4026532300,
      "pod": null
    },
    {}
  ],
  "evidence": [
    "rule \"x\"",
    "tab\there"
  ],
  "errors": [],
  "ratio": 0.500,
  "ok": true
}
)");
}

TEST(JsonWriter, PrettyEmptyDocumentIsOneLine) {
  JsonWriter j(/*pretty=*/true);
  j.BeginObject().EndObject();
  EXPECT_EQ(j.str(), "{}\n");
}

// Drops the whitespace pretty mode adds between tokens, keeping what is inside strings.
std::string WithoutLayout(const std::string& json) {
  std::string out;
  bool in_string = false;
  bool escaped = false;
  for (char c : json) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == ' ' || c == '\n') {
      continue;
    }
    out += c;
  }
  return out;
}

TEST(JsonWriter, PrettyAndCompactDifferOnlyInLayout) {
  JsonWriter pretty(/*pretty=*/true);
  JsonWriter compact(/*pretty=*/false);
  WriteReportLikeDocument(pretty);
  WriteReportLikeDocument(compact);
  EXPECT_EQ(WithoutLayout(pretty.str()), compact.str());

  rapidjson::Document parsed;
  const JsonStatus read = ParseJsonDocument(pretty.str(), parsed);
  ASSERT_TRUE(read.ok()) << read.error;
  const rapidjson::Value* netns = JsonMember(parsed, "netns");
  ASSERT_NE(netns, nullptr);
  ASSERT_EQ(netns->Size(), 2u);
  EXPECT_EQ(JsonStringMember((*netns)[0], "path"), "/run/netns/pod a");
  EXPECT_EQ(JsonMember((*netns)[0], "inode")->GetUint64(), 4026532300u);
  const rapidjson::Value* evidence = JsonMember(parsed, "evidence");
  ASSERT_NE(evidence, nullptr);
  EXPECT_EQ(JsonText(&(*evidence)[1]), "tab\there");
}

}  // namespace
}  // namespace ad
