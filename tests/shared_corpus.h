// Where tests find the shared test corpus (Istio's golden rule files, observed netfilter dumps,
// CRI captures): `$AD_SHARED_DIR/corpus` when the variable is set (even to a path that does not
// exist, so CI can prove the suite passes without the corpus), else the `../shared` beside the
// checkout that CMake compiled in. A fresh clone has no `../shared`: every test that reads the
// corpus checks HaveCorpus() first and skips with CorpusAbsentReason().
//
// Including this header is what tests/CMakeLists.txt looks for to give a test the `corpus` label
// and the compiled-in AD_SHARED_DIR; tests that do not include it cannot see that path.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#ifndef AD_SHARED_DIR
#error "AD_SHARED_DIR is set by tests/CMakeLists.txt for tests that include shared_corpus.h"
#endif

namespace ad::corpus {

inline constexpr char kSharedDirVariable[] = "AD_SHARED_DIR";

// The shared directory (it holds corpus/ and facts/).
inline std::filesystem::path SharedDir() {
  if (const char* from_env = std::getenv(kSharedDirVariable)) return from_env;
  return AD_SHARED_DIR;
}

// A path inside the corpus, e.g. CorpusPath("istio-golden/cni/pkg").
inline std::filesystem::path CorpusPath(std::string_view relative = {}) {
  std::filesystem::path root = SharedDir() / "corpus";
  return relative.empty() ? root : root / relative;
}

// Whether the corpus is there at all. When it is, a missing file inside it is a test failure,
// not a skip.
inline bool HaveCorpus() {
  std::error_code ignored;
  return std::filesystem::is_directory(CorpusPath(), ignored);
}

inline std::string CorpusAbsentReason() {
  const bool from_env = std::getenv(kSharedDirVariable) != nullptr;
  return "shared test corpus absent: no directory " + CorpusPath().string() + " (" +
         (from_env ? "from $AD_SHARED_DIR" : "compiled-in ../shared; set $AD_SHARED_DIR") + ")";
}

}  // namespace ad::corpus
