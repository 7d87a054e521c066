// cni-sim: stands in for istio-cni's ZDS server on the lab node. Pods come from a pods file that
// is re-read on SIGHUP; SIGTERM/SIGINT stop it cleanly (socket file removed).
#include <signal.h>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cni_sim/cni_server.h"

namespace {

constexpr char kUsage[] = R"(usage: cni-sim --socket PATH [options]

  --socket PATH          ZDS socket to listen on (SOCK_SEQPACKET; a stale file is unlinked)
  --pods-file FILE       pods, one per line: uid name namespace service-account netns-path
                         (re-read on SIGHUP: new pods -> Add to the latest connection,
                         vanished pods -> Del to every connection); optional trailing
                         backend=iptables-nft|legacy|nft dns=0|1 ipv6=0|1 host=NETNS ip=A
                         [ip6=A] make a pod added later enrolled by cni-sim itself: in-pod rules
                         -> Add (acked) -> host probe set; removal: probe set -> rules -> Del
  --stats-file FILE      counters as "key value" lines, rewritten atomically on every change
  --fault KIND[:SECONDS] deadlock | slow-ack[:SECONDS] (default 2) | drop-adds
  --drop-add UID         never send the steady-state Add for this pod (repeatable)
  --drop-del UID         never send the Del for this pod: a missed deletion (repeatable)
  --ack-timeout-ms N     per-request ack deadline (default 5000)
  --hello-timeout-ms N   hello read deadline (default 5000)
  --quiet                no log lines on stderr
)";

int Fail(const std::string& message) {
  std::cerr << "cni-sim: " << message << "\n";
  return 2;
}

bool ParseNumber(std::string_view text, long& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && value >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  ad::sim::CniServerOptions options;
  std::string pods_file;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    auto value = [&](std::string_view& out) {
      if (i + 1 >= args.size()) return false;
      out = args[++i];
      return true;
    };
    std::string_view text;
    long number = 0;
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--quiet") {
      options.log_to_stderr = false;
    } else if (arg == "--socket" && value(text)) {
      options.socket_path = text;
    } else if (arg == "--pods-file" && value(text)) {
      pods_file = text;
    } else if (arg == "--stats-file" && value(text)) {
      options.stats_file = text;
    } else if (arg == "--drop-add" && value(text)) {
      options.drop_add_uids.emplace(text);
    } else if (arg == "--drop-del" && value(text)) {
      options.drop_del_uids.emplace(text);
    } else if (arg == "--ack-timeout-ms" && value(text) && ParseNumber(text, number)) {
      options.ack_timeout = std::chrono::milliseconds(number);
    } else if (arg == "--hello-timeout-ms" && value(text) && ParseNumber(text, number)) {
      options.hello_timeout = std::chrono::milliseconds(number);
    } else if (arg == "--fault" && value(text)) {
      const size_t colon = text.find(':');
      ad::Result<ad::sim::CniFault> fault = ad::sim::ParseCniFault(text.substr(0, colon));
      if (!fault.ok()) return Fail(fault.error().message);
      options.fault = *fault;
      if (colon != std::string_view::npos) {
        if (*fault != ad::sim::CniFault::kSlowAck || !ParseNumber(text.substr(colon + 1), number)) {
          return Fail("only slow-ack takes a number of seconds: " + std::string(text));
        }
        options.slow_delay = std::chrono::seconds(number);
      }
    } else {
      return Fail("bad or incomplete option '" + std::string(arg) + "' (see --help)");
    }
  }
  if (options.socket_path.empty()) return Fail("--socket is required (see --help)");

  // Signals are taken synchronously by this thread; every other thread inherits the block.
  sigset_t signals;
  sigemptyset(&signals);
  for (int signal : {SIGHUP, SIGTERM, SIGINT}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  std::vector<ad::sim::CniPod> pods;
  if (!pods_file.empty()) {
    ad::Result<std::vector<ad::sim::CniPod>> read = ad::sim::ReadPodsFile(pods_file);
    if (!read.ok()) return Fail(read.error().message);
    pods = std::move(read).value();
  }
  ad::Result<std::unique_ptr<ad::sim::CniServer>> server = ad::sim::CniServer::Start(options, pods);
  if (!server.ok()) return Fail(server.error().message);

  for (;;) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) continue;
    if (signal != SIGHUP) break;
    if (pods_file.empty()) continue;
    ad::Result<std::vector<ad::sim::CniPod>> read = ad::sim::ReadPodsFile(pods_file);
    if (!read.ok()) {
      std::cerr << "cni-sim: reload failed, keeping the pod cache: " << read.error().message
                << "\n";
      continue;
    }
    (*server)->SetPods(*read);
  }
  (*server)->Stop();
  return 0;
}
