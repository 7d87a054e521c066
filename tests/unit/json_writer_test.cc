#include <gtest/gtest.h>

#include "model/json.h"

namespace ad {
namespace {

TEST(JsonWriter, EscapesControlCharactersAndQuotes) {
  EXPECT_EQ(JsonEscape("a\"b\\c\n\x01"), "a\\\"b\\\\c\\n\\u0001");
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

}  // namespace
}  // namespace ad
