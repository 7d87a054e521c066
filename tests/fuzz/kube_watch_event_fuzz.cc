// Fuzz target: the Kubernetes API decoders (sources/kube/kube_decode.h). The first byte picks the
// watched kind; the rest is read as one watch-event line, a list page, a Status body and an object.
// Malformed input must give an error text, never a crash; what decodes must be consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sources/kube/kube_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto kind = static_cast<ad::kube::KubeKind>(data[0] % 3);
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string error;
  auto event = ad::kube::DecodeWatchEvent(text, kind, &error);
  if (!event && error.empty()) std::abort();
  if (event && event->object.kind != kind) std::abort();
  error.clear();
  auto list = ad::kube::DecodeList(text, kind, &error);
  if (!list && error.empty()) std::abort();
  if (list && list->resource_version.empty()) std::abort();
  if (list) {
    for (const auto& item : list->items) {
      if (item.kind != kind) std::abort();
    }
  }
  error.clear();
  auto status = ad::kube::DecodeStatus(text, &error);
  if (!status && error.empty()) std::abort();
  error.clear();
  auto object = ad::kube::DecodeObject(text, kind, &error);
  if (!object && error.empty()) std::abort();
  (void)ad::kube::ParseRfc3339(text);
  return 0;
}
