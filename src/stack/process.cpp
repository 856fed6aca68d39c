// Process, part one: what jankbpf knows of a watched process's address
// space -- its maps (read again on an unknown pc, at most every 50 ms), each
// mapped file's module from the shared cache, its owners, its perf map.
// The unwinding of samples through libdwfl: process_unwind.cpp.
#include "stack/process.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>

#include "stack/resolver.h"
#include "util/log.h"
#include "util/safe_open.h"

namespace jankbpf::stack {

Process::Process(pid_t pid, Arch arch, Resolver& owner)
    : pid_(pid), arch_(arch), regs_(reg_table(arch)), owner_(owner) {}

Process::~Process() { drop_dwfl(); }


std::string Process::proc_path(std::string_view leaf) const {
  std::string p = owner_.options().proc_root;
  p += '/';
  p += std::to_string(pid_);
  p += '/';
  p += leaf;
  return p;
}

bool Process::reload_maps() {
  last_reload_ = std::chrono::steady_clock::now();
  ++owner_.stats_.maps_reloads;
  std::string text;
  if (!read_small_file(proc_path("maps"), text)) {
    // Gone: keep what we had (the samples may predate the exit), or take
    // what was read while it lived.
    log::debug("maps of pid %d unreadable (%s): keeping %zu entries%s", pid_, strerror(errno),
               maps_.entries().size(), !maps_loaded_ && !early_maps_.empty() ? ", taking the early read" : "");
    if (maps_loaded_ || early_maps_.empty()) return false;
    text = std::move(early_maps_);
    early_maps_.clear();
  }
  if (maps_loaded_ && text == maps_text_) return false;
  ProcMaps parsed = ProcMaps::parse(text);
  if (parsed.entries().empty() && maps_loaded_) {
    // An exiting process (a zombie) has no maps left: its queued samples
    // predate that, so keep the maps they were taken with.
    log::debug("maps of pid %d empty (exiting): keeping %zu entries", pid_, maps_.entries().size());
    return false;
  }
  maps_text_ = std::move(text);
  maps_ = std::move(parsed);
  struct stat exe {};
  if (stat(proc_path("exe").c_str(), &exe) == 0) {
    exe_dev_ = exe.st_dev;
    exe_ino_ = exe.st_ino;
  }
  log::debug("maps of pid %d read: %zu entries", pid_, maps_.entries().size());
  maps_loaded_ = true;
  mapped_.clear();
  leaf_memo_.clear();
  if (dwfl_) ++owner_.stats_.dwfl_rebuilds;
  drop_dwfl();
  // Pointer-authentication bits sit above the user VA size; no mapping is
  // above the highest one, so masking to its width never harms an address.
  uint64_t hi = maps_.highest_user_end();
  unsigned bits = hi > 1 ? static_cast<unsigned>(std::bit_width(hi - 1)) : 48;
  bits = std::clamp(bits, 32u, 56u);
  va_mask_ = (uint64_t{1} << bits) - 1;
  return true;
}

bool Process::exec_since_maps() const {
  struct stat exe {};
  if (!maps_loaded_ || stat(proc_path("exe").c_str(), &exe) != 0) return false;
  return exe.st_dev != exe_dev_ || exe.st_ino != exe_ino_;
}

bool Process::maybe_refresh() { return maybe_refresh(owner_.options().maps_refresh_interval); }

bool Process::maybe_refresh(std::chrono::milliseconds interval) {
  auto now = std::chrono::steady_clock::now();
  if (maps_loaded_ && now - last_reload_ < interval) return false;
  return reload_maps();
}

uint64_t Process::strip_pac(uint64_t v) const {
  if (!regs_.has_pac || !(v & ~va_mask_)) return v;
  uint64_t s = v & va_mask_;
  const MapEntry* m = maps_.find(s);
  return m && m->x ? s : v;
}

const Process::Mapped& Process::mapped(const MapEntry& m) {
  auto it = mapped_.find(m.start);
  if (it != mapped_.end()) return it->second;
  Mapped out;
  if (m.is_vdso()) {
    if (arch_ == host_arch().arch || !owner_.options().vdso_path.empty()) {
      out.module = owner_.host_vdso();
      if (out.module) {
        auto bias = out.module->elf().load_bias(m.start, m.pgoff);
        if (bias) out.bias = *bias;
        else out.module.reset();
      }
    }
    return mapped_.emplace(m.start, std::move(out)).first->second;
  }
  if (!m.file_backed()) return mapped_.emplace(m.start, std::move(out)).first->second;

  // map_files names the very file mapped (deleted or replaced binaries,
  // other mount namespaces); the root path is the fallback (needs no
  // CAP_SYS_ADMIN) and is checked against the inode maps reports.
  // Either way only a regular file within ElfImage's bound is taken, the
  // root path without following any link (util/safe_open).
  char range[48];
  std::snprintf(range, sizeof range, "map_files/%" PRIx64 "-%" PRIx64, m.start, m.end);
  OpenPolicy policy;
  policy.max_size = ElfImage::kMaxFileBytes;
  Opened o = open_magic(proc_path(range), policy);
  bool via_root = false;
  if (!o && !m.deleted) {
    policy.owners = owners();
    o = open_in_root(proc_path("root"), m.path, policy);
    via_root = true;
  }
  bool need_identity = via_root && owner_.options().verify_inode;
  if (!o && !m.deleted && !owner_.options().host_root.empty()) {
    // Neither opened, most often because the process is gone (its samples
    // were unwound late, its map_files and root with it): the path in our
    // own root, taken only if it is the very file that was mapped (device
    // and inode as maps gave them), so nothing is read that the process
    // could not read.
    policy.owners.clear();
    o = open_in_root(owner_.options().host_root, m.path, policy);
    need_identity = true;
  }
  if (o) {
    // The root path may name another file than the one mapped (replaced
    // binary, another filesystem with the same inode number).
    bool same = !need_identity ||
                (o.st.st_ino == m.inode && major(o.st.st_dev) == m.dev_major && minor(o.st.st_dev) == m.dev_minor);
    if (same) {
      DebugSearch where;
      where.path = m.path;
      where.roots.push_back(proc_path("root"));
      where.owners = owners();
      if (!owner_.options().host_root.empty()) {
        struct stat a, b2;
        std::string host = owner_.options().host_root == "/" ? "" : owner_.options().host_root;
        // The target's root is the host's: search it once.
        if (!(::stat(proc_path("root/").c_str(), &a) == 0 && ::stat((host + "/").c_str(), &b2) == 0 &&
              a.st_dev == b2.st_dev && a.st_ino == b2.st_ino))
          where.roots.push_back(host);
      }
      // The cache first, by the identity of the file as opened: a hit
      // costs no private copy of the file (a new process's libc).
      std::string key = module_key(o.st, where);
      out.module = owner_.modules_.find(key);
      if (!out.module)
        if (auto elf = ElfImage::open(std::move(o.fd)))
          out.module = owner_.modules_.insert(std::move(key), std::move(elf), m.path, where);
      if (out.module) {
        auto bias = out.module->elf().load_bias(m.start, m.pgoff);
        out.bias = bias ? *bias : m.start - m.pgoff;
      }
    }
  }
  return mapped_.emplace(m.start, std::move(out)).first->second;
}

const std::vector<uid_t>& Process::owners() {
  if (!owners_known_) {
    owners_ = process_file_owners(owner_.options().proc_root, pid_);
    owners_known_ = !owners_.empty();
  }
  return owners_;
}

namespace {
constexpr uint64_t kMaxPerfMapBytes = 512u << 20;
}

bool Process::hold_perf_map() {
  // The perf map is the process's own file in its own /tmp: opened inside
  // its root, no link followed, no FIFO or device read, bounded, and only
  // when owned by the process's user (or root).
  if (perf_map_fd_) return true;
  if (perf_map_path_.empty()) {
    pid_t ns = namespace_pid(owner_.options().proc_root, pid_);
    perf_map_path_ = "/tmp/perf-" + std::to_string(ns) + ".map";
  }
  OpenPolicy policy;
  policy.max_size = kMaxPerfMapBytes;
  policy.owners = owners();
  if (policy.owners.empty()) return false;  // gone
  Opened o = open_in_root(proc_path("root"), perf_map_path_, policy);
  if (!o) {
    if (o.error != perf_map_error_) log::debug("perf map of pid %d refused: %s", pid_, o.error.c_str());
    perf_map_error_ = o.error;
    return false;
  }
  perf_map_error_.clear();
  perf_map_fd_ = std::move(o.fd);
  return true;
}

const PerfMap::Entry* Process::jit_lookup(uint64_t addr) {
  auto now = std::chrono::steady_clock::now();
  if (perf_map_) {
    if (const auto* e = perf_map_->lookup(addr)) return e;
    // JIT output grows while we look: a miss re-checks the file, rarely.
    if (now - perf_map_checked_ < std::chrono::milliseconds(20)) return nullptr;
  }
  perf_map_checked_ = now;
  // Opened once while the process lives (its samples are often unwound
  // after it exited, when /proc/PID/root is gone) and re-read through that
  // descriptor as it grows; opened again only if it was unlinked.
  struct stat st{};
  if (perf_map_fd_ && (::fstat(perf_map_fd_.get(), &st) != 0 || st.st_nlink == 0)) perf_map_fd_.reset();
  if (!perf_map_fd_) {
    if (!hold_perf_map()) return nullptr;
    if (::fstat(perf_map_fd_.get(), &st) != 0) return nullptr;
  }
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > kMaxPerfMapBytes) return nullptr;
  int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (perf_map_ && mtime == perf_map_mtime_ && st.st_size == perf_map_size_) return nullptr;
  std::string text;
  if (::lseek(perf_map_fd_.get(), 0, SEEK_SET) != 0 || !read_bounded(perf_map_fd_.get(), text, kMaxPerfMapBytes))
    return nullptr;
  perf_map_ = PerfMap::parse(text);
  perf_map_mtime_ = mtime;
  perf_map_size_ = st.st_size;
  return perf_map_->lookup(addr);
}

}  // namespace jankbpf::stack
