#include "cli/cli.h"

#include <cstdio>

namespace ad::cli {

int Main(int /*argc*/, char** /*argv*/) {
  std::puts("ambient-doctor: not yet implemented");
  return 2;
}

}  // namespace ad::cli
