#include "sources/netfilter/nft_userspace.h"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/unique_fd.h"
#include "model/result.h"

namespace ad::nft {
namespace {

constexpr SourceKind kSource = SourceKind::kNftProbe;
constexpr size_t kMaxStatusBytes = 64 << 20;  // dpkg status of a large install: a few MiB
constexpr size_t kMaxProbeOutput = 64 << 10;

constexpr const char* kNftPaths[] = {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft", "/bin/nft",
                                     "/usr/local/sbin/nft"};
constexpr const char* kLibDirs[] = {"/usr/lib/x86_64-linux-gnu",
                                    "/lib/x86_64-linux-gnu",
                                    "/usr/lib/aarch64-linux-gnu",
                                    "/lib/aarch64-linux-gnu",
                                    "/usr/lib64",
                                    "/lib64",
                                    "/usr/lib",
                                    "/lib"};

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

// The file's first `max` bytes; nullopt when it cannot be opened.
std::optional<std::string> ReadBounded(const std::string& path, size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return std::nullopt;
  std::string data;
  std::array<char, 65536> chunk;
  while (data.size() < max) {
    const ssize_t n = ::read(fd.get(), chunk.data(), std::min(chunk.size(), max - data.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(chunk.data(), static_cast<size_t>(n));
  }
  return data;
}

// The DT_NEEDED names of an ELF64 shared object (a few pread()s: section headers, .dynamic and
// its string table); nullopt when the file is not a readable little ELF64.
std::optional<std::vector<std::string>> NeededLibraries(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return std::nullopt;
  auto read_at = [&fd](void* out, size_t size, uint64_t offset) {
    return ::pread(fd.get(), out, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size);
  };
  Elf64_Ehdr header{};
  if (!read_at(&header, sizeof(header), 0) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_shentsize != sizeof(Elf64_Shdr) ||
      header.e_shnum == 0 || header.e_shnum > 4096) {
    return std::nullopt;
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (!read_at(sections.data(), sections.size() * sizeof(Elf64_Shdr), header.e_shoff)) {
    return std::nullopt;
  }
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_type != SHT_DYNAMIC || section.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strings = sections[section.sh_link];
    constexpr uint64_t kMaxTable = 1 << 20;
    if (section.sh_size > kMaxTable || strings.sh_size > kMaxTable) return std::nullopt;
    std::vector<Elf64_Dyn> entries(section.sh_size / sizeof(Elf64_Dyn));
    std::string table(strings.sh_size, '\0');
    if (!read_at(entries.data(), entries.size() * sizeof(Elf64_Dyn), section.sh_offset) ||
        !read_at(table.data(), table.size(), strings.sh_offset)) {
      return std::nullopt;
    }
    std::vector<std::string> needed;
    for (const Elf64_Dyn& entry : entries) {
      if (entry.d_tag == DT_NULL) break;
      if (entry.d_tag != DT_NEEDED || entry.d_un.d_val >= table.size()) continue;
      needed.emplace_back(table.c_str() + entry.d_un.d_val);
    }
    return needed;
  }
  return std::vector<std::string>{};
}

std::string FirstLine(std::string_view text) {
  const size_t end = text.find('\n');
  std::string line(text.substr(0, std::min<size_t>(end, 200)));
  return line;
}

struct ProbeOutput {
  int status = -1;  // exit status, or -1
  std::string out;
  std::string err;
  std::string failure;  // spawn failure or timeout
};

// Runs `binary -j list ruleset` in a child that first unshares its own netns.
ProbeOutput RunProbe(const std::string& binary, std::chrono::milliseconds timeout) {
  ProbeOutput result;
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    result.failure = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    result.failure = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);
  // Everything the child needs is prepared before fork (only async-signal-safe calls after it).
  std::string path = binary;
  std::string arg_json = "-j";
  std::string arg_list = "list";
  std::string arg_ruleset = "ruleset";
  char* argv[] = {path.data(), arg_json.data(), arg_list.data(), arg_ruleset.data(), nullptr};
  char* envp[] = {nullptr};
  const pid_t pid = ::fork();
  if (pid < 0) {
    result.failure = std::string("fork: ") + std::strerror(errno);
    return result;
  }
  if (pid == 0) {
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(126);  // never in the agent's own netns
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0) ::_exit(126);
    if (::dup2(out_pipe[1], 1) < 0 || ::dup2(err_pipe[1], 2) < 0) ::_exit(126);
    ::execve(argv[0], argv, envp);
    ::_exit(127);
  }
  out_write.Reset();
  err_write.Reset();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true, err_open = true, timed_out = false;
  std::array<char, 4096> chunk;
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_read.get() : -1, POLLIN, 0},
                     {err_open ? err_read.get() : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      std::string& sink = i == 0 ? result.out : result.err;
      const ssize_t n = ::read(fds[i].fd, chunk.data(), chunk.size());
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      if (sink.size() < kMaxProbeOutput) {
        sink.append(chunk.data(), std::min(static_cast<size_t>(n), kMaxProbeOutput - sink.size()));
      }
    }
  }
  if (timed_out) (void)::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    result.failure = "no answer within " + std::to_string(timeout.count()) + " ms (killed)";
  } else if (WIFEXITED(status)) {
    result.status = WEXITSTATUS(status);
    if (result.status == 126) result.failure = "could not enter a throwaway netns (unshare)";
    if (result.status == 127) result.failure = "exec " + binary + " failed";
  } else if (WIFSIGNALED(status)) {
    result.failure = "killed by signal " + std::to_string(WTERMSIG(status));
  }
  return result;
}

}  // namespace

std::string DpkgUpstreamVersion(std::string_view status_file, std::string_view package) {
  const std::string header = "Package: " + std::string(package) + "\n";
  size_t at = 0;
  while ((at = status_file.find(header, at)) != std::string_view::npos) {
    if (at != 0 && status_file[at - 1] != '\n') {
      at += header.size();
      continue;
    }
    size_t end = status_file.find("\n\n", at);
    const std::string_view stanza =
        status_file.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at += header.size();
    if (stanza.find("\nStatus: install ok installed") == std::string_view::npos) continue;
    const size_t version = stanza.find("\nVersion: ");
    if (version == std::string_view::npos) continue;
    std::string_view value = stanza.substr(version + 10);
    value = value.substr(0, value.find('\n'));
    if (const size_t colon = value.find(':'); colon != std::string_view::npos) {
      value = value.substr(colon + 1);  // epoch
    }
    if (const size_t dash = value.rfind('-'); dash != std::string_view::npos) {
      value = value.substr(0, dash);  // Debian revision
    }
    if (const size_t plus = value.find("+dfsg"); plus != std::string_view::npos) {
      value = value.substr(0, plus);
    }
    return std::string(value);
  }
  return {};
}

std::string JudgeProbe(int exit_status, std::string_view out, std::string_view err,
                       std::optional<bool>& json) {
  if (err.find("JSON support not compiled") != std::string_view::npos) {
    json = false;
    return "JSON support not compiled-in (" + FirstLine(err) + ")";
  }
  if (exit_status != 0) {
    return "exit " + std::to_string(exit_status) +
           (err.empty() ? std::string() : ": " + FirstLine(err));
  }
  const size_t start = out.find_first_not_of(" \t\r\n");
  if (start != std::string_view::npos && out[start] == '{' &&
      out.find("\"nftables\"") != std::string_view::npos) {
    json = true;
    return "ok";
  }
  json = false;
  return "exit 0 but no JSON on stdout (" + FirstLine(out) + ")";
}

namespace {

void JudgeJson(const NftUserspaceOptions& options, NftUserspaceState& state);

}  // namespace

NftUserspaceState ReadNftUserspace(const NftUserspaceOptions& options) {
  NftUserspaceState state;
  state.collected = true;
  JudgeJson(options, state);
  // The version is evidence for a finding: the package database (~1 MB) is read only when JSON
  // support is missing or unknown, or a table names the nft that created it.
  if (options.read_version || !state.json_support.value_or(false)) {
    if (std::optional<std::string> status =
            ReadBounded(options.host_root + "/var/lib/dpkg/status", kMaxStatusBytes)) {
      state.version = DpkgUpstreamVersion(*status, "nftables");
      if (state.version.empty()) state.version = DpkgUpstreamVersion(*status, "libnftables1");
      if (!state.version.empty()) state.version_source = "dpkg";
    }
  }
  return state;
}

namespace {

void JudgeJson(const NftUserspaceOptions& options, NftUserspaceState& state) {
  const std::string& root = options.host_root;
  for (const char* candidate : kNftPaths) {
    if (IsExecutableFile(root + candidate)) {
      state.binary = candidate;
      break;
    }
  }
  // libnftables' dynamic section names libjansson when it was built with JSON.
  for (const char* dir : kLibDirs) {
    const std::string library = root + std::string(dir) + "/libnftables.so.1";
    std::optional<std::vector<std::string>> needed = NeededLibraries(library);
    if (!needed) continue;
    const bool jansson = std::any_of(needed->begin(), needed->end(), [](const std::string& name) {
      return name.starts_with("libjansson.so");
    });
    state.json_support = jansson;
    state.json_evidence = std::string(dir) + "/libnftables.so.1 " +
                          (jansson ? "links libjansson (built with JSON)"
                                   : "does not link libjansson (built without JSON)");
    break;
  }
  if (state.binary.empty()) {
    state.probe_result = "no nft binary under host root \"" + root +
                         "\" (/usr/sbin, /sbin, "
                         "/usr/bin, /bin, /usr/local/sbin)";
    return;
  }
  if (!options.allow_probe) {
    state.probe_result = "not run (--no-nft-probe)";
    return;
  }
  // The library's dependency decides it: a fork and exec (~10 ms) would only confirm it.
  if (state.json_support.has_value() && options.probe_binary.empty()) {
    state.probe_result = "not needed (decided by the library)";
    return;
  }
  if (!root.empty() && root != "/") {
    state.probe_result =
        "not run under host root " + root + " (the agent does not execute host binaries)";
    return;
  }
  state.probe_ran = true;
  ProbeOutput probe = RunProbe(options.probe_binary.empty() ? state.binary : options.probe_binary,
                               options.probe_timeout);
  if (!probe.failure.empty()) {
    state.probe_result = probe.failure;
    state.errors.push_back({kSource, "nft -j list ruleset (throwaway netns): " + probe.failure});
    return;
  }
  std::optional<bool> json;
  state.probe_result = JudgeProbe(probe.status, probe.out, probe.err, json);
  if (json) {
    state.json_support = json;
    state.json_evidence = "`nft -j list ruleset` in a throwaway netns: " + state.probe_result;
  }
}

}  // namespace

}  // namespace ad::nft
