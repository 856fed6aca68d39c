#include "proc/process_info.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <optional>
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

struct ExeFile::Shared {
  struct Key {
    dev_t dev;
    ino_t ino;
    int64_t mtime_ns;
    auto operator<=>(const Key&) const = default;
  };
  std::mutex mu;
  std::map<Key, std::string> build_ids;
  int held_open = 0;

  std::optional<std::string> find(const Key& k) {
    std::lock_guard lk(mu);
    auto it = build_ids.find(k);
    if (it == build_ids.end()) return std::nullopt;
    return it->second;
  }
  void remember(const Key& k, const std::string& id) {
    std::lock_guard lk(mu);
    if (build_ids.size() > 4096) build_ids.clear();  // bound memory on busy machines
    build_ids.emplace(k, id);
  }
};

std::string ExeFile::build_id() {
  if (known_ || !fd_) return build_id_;
  build_id_ = read_build_id(fd_->get());
  known_ = true;
  fd_.reset();  // gives the descriptor (and its slot) back
  if (cache_) cache_->remember({dev_, ino_, mtime_ns_}, build_id_);
  return build_id_;
}

ExeCache::ExeCache() : shared_(std::make_shared<ExeFile::Shared>()) {}
ExeCache::~ExeCache() = default;

ExeFile ExeCache::open(pid_t pid) {
  ExeFile exe;
  exe.path = read_exe_path(pid);
  // Open through /proc/PID/exe: it is the file the process runs, even when
  // the path was deleted or replaced, or lives in another mount namespace.
  // A magic link (the kernel's, not the process's): followed, then held to
  // the descriptor checks like any file a process controls.
  OpenPolicy policy;
  policy.max_size = 1ull << 32;  // read_build_id reads the notes only
  Opened o = open_magic(proc_path(pid, "exe"), policy);
  if (!o) {
    exe.known_ = true;
    return exe;
  }
  exe.cache_ = shared_;
  exe.dev_ = o.st.st_dev;
  exe.ino_ = o.st.st_ino;
  exe.mtime_ns_ = o.st.st_mtim.tv_sec * 1'000'000'000LL + o.st.st_mtim.tv_nsec;
  if (auto id = shared_->find({exe.dev_, exe.ino_, exe.mtime_ns_})) {
    exe.build_id_ = *id;
    exe.known_ = true;
    return exe;
  }
  bool hold;
  {
    std::lock_guard lk(shared_->mu);
    hold = shared_->held_open < kMaxHeldOpen;
    if (hold) shared_->held_open++;
  }
  if (!hold) {  // too many waiting: read it here
    exe.build_id_ = read_build_id(o.fd.get());
    exe.known_ = true;
    shared_->remember({exe.dev_, exe.ino_, exe.mtime_ns_}, exe.build_id_);
    return exe;
  }
  // The slot is given back when the last copy of the descriptor goes,
  // read or not (a dropped record's file is closed unread).
  std::weak_ptr<ExeFile::Shared> owner = shared_;
  exe.fd_ = std::shared_ptr<Fd>(new Fd(std::move(o.fd)), [owner](Fd* f) {
    delete f;
    if (auto s = owner.lock()) {
      std::lock_guard lk(s->mu);
      s->held_open--;
    }
  });
  return exe;
}

ExeCache::Exe ExeCache::lookup(pid_t pid) {
  ExeFile f = open(pid);
  return {f.path, f.build_id()};
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
