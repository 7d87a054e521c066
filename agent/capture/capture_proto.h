// Model <-> ambientdoctor.v1.Capture conversion (private to the capture layer). Each model struct
// has a Put (model -> message) and a Get (message -> model) of its own name; the field-for-field
// round trip is what tests/unit/capture_codec_test.cc checks.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "ambientdoctor/v1/capture.pb.h"
#include "capture/capture.h"

namespace ad::capture {

namespace pb = ::ambientdoctor::v1;

// The whole capture.
void PutCapture(const Capture& in, pb::Capture* out);
Capture GetCapture(const pb::Capture& in);

// The payload inside the gzip stream (one Capture message), with Decode's checks. The fuzz target
// and the tests also feed it directly, past the CRC that guards it in a file.
Result<Capture> DecodePayload(std::string_view payload);

// The manifest alone: read before the rest is trusted.
Manifest GetManifest(const pb::CaptureManifest& in);

// Parts shared by the two conversion files.
void PutNetns(const NetnsSnapshot& in, pb::CaptureNetns* out);
NetnsSnapshot GetNetns(const pb::CaptureNetns& in);
void PutSourceError(const SourceError& in, pb::CaptureSourceError* out);
SourceError GetSourceError(const pb::CaptureSourceError& in);
pb::CaptureFamily PutFamily(Family family);
Family GetFamily(int family);

// ---------------------------------------------------------------------------------------------
// Enums: a table of (model, proto) pairs per enum. Proto numbers are the file's own and stable; a
// number the table lacks (a newer writer's value, or garbage) reads as the given fallback.

template <typename Model, typename Proto>
struct EnumPair {
  Model model;
  Proto proto;
};

template <typename Model, typename Proto, size_t N>
Proto EnumToProto(const EnumPair<Model, Proto> (&table)[N], Model value) {
  for (const auto& pair : table) {
    if (pair.model == value) return pair.proto;
  }
  return Proto{};  // unreachable for a table that covers the enum (static_assert'ed)
}

template <typename Model, typename Proto, size_t N>
Model EnumFromProto(const EnumPair<Model, Proto> (&table)[N], int value, Model fallback) {
  for (const auto& pair : table) {
    if (static_cast<int>(pair.proto) == value) return pair.model;
  }
  return fallback;
}

// Every model value 0..count-1 appears in the table exactly once.
template <typename Model, typename Proto, size_t N>
constexpr bool CoversEnum(const EnumPair<Model, Proto> (&table)[N], size_t count) {
  if (N != count) return false;
  for (size_t value = 0; value < count; ++value) {
    size_t seen = 0;
    for (const auto& pair : table) {
      if (static_cast<size_t>(pair.model) == value) ++seen;
    }
    if (seen != 1) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Lists.

template <typename T, typename Pb, typename Put>
void PutList(const std::vector<T>& items, google::protobuf::RepeatedPtrField<Pb>* out, Put put) {
  out->Reserve(static_cast<int>(items.size()));
  for (const T& item : items) put(item, out->Add());
}

template <typename Pb, typename Get>
auto GetList(const google::protobuf::RepeatedPtrField<Pb>& in, Get get) {
  std::vector<std::invoke_result_t<Get, const Pb&>> out;
  out.reserve(static_cast<size_t>(in.size()));
  for (const Pb& item : in) out.push_back(get(item));
  return out;
}

// Repeated scalars and strings, into a vector of the model's element type.
template <typename T, typename Field>
std::vector<T> GetValues(const Field& in) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(in.size()));
  for (const auto& value : in) out.push_back(static_cast<T>(value));
  return out;
}

template <typename T, typename Field>
void PutValues(const std::vector<T>& in, Field* out) {
  out->Add(in.begin(), in.end());
}

inline std::vector<std::string> GetStrings(
    const google::protobuf::RepeatedPtrField<std::string>& in) {
  return {in.begin(), in.end()};
}

}  // namespace ad::capture
