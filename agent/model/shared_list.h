// A list that copies share until one of them is changed (copy-on-write). For the large, rarely
// changing parts of a snapshot (ztunnel's workload lists: cluster-wide, thousands of entries) that
// a daemon poll takes over from a cached answer: sharing costs a reference count, where a copy
// cost an allocation per string of every entry, every poll. Reads look like a const vector's;
// writers detach first. Equal when both share one list or hold equal entries.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

namespace ad {

template <typename T>
class SharedList {
 public:
  SharedList() = default;
  SharedList(std::vector<T> items)  // NOLINT(google-explicit-constructor): a list is its items
      : items_(std::make_shared<std::vector<T>>(std::move(items))) {}
  SharedList(std::initializer_list<T> items) : SharedList(std::vector<T>(items)) {}

  const std::vector<T>& items() const { return items_ ? *items_ : Empty(); }
  auto begin() const { return items().begin(); }
  auto end() const { return items().end(); }
  size_t size() const { return items().size(); }
  bool empty() const { return items().empty(); }
  const T& operator[](size_t i) const { return items()[i]; }
  const T& back() const { return items().back(); }

  // The list to change, no longer shared with any copy.
  std::vector<T>& Mutable() {
    if (!items_) {
      items_ = std::make_shared<std::vector<T>>();
    } else if (items_.use_count() > 1) {
      items_ = std::make_shared<std::vector<T>>(*items_);
    }
    return *items_;
  }
  T& operator[](size_t i) { return Mutable()[i]; }
  void push_back(T item) { Mutable().push_back(std::move(item)); }
  void clear() { items_.reset(); }

  bool operator==(const SharedList& other) const {
    return items_ == other.items_ || items() == other.items();
  }

 private:
  static const std::vector<T>& Empty() {
    static const std::vector<T> kEmpty;
    return kEmpty;
  }
  std::shared_ptr<std::vector<T>> items_;
};

}  // namespace ad
