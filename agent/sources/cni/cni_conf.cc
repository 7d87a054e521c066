#include "sources/cni/cni_conf.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/unique_fd.h"
#include "model/json_reader.h"
#include "model/result.h"

namespace ad::cni {
namespace {

constexpr SourceKind kSource = SourceKind::kCniConfig;
constexpr std::string_view kIstioCniType = "istio-cni";

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// libcni's ConfFiles: filepath.Ext(name) is one of the extensions.
bool IsCandidate(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view ext = name.substr(dot);
  return ext == ".conf" || ext == ".conflist" || ext == ".json";
}

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};

int64_t MtimeMs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

std::string Plural(size_t n, std::string_view word) {
  return std::to_string(n) + " " + std::string(word) + (n == 1 ? "" : "s");
}

// Reads one candidate (at most max_bytes + 1 bytes); `error` says why it cannot be used.
std::string ReadCandidate(int dir_fd, const std::string& name, size_t max_bytes, std::string& bytes,
                          int64_t& mtime_ms) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) {
    const int err = errno;
    struct stat link {};
    if (err == ENOENT && ::fstatat(dir_fd, name.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(link.st_mode)) {
      char target[4096];
      const ssize_t n = ::readlinkat(dir_fd, name.c_str(), target, sizeof(target) - 1);
      return "dangling symlink" +
             (n > 0 ? std::string(" to ") + std::string(target, static_cast<size_t>(n)) : "");
    }
    return std::string("open: ") + std::strerror(err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return std::string("fstat: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  mtime_ms = MtimeMs(st);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return "too large to check (" + std::to_string(st.st_size) + " bytes, limit " +
           std::to_string(max_bytes) + ")";
  }
  // Sized by fstat (one byte more shows a file that grew), not by the limit: a 1 MiB buffer
  // zeroed on every poll was a tenth of the idle daemon's CPU. A file that grew gets more room,
  // up to the limit.
  bytes.resize(std::min(static_cast<size_t>(st.st_size), max_bytes) + 1);
  size_t got = 0;
  for (;;) {
    if (got == bytes.size()) {
      if (bytes.size() > max_bytes) break;
      bytes.resize(std::min(bytes.size() * 2, max_bytes + 1));
    }
    const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::string("read: ") + std::strerror(errno);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) return "too large to check (grew past " + std::to_string(max_bytes) + ")";
  bytes.resize(got);
  return {};
}

// Opens and stat()s the kubeconfig (never reads it); the reason when it is not usable.
std::string CheckKubeconfig(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return path + ": " + std::strerror(errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return path + ": fstat: " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return path + ": not a regular file";
  if (st.st_size == 0) return path + ": empty";
  return {};
}

void ReadPlugin(const rapidjson::Value& plugin, CniParsedConf& parsed) {
  const std::string_view type = JsonStringMember(plugin, "type");
  parsed.plugin_types.emplace_back(type);
  if (type != kIstioCniType || parsed.istio_cni) return;
  parsed.istio_cni = true;
  // Current istio-cni writes "kubeconfig" at the plugin's top level; releases before ambient
  // nested it in "kubernetes".
  const rapidjson::Value* kubeconfig = JsonMember(plugin, "kubeconfig");
  if (kubeconfig == nullptr) {
    if (const rapidjson::Value* kubernetes = JsonMember(plugin, "kubernetes")) {
      kubeconfig = JsonMember(*kubernetes, "kubeconfig");
    }
  }
  if (kubeconfig != nullptr) {
    parsed.istio_has_kubeconfig = true;
    parsed.istio_kubeconfig = JsonText(kubeconfig);
  }
}

// A .conflist: a "name" and a non-empty "plugins" list whose entries all have a "type".
void ReadPluginList(const rapidjson::Value& root, CniParsedConf& parsed) {
  const rapidjson::Value* plugins = JsonMember(root, "plugins");
  if (plugins == nullptr) {
    parsed.error = "no \"plugins\" key";
    return;
  }
  if (!plugins->IsArray() || plugins->Empty()) {
    parsed.error = "no plugins in the list";
    return;
  }
  if (parsed.network_name.empty()) {
    parsed.error = "no \"name\"";
    return;
  }
  for (const rapidjson::Value& plugin : plugins->GetArray()) {
    if (!plugin.IsObject() || JsonStringMember(plugin, "type").empty()) {
      parsed.error = "a plugin without \"type\"";
      parsed.plugin_types.clear();
      parsed.istio_cni = false;
      return;
    }
    ReadPlugin(plugin, parsed);
  }
}

}  // namespace

CniParsedConf ParseCniConf(const std::string& file_name, std::string_view bytes, size_t max_bytes) {
  CniParsedConf parsed;
  rapidjson::Document root;
  const JsonStatus json =
      ParseJsonDocument(bytes, root, JsonLimits{.max_bytes = max_bytes, .max_depth = 64});
  if (!json.ok()) {
    parsed.error = "malformed JSON (" + json.error + ")";
    return parsed;
  }
  if (!root.IsObject()) {
    parsed.error = "not a JSON object";
    return parsed;
  }
  parsed.network_name = JsonStringMember(root, "name");
  if (EndsWith(file_name, ".conflist")) {
    ReadPluginList(root, parsed);
    return parsed;
  }
  // A single network (.conf, .json): the runtime wraps it in a list of one.
  if (JsonStringMember(root, "type").empty()) {
    parsed.error = "network type not found";
    return parsed;
  }
  ReadPlugin(root, parsed);
  return parsed;
}

std::string ProbeCniConfDir(const std::string& dir) {
  std::unique_ptr<DIR, DirCloser> listing(::opendir(dir.c_str()));
  if (!listing) {
    if (errno == ENOENT) return "does not exist";
    return std::string("could not be read: ") + std::strerror(errno);
  }
  errno = 0;
  while (const dirent* entry = ::readdir(listing.get())) {
    if (IsCandidate(entry->d_name) && entry->d_type != DT_DIR) return {};
  }
  if (errno != 0) return std::string("could not be read: ") + std::strerror(errno);
  return "holds no .conflist, .conf or .json file";
}

CniConfigState ReadCniConfDir(const std::string& host_root, const std::string& conf_dir,
                              const CniReadLimits& limits) {
  CniConfigState state;
  state.collected = true;
  state.host_root = host_root;
  state.dir = host_root + conf_dir;
  std::unique_ptr<DIR, DirCloser> dir(::opendir(state.dir.c_str()));
  if (!dir) {
    // A missing directory is data (no CNI config: no pod network), anything else a failure.
    if (errno != ENOENT) state.errors.push_back(ErrnoError(kSource, "opendir " + state.dir));
    return state;
  }
  state.dir_readable = true;
  const int dir_fd = ::dirfd(dir.get());
  std::vector<std::string> names;
  size_t candidates = 0;
  errno = 0;
  while (const dirent* entry = ::readdir(dir.get())) {
    const std::string_view name = entry->d_name;
    if (!IsCandidate(name)) continue;
    if (entry->d_type == DT_DIR) continue;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        continue;
    }
    if (++candidates <= limits.max_candidates) names.emplace_back(name);
  }
  if (errno != 0) state.errors.push_back(ErrnoError(kSource, "readdir " + state.dir));
  if (candidates > limits.max_candidates) {
    state.errors.push_back({kSource,
                            state.dir + ": " + Plural(candidates, "config file") +
                                ", more than the " + std::to_string(limits.max_candidates) +
                                " checked: the file the runtime uses is unknown",
                            E2BIG});
    state.dir_readable = false;
    return state;
  }
  std::sort(names.begin(), names.end());  // Go's sort.Strings: byte order
  if (names.size() > limits.max_files) state.files_omitted = names.size() - limits.max_files;
  const size_t to_read = std::min(names.size(), limits.max_files);
  for (size_t i = 0; i < to_read; ++i) {
    CniConfFile file;
    file.name = names[i];
    if (!state.active_file.empty()) {  // after the active one: listed, not read
      state.files.push_back(std::move(file));
      continue;
    }
    std::string bytes;
    int64_t mtime_ms = 0;
    file.error = ReadCandidate(dir_fd, file.name, limits.max_file_bytes, bytes, mtime_ms);
    if (file.error.empty()) {
      CniParsedConf parsed = ParseCniConf(file.name, bytes, limits.max_file_bytes);
      file.error = parsed.error;
      if (parsed.error.empty()) {
        state.active_file = file.name;
        state.active_mtime_unix_ms = mtime_ms;
        state.network_name = parsed.network_name;
        state.plugin_types = std::move(parsed.plugin_types);
        state.istio_cni_chained = parsed.istio_cni;
        if (parsed.istio_cni) {
          if (!parsed.istio_has_kubeconfig || parsed.istio_kubeconfig.empty()) {
            state.kubeconfig_error = "the istio-cni plugin has no \"kubeconfig\"";
          } else {
            state.kubeconfig_path = parsed.istio_kubeconfig;
            state.kubeconfig_error = CheckKubeconfig(host_root + parsed.istio_kubeconfig);
          }
        }
      }
    }
    state.files.push_back(std::move(file));
  }
  return state;
}

}  // namespace ad::cni
