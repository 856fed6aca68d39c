#include "cause/identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "cause/evidence.h"
#include "cause/syscalls.h"
#include "stack/maps.h"
#include "util/fd.h"
#include "util/log.h"

namespace jankbpf::cause {
namespace {

std::string proc_task(pid_t pid, pid_t tid) {
  return "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
}

std::string trim_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

// A small file under an open directory, never through a link.
std::string read_at(int dir, const char* name, size_t limit = 256) {
  Fd fd(::openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) return "";
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  std::string out(limit, '\0');
  ssize_t n = ::read(fd.get(), out.data(), limit);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return trim_newline(out);
}

// A string of the form "NAME rest..." split at spaces, bounded.
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string f;
  while (out.size() < 64 && in >> f) out.push_back(f);
  return out;
}

}  // namespace

std::string safe_name(const std::string& s, size_t max) {
  return log::escape_control(std::string_view(s).substr(0, max));
}

std::string ProcIdentities::thread_comm(pid_t pid, pid_t tid) {
  if (pid <= 0 || tid <= 0) return "";
  std::string text;
  if (!stack::read_small_file(proc_task(pid, tid) + "/comm", text, 64)) return "";
  return safe_name(trim_newline(text), 64);
}

bool ProcIdentities::thread_in(pid_t pid, pid_t tid) {
  if (pid <= 0 || tid <= 0) return false;
  struct stat st{};
  return ::lstat(proc_task(pid, tid).c_str(), &st) == 0;
}

std::string ProcIdentities::fd_path(pid_t pid, int fd) {
  if (pid <= 0 || fd < 0) return "";
  // The magic link's text, never followed.
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  return safe_name(std::string(buf, static_cast<size_t>(n)), 512);
}

std::string ProcIdentities::address_where(pid_t pid, uint64_t addr) {
  if (pid <= 0 || !addr) return "";
  std::string text;
  if (!stack::read_small_file("/proc/" + std::to_string(pid) + "/maps", text, 8u << 20)) {
    const stack::ProcMaps* known = maps_of_ ? maps_of_(maps_ctx_, pid) : nullptr;
    return known ? where_in(*known, addr) : "";
  }
  return where_in(stack::ProcMaps::parse(text), addr);
}

MappedFile ProcIdentities::mapped_file(pid_t pid, uint64_t addr) {
  if (pid <= 0 || !addr) return {};
  std::string text;
  if (!stack::read_small_file("/proc/" + std::to_string(pid) + "/maps", text, 8u << 20)) {
    const stack::ProcMaps* known = maps_of_ ? maps_of_(maps_ctx_, pid) : nullptr;
    return known ? file_at(*known, addr) : MappedFile{};
  }
  return file_at(stack::ProcMaps::parse(text), addr);
}

std::string where_in(const stack::ProcMaps& maps, uint64_t addr) {
  const auto* m = maps.find(addr);
  if (!m) return "";
  char off[32];
  if (m->file_backed()) {
    std::string base = m->path.substr(m->path.rfind('/') + 1);
    snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(addr - m->start + m->pgoff));
    return safe_name(base, 128) + off;
  }
  if (!m->path.empty()) return safe_name(m->path, 128);
  return "[anon]";
}

std::map<std::string, uint32_t> parse_proc_cgroups(const std::string& text) {
  std::map<std::string, uint32_t> out;
  std::istringstream in(text);
  std::string line;
  while (out.size() < 64 && std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto f = fields(line);
    if (f.size() < 2) continue;
    char* end = nullptr;
    errno = 0;
    unsigned long h = strtoul(f[1].c_str(), &end, 10);
    if (errno || !end || *end || h > UINT32_MAX) continue;
    out[f[0]] = static_cast<uint32_t>(h);
  }
  return out;
}

std::map<uint32_t, std::pair<std::string, std::string>> parse_cgroup_mounts(
    const std::string& mountinfo, const std::map<std::string, uint32_t>& subsystems) {
  std::map<uint32_t, std::pair<std::string, std::string>> out;
  std::istringstream in(mountinfo);
  std::string line;
  size_t lines = 0;
  while (++lines < 100000 && std::getline(in, line)) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS
    auto f = fields(line);
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") dash++;
    if (dash < 5 || dash + 3 >= f.size() + 1 || dash + 1 >= f.size()) continue;
    const std::string& fstype = f[dash + 1];
    const std::string& mnt = f[4];
    if (f[3] != "/") continue;  // a bind mount of a sub-cgroup: not the hierarchy's root
    if (fstype == "cgroup2") {
      if (!out.count(0)) out[0] = {mnt, "cgroup2"};
      continue;
    }
    if (fstype != "cgroup" || dash + 3 >= f.size()) continue;
    std::string names;
    uint32_t hierarchy = 0;
    std::istringstream opts(f[dash + 3]);
    std::string o;
    while (std::getline(opts, o, ',')) {
      auto it = subsystems.find(o);
      if (it == subsystems.end()) continue;
      hierarchy = it->second;
      names += (names.empty() ? "" : ",") + o;
    }
    if (hierarchy && !out.count(hierarchy)) out[hierarchy] = {mnt, "cgroup (" + names + ")"};
  }
  return out;
}

std::string quota_text(const std::string& cpu_max, const std::string& v1_quota, const std::string& v1_period) {
  auto f = fields(cpu_max);
  if (f.size() == 2) return f[0] + "/" + f[1];
  if (!v1_quota.empty() && !v1_period.empty()) {
    auto q = fields(v1_quota), p = fields(v1_period);
    if (q.size() == 1 && p.size() == 1) return (q[0] == "-1" ? "max" : q[0]) + "/" + p[0];
  }
  return "";
}

void ProcIdentities::read_mounts() {
  mounts_read_ = true;
  std::string cgroups, mountinfo;
  stack::read_small_file("/proc/cgroups", cgroups, 1 << 16);
  stack::read_small_file("/proc/self/mountinfo", mountinfo, 4u << 20);
  mounts_ = parse_cgroup_mounts(mountinfo, parse_proc_cgroups(cgroups));
}

CgroupInfo ProcIdentities::cgroup(uint64_t id, uint32_t hierarchy) {
  CgroupInfo out;
  if (!id) return out;
  if (!mounts_read_) read_mounts();
  auto it = mounts_.find(hierarchy);
  if (it == mounts_.end()) return out;
  const auto& [mnt, fs] = it->second;
  out.fs = fs;
  Fd mfd(::open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!mfd) return out;
  // The kernel's handle of a kernfs node is its 64-bit id (FILEID_KERNFS).
  struct {
    file_handle fh;
    uint64_t id;
  } h{};
  h.fh.handle_bytes = sizeof(uint64_t);
  h.fh.handle_type = 0xfe;
  memcpy(h.fh.f_handle, &id, sizeof id);
  Fd dir(::open_by_handle_at(mfd.get(), &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return out;
  char buf[4096];
  const std::string self = "/proc/self/fd/" + std::to_string(dir.get());
  ssize_t n = ::readlink(self.c_str(), buf, sizeof buf - 1);
  if (n > 0) {
    std::string full(buf, static_cast<size_t>(n));
    std::string rel = full.compare(0, mnt.size(), mnt) == 0 ? full.substr(mnt.size()) : full;
    out.path = safe_name(rel.empty() ? "/" : rel, 512);
  }
  out.quota = quota_text(read_at(dir.get(), "cpu.max"), read_at(dir.get(), "cpu.cfs_quota_us"),
                         read_at(dir.get(), "cpu.cfs_period_us"));
  return out;
}

void prefetch(Prefetched& out, const jb_cause_event& e, Identities& live) {
  const pid_t pid = static_cast<pid_t>(e.hdr.pid);
  for (uint32_t i = 0; i < e.nslices && i < JB_CAUSE_SLOTS; i++) {
    const jb_cause_slice& s = e.slices[i];
    const bool compat = s.flags & JB_CSF_COMPAT;
    // Only what was found: a miss is looked up again later (other sources).
    if (s.kind == JB_CAUSE_LOCK && s.arg0 && !out.where.count(s.arg0))
      if (std::string w = live.address_where(pid, s.arg0); !w.empty()) out.where[s.arg0] = w;
    if (!compat && s.nr >= 0 && first_arg_is_fd(s.nr) && s.arg0 < (1u << 30)) {
      const int fd = static_cast<int>(s.arg0);
      if (!out.fd_paths.count(fd))
        if (std::string path = live.fd_path(pid, fd); !path.empty()) out.fd_paths[fd] = path;
    }
    if (s.kind == JB_CAUSE_FAULT && (s.flags & JB_CSF_FAULT_ADDR))
      for (uint64_t a : {s.arg0, e.io.fault_lo, e.io.fault_hi})
        if (a && !out.files.count(a) && out.files.size() < 16)
          if (MappedFile f = live.mapped_file(pid, a); f.found) out.files[a] = f;
    if (s.kind == JB_CAUSE_IO && !compat && s.nr >= 0 && first_arg_is_fd(s.nr) && s.arg0 < (1u << 30)) {
      const int fd = static_cast<int>(s.arg0);
      BlockDevice d;
      if (!out.fd_devs.count(fd) && out.fd_devs.size() < 16 && live.fd_device(pid, fd, &d)) out.fd_devs[fd] = d;
    }
    for (uint32_t tid : {s.claim, static_cast<uint32_t>(s.waker_pid) == e.hdr.pid ? s.waker_tid : 0u})
      if (tid && tid < (1u << 22) && !out.comms.count(static_cast<pid_t>(tid)))
        if (std::string comm = live.thread_comm(pid, static_cast<pid_t>(tid)); !comm.empty())
          out.comms[static_cast<pid_t>(tid)] = comm;
    if (out.comms.size() > 64) break;
  }
}

std::string PrefetchedIdentities::thread_comm(pid_t pid, pid_t tid) {
  auto it = p_.comms.find(tid);
  return it != p_.comms.end() ? it->second : fallback_.thread_comm(pid, tid);
}

bool PrefetchedIdentities::thread_in(pid_t pid, pid_t tid) {
  return p_.comms.count(tid) || fallback_.thread_in(pid, tid);
}

std::string PrefetchedIdentities::fd_path(pid_t pid, int fd) {
  auto it = p_.fd_paths.find(fd);
  return it != p_.fd_paths.end() ? it->second : fallback_.fd_path(pid, fd);
}

MappedFile PrefetchedIdentities::mapped_file(pid_t pid, uint64_t addr) {
  auto it = p_.files.find(addr);
  return it != p_.files.end() ? it->second : fallback_.mapped_file(pid, addr);
}

bool PrefetchedIdentities::fd_device(pid_t pid, int fd, BlockDevice* out) {
  auto it = p_.fd_devs.find(fd);
  if (it == p_.fd_devs.end()) return fallback_.fd_device(pid, fd, out);
  *out = it->second;
  return true;
}

std::string PrefetchedIdentities::address_where(pid_t pid, uint64_t addr) {
  auto it = p_.where.find(addr);
  return it != p_.where.end() ? it->second : fallback_.address_where(pid, addr);
}

}  // namespace jankbpf::cause
