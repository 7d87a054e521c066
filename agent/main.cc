// ambient-doctor: CLI dispatch only, after the process-wide open-file limit.
#include <sys/resource.h>

#include <algorithm>

#include "cli/cli.h"

namespace {

// The daemon holds a few fds per watched netns (about 7 per pod), which passes the soft
// RLIMIT_NOFILE of 1024 that containerd 2.x gives containers (hard limit 524288) on a node of
// ~140 pods: sources then fail with EMFILE. The soft limit is only a default for programs that
// did not ask; raise it to the hard one (as Go runtimes do), capped at 2^20 so nothing that walks
// the fd table up to the limit gets slow. Best effort: a refusal keeps the old limit.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = std::min<rlim_t>(limit.rlim_max, rlim_t{1} << 20);
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = wanted;
  (void)::setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

int main(int argc, char** argv) {
  RaiseOpenFileLimit();
  return ad::cli::Main(argc, argv);
}
