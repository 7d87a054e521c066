// EPERM: an agent without CAP_SYS_ADMIN cannot enter pod network namespaces. Each one must come
// back as a NETNS_UNREADABLE finding naming setns and the errno text, never a crash or a partial
// read mistaken for a broken rule set.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "analysis/analysis.h"
#include "netns_test_util.h"
#include "scan/inspector.h"

namespace ad {
namespace {

TEST(Eperm, UnprivilegedInspectionIsUnreadableNotACrash) {
  if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create the netns it then cannot enter";
  testing::ScopedNetns netns("eperm");
  ASSERT_TRUE(netns.ok());
  const std::string path = netns.path();

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Drop to nobody: no CAP_SYS_ADMIN, so setns() must fail with EPERM.
    ::close(pipe_fds[0]);
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) _exit(3);
    NetnsRecord record;
    record.paths = {path};
    NodeSnapshot node;
    node.netns.push_back(MakeKernelInspector(ReadLimits{})->Inspect(record));
    const NodeAnalysis analysis = Analyze(node);
    std::string report = node.netns[0].unreadable ? "unreadable" : "read";
    for (const auto& e : node.netns[0].errors) report += "|" + e.message;
    for (const auto& f : analysis.findings) report += "|" + std::string(f.code_name());
    (void)!::write(pipe_fds[1], report.data(), report.size());
    _exit(0);
  }
  ::close(pipe_fds[1]);
  std::string report;
  char buffer[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) report.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the unprivileged inspection crashed";
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(report.rfind("unreadable", 0), 0u) << report;
  EXPECT_NE(report.find("Operation not permitted"), std::string::npos) << report;
  EXPECT_NE(report.find("NETNS_UNREADABLE"), std::string::npos) << report;
}

}  // namespace
}  // namespace ad
