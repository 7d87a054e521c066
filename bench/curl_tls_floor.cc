// The floor under the Kubernetes API source's memory: what libcurl with Debian's OpenSSL costs a
// process that does nothing else, so kube_api_bench's "RSS added by the source" can be read
// beside it. Each step runs in a fresh process (this binary re-executed with --step) against
// `openssl s_server` on a throw-away PKI (a separate process, so no server-side TLS pages are
// counted), and prints VmRSS, RssAnon and RssFile added by:
//   linked    - nothing (the process with libcurl and its libraries loaded)
//   init      - curl_global_init (OpenSSL's own initialisation)
//   get x1    - init + one HTTPS GET verified against the CA (a TLS handshake)
//   get x3    - init + three GETs, one handle each, one after another (the source's three lists)
//   threads   - init + three handles on three threads at once (the source's three watches)
//
//   build/bench/curl_tls_floor [--runs 3]
#include <curl/curl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/tls_test_pki.h"

namespace {

constexpr char kPort[] = "18479";

long StatusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  }
  return 0;
}

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

bool Get(const std::string& ca) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return false;
  const std::string url = std::string("https://127.0.0.1:") + kPort + "/";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CAINFO, ca.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) std::fprintf(stderr, "GET: %s\n", curl_easy_strerror(rc));
  return rc == CURLE_OK;
}

// One step in this (fresh) process; prints "rss anon file" in kB added.
int Step(const std::string& step, const std::string& ca) {
  const long rss = StatusKb("VmRSS:"), anon = StatusKb("RssAnon:"), file = StatusKb("RssFile:");
  bool ok = true;
  if (step != "linked") curl_global_init(CURL_GLOBAL_DEFAULT);
  if (step == "get1") ok = Get(ca);
  if (step == "get3") ok = Get(ca) && Get(ca) && Get(ca);
  if (step == "threads") {
    std::vector<std::thread> threads;
    std::vector<char> results(3, 0);
    for (int i = 0; i < 3; ++i) threads.emplace_back([&, i] { results[i] = Get(ca); });
    for (auto& t : threads) t.join();
    for (char r : results) ok = ok && r;
  }
  std::printf("%ld %ld %ld\n", StatusKb("VmRSS:") - rss, StatusKb("RssAnon:") - anon,
              StatusKb("RssFile:") - file);
  return ok ? 0 : 1;
}

// Runs this binary with --step and parses its line.
bool RunStep(const std::string& self, const std::string& step, const std::string& ca, long out[3]) {
  const std::string command = self + " --step " + step + " --ca " + ca;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  const int parsed = std::fscanf(pipe, "%ld %ld %ld", &out[0], &out[1], &out[2]);
  return ::pclose(pipe) == 0 && parsed == 3;
}

}  // namespace

int main(int argc, char** argv) {
  std::string step, ca;
  int runs = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--step") step = argv[i + 1];
    if (flag == "--ca") ca = argv[i + 1];
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
  }
  if (!step.empty()) return Step(step, ca);

  ad::testing::TestPki pki;
  if (!pki.ok()) {
    std::fprintf(stderr, "curl_tls_floor: PKI: %s\n", pki.error().c_str());
    return 1;
  }
  const pid_t server = ::fork();
  if (server == 0) {
    ::freopen("/dev/null", "w", stdout);
    ::freopen("/dev/null", "w", stderr);
    ::execlp("openssl", "openssl", "s_server", "-accept", kPort, "-cert",
             pki.Path("server.crt").c_str(), "-key", pki.Path("server.key").c_str(), "-www",
             "-quiet", nullptr);
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::printf("%s\n", curl_version());
  std::printf("%-8s %26s  (median of %d fresh processes)\n", "step", "RSS / anon / file kB added",
              runs);
  int failures = 0;
  for (const char* name : {"linked", "init", "get1", "get3", "threads"}) {
    std::vector<std::vector<long>> samples(3);
    for (int r = 0; r < runs; ++r) {
      long v[3];
      if (!RunStep(argv[0], name, pki.Path("ca.crt"), v)) {
        ++failures;
        continue;
      }
      for (int k = 0; k < 3; ++k) samples[k].push_back(v[k]);
    }
    if (samples[0].empty()) continue;
    long median[3];
    for (int k = 0; k < 3; ++k) {
      std::sort(samples[k].begin(), samples[k].end());
      median[k] = samples[k][samples[k].size() / 2];
    }
    std::printf("%-8s %10ld / %5ld / %5ld\n", name, median[0], median[1], median[2]);
  }
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  if (failures > 0) std::fprintf(stderr, "curl_tls_floor: %d steps failed\n", failures);
  return failures == 0 ? 0 : 1;
}
