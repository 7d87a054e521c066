// Result<T>: a value or a SourceError; Status: ok or a SourceError, for an operation that yields
// no value. Expected failures (EPERM, vanished netns, peer down) travel as values; exceptions are
// reserved for programming errors. Both convert to true when ok, so `if (!status)` is the error.
#pragma once

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "model/snapshot.h"

namespace ad {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}            // NOLINT: implicit by design
  Result(SourceError error) : error_(std::move(error)) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  const SourceError& error() const { return error_; }

 private:
  std::optional<T> value_;
  SourceError error_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;                                      // ok
  Status(SourceError error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const SourceError& error() const { return *error_; }  // only when !ok()

 private:
  std::optional<SourceError> error_;
};
inline Status OkStatus() { return Status(); }

// "setns(/run/netns/x): Operation not permitted" style error from the current errno.
inline SourceError ErrnoError(SourceKind kind, const std::string& what, int err = errno) {
  return SourceError{kind, what + ": " + std::strerror(err), err};
}

}  // namespace ad
