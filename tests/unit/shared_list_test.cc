// SharedList: copies share one list until one of them is changed; equality is by content.
#include "model/shared_list.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ad {
namespace {

TEST(SharedListTest, CopiesShareUntilOneIsChanged) {
  SharedList<std::string> a = {"x", "y"};
  SharedList<std::string> b = a;
  EXPECT_EQ(&a.items(), &b.items());
  b[1] = "z";  // detaches b
  EXPECT_NE(&a.items(), &b.items());
  EXPECT_EQ(a.items(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(b.items(), (std::vector<std::string>{"x", "z"}));
  b.push_back("w");
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(a.size(), 2u);
}

TEST(SharedListTest, AnUnsharedListIsChangedInPlace) {
  SharedList<int> a = std::vector<int>{1, 2, 3};
  const std::vector<int>* before = &a.items();
  a.push_back(4);
  EXPECT_EQ(&a.items(), before);
  EXPECT_EQ(a.back(), 4);
}

TEST(SharedListTest, EqualityIsByContent) {
  SharedList<int> a = {1, 2};
  SharedList<int> b = {1, 2};
  SharedList<int> c = {1, 3};
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == c);
  EXPECT_EQ(SharedList<int>(), SharedList<int>(std::vector<int>{}));
}

TEST(SharedListTest, ClearEmptiesOnlyThisCopy) {
  SharedList<int> a = {1};
  SharedList<int> b = a;
  b.clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(a.size(), 1u);
  int sum = 0;
  for (int value : b) sum += value;  // an empty list iterates like an empty vector
  EXPECT_EQ(sum, 0);
}

}  // namespace
}  // namespace ad
