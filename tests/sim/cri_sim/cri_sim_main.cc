// cri-sim: the lab node's container runtime, as far as the CRI read path goes (see cri_server.h).
// SIGTERM/SIGINT stop it cleanly (socket file removed); the pods file is re-read per request.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cri_sim/cri_server.h"

namespace {

constexpr char kUsage[] = R"(usage: cri-sim --socket PATH --pods-file FILE [options]

  --socket PATH     unix socket to serve runtime.v1.RuntimeService on (a stale file is unlinked)
  --pods-file FILE  pods, one per line: uid name namespace service-account netns-path
                    (cni-sim's format; re-read on every request)
  --ips-file FILE   pod IPs, one pod per line: uid ipv4 [ipv6] (optional)
  --quiet           no log lines on stderr
)";

int g_stop_pipe[2] = {-1, -1};

void OnStopSignal(int) {
  const int saved = errno;
  const char byte = 1;
  (void)!::write(g_stop_pipe[1], &byte, 1);
  errno = saved;
}

int Fail(const std::string& message) {
  std::cerr << "cri-sim: " << message << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  ad::sim::CriSimOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) return false;
      out = args[++i];
      return true;
    };
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--quiet") {
      options.log_to_stderr = false;
    } else if (arg == "--socket" && value(options.socket_path)) {
    } else if (arg == "--pods-file" && value(options.pods_file)) {
    } else if (arg == "--ips-file" && value(options.ips_file)) {
    } else {
      return Fail("bad argument '" + std::string(arg) + "'");
    }
  }
  if (options.socket_path.empty() || options.pods_file.empty()) {
    return Fail("--socket and --pods-file are required");
  }
  // gRPC runs threads of its own (some started before main), so a signal may land on any
  // thread: the handler only writes to a pipe that the main thread waits on.
  if (::pipe2(g_stop_pipe, O_CLOEXEC) != 0) return Fail("pipe2 failed");
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGTERM, SIGINT}) sigaction(signal, &action, nullptr);
  // SIGHUP: nothing to reload (the pods file is read per request).
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);

  ad::Result<std::unique_ptr<ad::sim::CriSimServer>> server = ad::sim::CriSimServer::Start(options);
  if (!server.ok()) {
    std::cerr << "cri-sim: " << server.error().message << "\n";
    return 1;
  }
  char byte = 0;
  while (::read(g_stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  (*server)->Shutdown();
  if (options.log_to_stderr) std::cerr << "cri-sim: stopped\n";
  return 0;
}
