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
  static size_t OnHeader(char*, size_t size, size_t count, void* user) {
    static_cast<Transfer*>(user)->last_byte = Clock::now();
    return size * count;
  }
  // Called about once a second even when nothing arrives: the stop flag and the idle deadline.
  static int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(user);
    if (t->stop != nullptr && t->stop->load()) {
      t->outcome->stopped = true;
      return 1;
    }
    if (t->idle.count() > 0 && Clock::now() - t->last_byte > t->idle) {
      t->idle_expired = true;
      return 1;
    }
    return 0;
  }
};

KubeHttp::KubeHttp(KubeApiConfig config, const std::atomic<bool>* stop)
    : config_(std::move(config)), stop_(stop) {
  GlobalInit();
  curl_ = curl_easy_init();
}

KubeHttp::~KubeHttp() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

HttpOutcome KubeHttp::Get(const std::string& path_and_query,
                          const std::function<bool(std::string_view)>& on_body,
                          const HttpLimits& limits) {
  HttpOutcome outcome;
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) {
    outcome.transport = KubeApiReason::kUnreachable;
    outcome.error = "curl_easy_init failed";
    return outcome;
  }
  std::string token = CurrentToken(config_);
  if (token.empty()) token = last_token_;
  last_token_ = token;
  Transfer transfer{curl, &on_body, stop_, &outcome, limits.max_error_body, limits.idle};
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
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &Transfer::OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode code = curl_easy_perform(curl);
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
