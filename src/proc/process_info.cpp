#include "proc/process_info.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "elf/build_id.h"
#include "util/fd.h"
#include "util/safe_open.h"

namespace jankbpf {
namespace {

std::string proc_path(pid_t pid, const char* leaf) {
  return "/proc/" + std::to_string(pid) + "/" + leaf;
}

// Reads at most `limit` bytes: /proc files are small, and a hostile one
// must not make us allocate without bound.
std::string read_small(const std::string& path, size_t limit = 64 * 1024) {
  OpenPolicy p;
  p.max_size = limit;
  p.allow_unsized = true;  // procfs says 0
  std::string out;
  read_untrusted(path, p, out);
  return out;
}

}  // namespace

bool process_exists(pid_t pid) {
  struct stat st{};
  return pid > 0 && stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0;
}

std::string read_comm(pid_t pid) {
  std::string s = read_small(proc_path(pid, "comm"), 64);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

std::string read_exe_path(pid_t pid) {
  char buf[4096];
  ssize_t n = readlink(proc_path(pid, "exe").c_str(), buf, sizeof buf);
  if (n <= 0 || n >= static_cast<ssize_t>(sizeof buf)) return "";
  return std::string(buf, static_cast<size_t>(n));
}

std::string parse_cgroup_v2(const std::string& content) {
  size_t pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string::npos) end = content.size();
    std::string_view line(content.data() + pos, end - pos);
    if (line.starts_with("0::")) return std::string(line.substr(3));
    pos = end + 1;
  }
  return "";
}

std::string read_cgroup(pid_t pid) { return parse_cgroup_v2(read_small(proc_path(pid, "cgroup"))); }

ExeCache::Exe ExeCache::lookup(pid_t pid) {
  Exe exe;
  exe.path = read_exe_path(pid);
  // Open through /proc/PID/exe: it is the file the process runs, even when
  // the path was deleted or replaced, or lives in another mount namespace.
  // A magic link (the kernel's, not the process's): followed, then held to
  // the descriptor checks like any file a process controls.
  OpenPolicy policy;
  policy.max_size = 1ull << 32;  // read_build_id reads the notes only
  Opened o = open_magic(proc_path(pid, "exe"), policy);
  if (!o) return exe;
  const struct stat& st = o.st;
  Fd fd = std::move(o.fd);
  Key key{st.st_dev, st.st_ino, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec};
  auto it = build_ids_.find(key);
  if (it == build_ids_.end()) {
    if (build_ids_.size() > 4096) build_ids_.clear();  // bound memory on busy machines
    it = build_ids_.emplace(key, read_build_id(fd.get())).first;
  }
  exe.build_id = it->second;
  return exe;
}

}  // namespace jankbpf

namespace jankbpf {

long read_uid(pid_t pid) {
  std::string s = read_small(proc_path(pid, "status"));
  auto pos = s.find("\nUid:");
  if (pos == std::string::npos) return -1;
  const char* p = s.c_str() + pos + 5;
  char* end = nullptr;
  long uid = strtol(p, &end, 10);
  return end == p ? -1 : uid;
}

}  // namespace jankbpf
