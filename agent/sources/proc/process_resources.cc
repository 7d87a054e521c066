#include "sources/proc/process_resources.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

namespace ad {
namespace {

constexpr SourceKind kSource = SourceKind::kProc;
constexpr size_t kMaxProcFileBytes = 64 << 10;
// cgroup v1 reports "no limit" as LONG_MAX rounded down to the page size.
constexpr uint64_t kV1Unlimited = uint64_t{1} << 62;

std::string_view Trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

std::optional<uint64_t> ParseNumber(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// Splits "a   b  c" on runs of blanks.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < line.size()) {
    const size_t start = line.find_first_not_of(" \t", pos);
    if (start == std::string_view::npos) break;
    size_t end = line.find_first_of(" \t", start);
    if (end == std::string_view::npos) end = line.size();
    words.push_back(line.substr(start, end - start));
    pos = end;
  }
  return words;
}

template <typename F>
void ForEachLine(std::string_view text, F&& f) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    f(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

// Bounded read of a small procfs/cgroupfs file.
Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(kSource, "open(" + path + ")");
  std::string text(kMaxProcFileBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return ErrnoError(kSource, "read(" + path + ")");
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// Open fds: st_size of procfs's /proc/<pid>/fd is the count on Linux >= 6.2; older kernels
// report 0 (and a copy of the tree on another file system its block size), so the directory is
// counted then.
Result<uint64_t> CountOpenFds(const std::string& fd_dir) {
  constexpr long kProcSuperMagic = 0x9fa0;  // PROC_SUPER_MAGIC, linux/magic.h
  struct stat st {};
  if (::stat(fd_dir.c_str(), &st) != 0) return ErrnoError(kSource, "stat(" + fd_dir + ")");
  struct statfs fs {};
  if (st.st_size > 0 && ::statfs(fd_dir.c_str(), &fs) == 0 && fs.f_type == kProcSuperMagic) {
    return static_cast<uint64_t>(st.st_size);
  }
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(fd_dir.c_str()), ::closedir);
  if (!dir) return ErrnoError(kSource, "opendir(" + fd_dir + ")");
  uint64_t count = 0;
  while (const dirent* entry = ::readdir(dir.get())) {
    if (entry->d_name[0] != '.') ++count;
  }
  return count;
}

}  // namespace

Result<FdLimit> ParseMaxOpenFiles(std::string_view limits) {
  std::optional<Result<FdLimit>> found;
  ForEachLine(limits, [&](std::string_view line) {
    constexpr std::string_view kRow = "Max open files";
    if (found || !line.starts_with(kRow)) return;
    const std::vector<std::string_view> words = Words(line.substr(kRow.size()));
    if (words.empty()) {
      found = SourceError{kSource, "limits: \"Max open files\" has no soft value", EPROTO};
      return;
    }
    FdLimit limit;
    if (words[0] == "unlimited") {
      limit.unlimited = true;
    } else if (auto value = ParseNumber(words[0])) {
      limit.soft = *value;
    } else {
      found = SourceError{kSource,
                          "limits: \"Max open files\" soft value \"" +
                              std::string(words[0].substr(0, 32)) + "\" is not a number",
                          EPROTO};
      return;
    }
    found = limit;
  });
  if (!found) return SourceError{kSource, "limits: no \"Max open files\" row", EPROTO};
  return *found;
}

std::optional<uint64_t> ParseVmRssBytes(std::string_view status) {
  std::optional<uint64_t> rss;
  ForEachLine(status, [&](std::string_view line) {
    if (rss || !line.starts_with("VmRSS:")) return;
    const std::vector<std::string_view> words = Words(line.substr(6));
    if (words.size() != 2 || words[1] != "kB") return;
    if (auto kib = ParseNumber(words[0]); kib && *kib < (uint64_t{1} << 52)) rss = *kib * 1024;
  });
  return rss;
}

Result<MemoryCgroup> ParseMemoryCgroup(std::string_view proc_cgroup) {
  std::optional<MemoryCgroup> v1;
  std::optional<MemoryCgroup> v2;
  ForEachLine(proc_cgroup, [&](std::string_view line) {
    line = Trim(line);
    // "hierarchy-ID:controller-list:cgroup-path"; the path may itself contain ':'.
    const size_t first = line.find(':');
    if (first == std::string_view::npos) return;
    const size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) return;
    const std::string_view id = line.substr(0, first);
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    if (path.empty() || path.front() != '/') return;
    if (id == "0" && controllers.empty()) {
      v2 = MemoryCgroup{true, path};
      return;
    }
    std::string_view list = controllers;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      if (list.substr(0, comma) == "memory") v1 = MemoryCgroup{false, path};
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  });
  // Hybrid hosts have both: the v1 memory hierarchy is the one that limits.
  if (v1) return *v1;
  if (v2) return *v2;
  return SourceError{kSource, "cgroup: neither a cgroup v2 entry nor a v1 memory controller",
                     EPROTO};
}

Result<MemoryLimit> ParseMemoryLimit(std::string_view text) {
  text = Trim(text);
  MemoryLimit limit;
  if (text == "max") {
    limit.unlimited = true;
    return limit;
  }
  auto value = ParseNumber(text);
  if (!value) {
    return SourceError{kSource,
                       "memory limit \"" + std::string(text.substr(0, 32)) + "\" is not a number",
                       EPROTO};
  }
  limit.bytes = *value;
  limit.unlimited = *value >= kV1Unlimited;
  return limit;
}

Result<ProcessResources> ReadProcessResources(int pid, const ProcessResourceOptions& options,
                                              std::string* problems) {
  const std::string base = options.proc_root + "/" + std::to_string(pid);
  auto note = [problems](const std::string& line) {
    if (problems == nullptr) return;
    if (!problems->empty()) *problems += "; ";
    *problems += line;
  };
  ProcessResources out;
  Result<uint64_t> fds = CountOpenFds(base + "/fd");
  if (!fds.ok()) {
    if (fds.error().error_number == ENOENT || fds.error().error_number == ESRCH) {
      return SourceError{kSource, "pid " + std::to_string(pid) + " exited", ESRCH};
    }
    return fds.error();
  }
  out.open_fds = *fds;

  if (Result<std::string> limits = ReadSmallFile(base + "/limits"); !limits.ok()) {
    note(limits.error().message);
  } else if (Result<FdLimit> limit = ParseMaxOpenFiles(*limits); !limit.ok()) {
    note(limit.error().message);
  } else {
    out.fd_limit = *limit;
    out.fd_limit_known = true;
  }

  if (Result<std::string> status = ReadSmallFile(base + "/status"); !status.ok()) {
    note(status.error().message);
  } else if (auto rss = ParseVmRssBytes(*status)) {
    out.rss_bytes = *rss;
  } else {
    note("status: no VmRSS");
  }

  Result<std::string> cgroup_text = ReadSmallFile(base + "/cgroup");
  if (!cgroup_text.ok()) {
    note(cgroup_text.error().message);
    return out;
  }
  Result<MemoryCgroup> cgroup = ParseMemoryCgroup(*cgroup_text);
  if (!cgroup.ok()) {
    note(cgroup.error().message);
    return out;
  }
  out.cgroup = cgroup->path;
  // A path outside the agent's cgroup namespace ("/../..") cannot be reached from its mount.
  if (cgroup->path.find("/..") != std::string::npos) {
    note("cgroup " + cgroup->path + " is outside the agent's cgroup namespace");
    return out;
  }
  const std::string dir = options.cgroup_root + (cgroup->v2 ? "" : "/memory") +
                          (cgroup->path == "/" ? "" : cgroup->path);
  const std::string file = dir + (cgroup->v2 ? "/memory.max" : "/memory.limit_in_bytes");
  Result<std::string> limit_text = ReadSmallFile(file);
  if (!limit_text.ok()) {
    // The root cgroup has no memory.max: no limit of its own.
    if (cgroup->v2 && cgroup->path == "/" && limit_text.error().error_number == ENOENT) {
      out.memory_limit.unlimited = true;
      out.memory_limit_known = true;
    } else {
      note(limit_text.error().message);
    }
    return out;
  }
  Result<MemoryLimit> limit = ParseMemoryLimit(*limit_text);
  if (!limit.ok()) {
    note(file + ": " + limit.error().message);
    return out;
  }
  out.memory_limit = *limit;
  out.memory_limit_known = true;
  return out;
}

}  // namespace ad
