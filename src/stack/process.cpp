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
#include <thread>

#include "bpf/test_seams.h"
#include "stack/resolver.h"
#include "util/log.h"
#include "util/safe_open.h"
#include "util/own_clock.h"

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

  // prepare() out of time: nothing more is opened now (a sample of this
  // mapping opens it later, in its own job).
  if (util::own_now() > deadline_) {
    static const Mapped kNotNow;
    return kNotNow;
  }

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
      if (!out.module) out.module = open_module(m, std::move(o), std::move(key), where, out.budget);
      if (out.module) {
        auto bias = out.module->elf().load_bias(m.start, m.pgoff);
        out.bias = bias ? *bias : m.start - m.pgoff;
      }
    }
  }
  return mapped_.emplace(m.start, std::move(out)).first->second;
}

namespace {

// Reopens a mapped file for reads outside its module's copy: the same file
// (device, inode, size, times) through the process's map_files, its root,
// or the host root, as first opened; nothing if it is no longer there.
class MappedSource final : public ElfSource {
 public:
  MappedSource(std::string map_file, std::string root, std::string host_root, std::string path,
               const struct stat& st)
      : map_file_(std::move(map_file)), root_(std::move(root)), host_root_(std::move(host_root)),
        path_(std::move(path)), st_(st) {}
  Fd reopen() const override {
    OpenPolicy policy;
    policy.max_size = ElfImage::kMaxFileBytes;
    for (int how = 0; how < 3; ++how) {
      Opened o = how == 0 ? open_magic(map_file_, policy)
                 : how == 1 ? open_in_root(root_, path_, policy)
                            : (host_root_.empty() ? Opened{} : open_in_root(host_root_, path_, policy));
      if (o && o.st.st_dev == st_.st_dev && o.st.st_ino == st_.st_ino && o.st.st_size == st_.st_size &&
          o.st.st_mtim.tv_sec == st_.st_mtim.tv_sec && o.st.st_mtim.tv_nsec == st_.st_mtim.tv_nsec &&
          o.st.st_ctim.tv_sec == st_.st_ctim.tv_sec && o.st.st_ctim.tv_nsec == st_.st_ctim.tv_nsec)
        return std::move(o.fd);
    }
    return Fd();
  }

 private:
  std::string map_file_, root_, host_root_, path_;
  struct stat st_;
};

}  // namespace

std::shared_ptr<Module> Process::open_module(const MapEntry& m, Opened o, std::string key, const DebugSearch& where,
                                             uint32_t& budget) {
  const ResolverOptions::Budgets& b = owner_.options().budgets;
  ModuleCache& cache = owner_.modules_;
  // A process mapping 30,000 little files (issue 26) gets modules_per_process.
  if (modules_opened_ >= b.modules_per_process) {
    budget |= kBudgetModules;
    ++owner_.stats_.modules_refused;
    return nullptr;
  }
  cache.make_room(owner_.elf_ledger_, std::min(b.elf_per_file, static_cast<uint64_t>(o.st.st_size)), pid_, uid());
  if (cache.size() >= b.modules_total) {
    budget |= kBudgetModules;
    ++owner_.stats_.modules_refused;
    return nullptr;
  }
  ElfCopyLimits limits;
  limits.max_copy = b.elf_per_file;
  limits.ledger = &owner_.elf_ledger_;
  limits.pid = pid_;
  limits.uid = uid();
  limits.time = b.parse_time;
  char range[48];
  std::snprintf(range, sizeof range, "map_files/%" PRIx64 "-%" PRIx64, m.start, m.end);
  auto source = std::make_unique<MappedSource>(proc_path(range), proc_path("root"), owner_.options().host_root,
                                               m.path, o.st);
  // Tests: a slow filesystem of the process's user (test_seams.h).
  if (uint32_t ms = test_seams::slow_open_ms(); ms && o.st.st_uid != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  auto elf = ElfImage::open(std::move(o.fd), limits, std::move(source));
  ++modules_opened_;
  if (!elf) {
    // Not an ELF we read, or not even its headers fit what is left of the budget.
    if (owner_.elf_ledger_.headroom(pid_, limits.uid) < (1u << 20)) {
      budget |= kBudgetElfBytes;
      ++owner_.stats_.elf_files_cut;
    }
    return nullptr;
  }
  if (elf->budget_cut()) {
    ++owner_.stats_.elf_files_cut;
    log::debug("pid %d: %s: %llu bytes copied, sections left out (%s budget)", pid_,
               log::escape_control(m.path).c_str(), static_cast<unsigned long long>(elf->copied_bytes()),
               elf->budget_cut() & kBudgetTime ? "time" : "bytes");
  }
  return cache.insert(std::move(key), std::move(elf), m.path, where, limits);
}

uid_t Process::uid() {
  if (!uid_known_) {
    struct stat st;
    if (::stat(proc_path("").c_str(), &st) == 0) {
      uid_ = st.st_uid;
      uid_known_ = true;
    }
  }
  return uid_;
}

const std::vector<uid_t>& Process::owners() {
  if (!owners_known_) {
    owners_ = process_file_owners(owner_.options().proc_root, pid_);
    owners_known_ = !owners_.empty();
  }
  return owners_;
}

namespace {
// A perf map larger than this is refused outright; a smaller one is read
// as a stream, within the perf-map budgets.
constexpr uint64_t kMaxPerfMapBytes = 512u << 20;
}  // namespace

bool Process::hold_perf_map() {
  // The perf map is the process's own file in its own /tmp: opened inside
  // its root, no link followed, no FIFO or device opened, and only when
  // owned by the process's user (or root).
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
  const ResolverOptions::Budgets& b = owner_.options().budgets;
  // A map that grew (same file, longer) is read on from where the last read
  // stopped; one that was rewritten or replaced is read again from the start.
  const bool grew = perf_map_ && st.st_ino == static_cast<ino_t>(perf_map_ino_) &&
                    st.st_dev == static_cast<dev_t>(perf_map_dev_) &&
                    static_cast<uint64_t>(st.st_size) >= perf_map_read_;
  if (!grew) {
    perf_map_.reset();  // its charge first: the new map may need the room
    PerfMapLimits limits{b.perf_map_entries, b.perf_map_per_process};
    perf_map_.emplace(limits, owner_.perf_map_ledger_.charge(pid_, uid(), 0));
    perf_map_read_ = 0;
    perf_map_ino_ = st.st_ino;
    perf_map_dev_ = st.st_dev;
  }
  perf_map_mtime_ = mtime;
  perf_map_size_ = st.st_size;
  // Read in chunks, never the whole text at once; nothing past what the
  // limits can keep (bad lines included: at most twice the bytes kept).
  char buf[65536];
  const uint64_t max_read = 2 * b.perf_map_per_process;
  bool was_cut = perf_map_->cut();
  while (!perf_map_->cut() && perf_map_read_ < static_cast<uint64_t>(st.st_size) && perf_map_read_ < max_read) {
    ssize_t n = ::pread(perf_map_fd_.get(), buf, sizeof buf, static_cast<off_t>(perf_map_read_));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    perf_map_read_ += static_cast<uint64_t>(n);
    perf_map_->feed(std::string_view(buf, static_cast<size_t>(n)));
  }
  perf_map_->finish();
  if (perf_map_read_ >= max_read && perf_map_read_ < static_cast<uint64_t>(st.st_size)) perf_map_->mark_cut();
  if (perf_map_->cut() && !was_cut) {
    ++owner_.stats_.perf_maps_cut;
    log::debug("perf map of pid %d: %zu entries kept, the rest left out (its budget)", pid_, perf_map_->size());
  }
  return perf_map_->lookup(addr);
}

}  // namespace jankbpf::stack
