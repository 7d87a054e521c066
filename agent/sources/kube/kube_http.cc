#include "sources/kube/kube_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

namespace ad::kube {
namespace {

using Clock = std::chrono::steady_clock;

void GlobalInit() {
  // curl_global_init is not thread-safe on every build; once per process, before any handle.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

curl_blob Blob(const std::string& text) {
  return curl_blob{const_cast<char*>(text.data()), text.size(), CURL_BLOB_COPY};
}

}  // namespace

struct KubeHttp::Transfer {
  CURL* curl = nullptr;
  const std::function<bool(std::string_view)>* on_body = nullptr;
  const std::function<void()>* on_ok = nullptr;
  const std::atomic<bool>* stop = nullptr;
  HttpOutcome* outcome = nullptr;
  size_t max_error_body = 0;
  std::chrono::milliseconds idle{0};
  Clock::time_point last_byte = Clock::now();
  bool idle_expired = false;

  static size_t OnWrite(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t n = size * count;
    t->last_byte = Clock::now();
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) {
      std::string& body = t->outcome->error_body;
      body.append(data, std::min(n, t->max_error_body - std::min(t->max_error_body, body.size())));
      return n;
    }
    if (!(*t->on_body)(std::string_view(data, n))) {
      t->outcome->stopped = true;
      return 0;  // CURLE_WRITE_ERROR ends the transfer
    }
    return n;
  }
  // The empty line ends a header block; the block of a 200 answer calls on_ok.
  static size_t OnHeader(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t n = size * count;
    t->last_byte = Clock::now();
    const std::string_view line(data, n);
    if (t->on_ok != nullptr && *t->on_ok && (line == "\r\n" || line == "\n")) {
      long code = 0;
      curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
      if (code == 200) (*t->on_ok)();
    }
    return n;
  }
};

KubeHttp::KubeHttp(KubeApiConfig config, const std::atomic<bool>* stop)
    : config_(std::move(config)), stop_(stop) {
  GlobalInit();
  curl_ = curl_easy_init();
  multi_ = curl_multi_init();
}

KubeHttp::~KubeHttp() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
  if (multi_ != nullptr) curl_multi_cleanup(static_cast<CURLM*>(multi_));
}

void KubeHttp::Interrupt() {
  if (multi_ != nullptr) curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

// Runs the transfer on the multi handle: the thread sleeps in poll until data, one of curl's own
// timers, the idle deadline or Interrupt() (no periodic wake-up, so an idle watch costs nothing
// between the server's bookmarks). Returns curl's result for the transfer.
int KubeHttp::Perform(Transfer& transfer) {
  CURL* curl = static_cast<CURL*>(curl_);
  CURLM* multi = static_cast<CURLM*>(multi_);
  curl_multi_add_handle(multi, curl);
  int running = 1;
  CURLcode result = CURLE_OK;
  while (running > 0) {
    if (curl_multi_perform(multi, &running) != CURLM_OK) {
      result = CURLE_FAILED_INIT;
      break;
    }
    if (running == 0) break;
    if (stop_ != nullptr && stop_->load()) {
      transfer.outcome->stopped = true;
      result = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    const auto quiet = Clock::now() - transfer.last_byte;
    if (transfer.idle.count() > 0 && quiet >= transfer.idle) {
      transfer.idle_expired = true;
      result = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    long wait_ms = transfer.idle.count() > 0
                       ? static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               transfer.idle - quiet)
                                               .count()) +
                             1
                       : 3600000L;
    long curl_ms = -1;
    curl_multi_timeout(multi, &curl_ms);
    if (curl_ms >= 0) wait_ms = std::min(wait_ms, curl_ms);
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(wait_ms), nullptr);
  }
  int left = 0;
  while (CURLMsg* message = curl_multi_info_read(multi, &left)) {
    if (message->msg == CURLMSG_DONE && message->easy_handle == curl) {
      result = message->data.result;
    }
  }
  curl_multi_remove_handle(multi, curl);
  return static_cast<int>(result);
}

HttpOutcome KubeHttp::Get(const std::string& path_and_query,
                          const std::function<bool(std::string_view)>& on_body,
                          const HttpLimits& limits, const std::function<void()>& on_ok) {
  HttpOutcome outcome;
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr || multi_ == nullptr) {
    outcome.transport = KubeApiReason::kUnreachable;
    outcome.error = "curl_easy_init failed";
    return outcome;
  }
  std::string token = CurrentToken(config_);
  if (token.empty()) token = last_token_;
  last_token_ = token;
  Transfer transfer{curl, &on_body, &on_ok, stop_, &outcome, limits.max_error_body, limits.idle};
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  if (!token.empty())
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  const std::string url = config_.server + path_and_query;
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "ambient-doctor");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!config_.ca_pem.empty()) {
    curl_blob blob = Blob(config_.ca_pem);
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &blob);
  } else if (!config_.ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, config_.ca_file.c_str());
  }
  if (!config_.client_cert_pem.empty()) {
    curl_blob cert = Blob(config_.client_cert_pem), key = Blob(config_.client_key_pem);
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key);
  } else if (!config_.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, config_.client_key_file.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(limits.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(limits.total.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Transfer::OnWrite);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Transfer::OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const auto code = static_cast<CURLcode>(Perform(transfer));
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);  // holds the token: freed at once

  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  outcome.http_status = static_cast<int>(status);
  curl_off_t retry_after = -1;
  if (curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0) {
    outcome.retry_after_seconds = static_cast<int>(retry_after);
  }
  if (code == CURLE_OK || outcome.stopped) return outcome;
  outcome.error = "GET " + url.substr(0, url.find('?')) + ": " +
                  (error[0] != '\0' ? error : curl_easy_strerror(code));
  curl_off_t sent_at = 0;
  curl_easy_getinfo(curl, CURLINFO_PRETRANSFER_TIME_T, &sent_at);
  if (transfer.idle_expired || (code == CURLE_OPERATION_TIMEDOUT && sent_at > 0)) {
    outcome.transport = KubeApiReason::kHung;
    if (transfer.idle_expired) {
      outcome.error = "GET " + url.substr(0, url.find('?')) + ": no data for " +
                      std::to_string(limits.idle.count()) + " ms";
    }
  } else {
    // Refused, reset, TLS or name failures, and a server that closed the stream mid-way.
    outcome.transport = KubeApiReason::kUnreachable;
  }
  return outcome;
}

std::string QueryEscape(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace ad::kube
