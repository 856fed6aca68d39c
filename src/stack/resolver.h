// The stack library's entry point: captured sample in, symbolized stack out.
//
//   stack::Resolver resolver;                       // one per worker thread
//   stack::SampleInput in;
//   in.pid = s.pid; in.tid = s.tid;
//   in.regs_abi = s.abi; in.regs_mask = reg_table(host_arch().arch).sample_regs_user;
//   in.regs = {s.regs, popcount(mask)};
//   in.stack = {s.stack_data, s.stack_size}; in.stack_dyn_size = s.dyn_size;
//   in.kernel_callchain = {s.ips, s.nr};            // perf callchain as is
//   stack::ResolvedStack st = resolver.resolve(in);
//   tree.add(st);
//
// Unwinding: elfutils libdwfl over the copied stack (one cached Dwfl per
// process, modules reported lazily from /proc/PID/maps and opened through
// /proc/PID/map_files or /proc/PID/root), frame pointers through JIT code,
// pointer-authentication bits stripped on arm64. Symbolization: ELF
// .symtab/.dynsym, separate debug files, DWARF lines and inlines, perf maps
// for JIT code, /proc/kallsyms for kernel frames.
//
// Not thread-safe: call from one thread (off the ring-buffer reader).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>
#include <string>
#include <unordered_map>

#include "stack/kallsyms.h"
#include "util/budget.h"
#include "stack/module.h"
#include "stack/maps.h"
#include "stack/stack.h"

namespace jankbpf::stack {

struct ResolverOptions {
  // Where /proc is (tests point it at a fixture tree with PID/maps and
  // PID/root/<files>).
  std::string proc_root = "/proc";
  std::string kallsyms_path = "/proc/kallsyms";
  std::string sys_root = "/sys";  // kernel build-ids (/sys/kernel/notes)
  // Host root searched for debug files after the target's root; "" = none.
  std::string host_root = "/";
  unsigned max_frames = 128;
  // A file opened through /proc/PID/root (when map_files is unavailable)
  // must have the inode maps names, or it is a replaced binary. Fixture
  // trees (copied files) turn this off.
  bool verify_inode = true;
  // DWARF file:line and inlined frames (cold cost: parsing .debug_info).
  bool source_lines = true;
  // An unknown PC re-reads /proc/PID/maps at most this often per process.
  std::chrono::milliseconds maps_refresh_interval{50};
  // prepare()'s: how old the maps may be before a pin reads them again.
  std::chrono::milliseconds pin_maps_interval{5000};
  // Processes kept (least recently used beyond this are dropped). Each
  // holds a libdwfl session with one descriptor per module it touched.
  size_t max_processes = 64;
  // Raise RLIMIT_NOFILE's soft limit to the hard limit (at most 65536) on
  // construction: modules keep their files open, shared by every process.
  bool raise_fd_limit = true;
  // The vDSO image for samples of this arch: "" = this process's own (the
  // same kernel's); tests replaying another machine's samples name the
  // image dumped there.
  std::string vdso_path;

  // What one watched process (and one uid) may make the resolver hold or
  // spend (issue 26; README "Security"). Past a budget a process gets less
  // -- sections or modules left out, perf-map entries dropped -- and its
  // stacks say which budget (ResolvedStack::budgets).
  struct Budgets {
    // Bytes of ELF sections copied: one file, one process, one uid, all.
    uint64_t elf_per_file = 256ull << 20;
    uint64_t elf_per_process = 512ull << 20;
    uint64_t elf_per_uid = 512ull << 20;
    uint64_t elf_total = 1ull << 30;
    // Files a process may have opened as new modules; modules held in all.
    size_t modules_per_process = 512;
    size_t modules_total = 4096;
    // Copying one file's sections (headers, symbols, CFI) stops after this
    // (the rest is left out), and prepare() stops opening a process's files
    // after this much. DWARF is copied later, this much per sample at most
    // (a frame's lines come once it is all in).
    std::chrono::milliseconds parse_time{500};
    std::chrono::milliseconds dwarf_slice{50};
    // A process's perf map: entries and bytes kept; and per uid, overall.
    size_t perf_map_entries = 1u << 20;
    uint64_t perf_map_per_process = 64ull << 20;
    uint64_t perf_map_per_uid = 128ull << 20;
    uint64_t perf_map_total = 256ull << 20;
  } budgets;
};

class Process;

class Resolver {
 public:
  explicit Resolver(ResolverOptions opts = {});
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Unwinds and symbolizes one sample. Never throws on bad input: a stack
  // it cannot finish comes back partial with `truncated` and `stop` set.
  ResolvedStack resolve(const SampleInput& in);

  // Symbolizes return addresses already walked elsewhere (the kernel's
  // frame-pointer user stack of a waker), leaf first; the first is the
  // interrupted PC, the rest are looked up at PC - 1. Unknown places come
  // back with the module and offset, or just the PC; the walk ends at the
  // first return address outside executable memory.
  std::vector<Frame> symbolize_user(pid_t pid, Arch arch, std::span<const uint64_t> pcs);

  // Reads the process's maps and opens the modules of its executable
  // mappings now, so samples unwound after it exited still find them.
  // early_maps: /proc/PID/maps as read when the process was first seen
  // (maybe long before this runs), used if it is gone by now.
  void prepare(pid_t pid, Arch arch, std::string early_maps = {});

  // The maps last read of a process this resolver knows, or null (causes:
  // where an address lay, after the process is gone).
  const ProcMaps* known_maps(pid_t pid) const;

  // The process exec'd or changed its mappings: drop its maps and Dwfl.
  void invalidate(pid_t pid);
  // The process exited: drop everything about it.
  void forget(pid_t pid) { invalidate(pid); }

  struct Stats {
    size_t processes = 0, modules = 0;
    uint64_t module_hits = 0, module_misses = 0;  // ModuleCache lookups
    uint64_t samples = 0, maps_reloads = 0, dwfl_rebuilds = 0;
    // Bounds that dropped something: processes past max_processes (least
    // recently used), modules past the module cap, address memos restarted.
    uint64_t process_evictions = 0, module_evictions = 0, memo_resets = 0;
    // Issue 26's budgets: ELF bytes held now and at most, modules refused
    // (over a count), files cut or refused over bytes or time, perf maps cut.
    uint64_t elf_bytes_held = 0, elf_bytes_high = 0, perf_map_bytes_held = 0;
    uint64_t modules_refused = 0, elf_files_cut = 0, perf_maps_cut = 0;
  };
  Stats stats() const;

  const ResolverOptions& options() const { return opts_; }
  const Kallsyms& kallsyms();

 private:
  Process* process(pid_t pid, Arch arch);
  void kernel_frames(const SampleInput& in, ResolvedStack& out);

  ResolverOptions opts_;
  BudgetLedger elf_ledger_;       // ELF copies, by process and uid (declared before modules_: outlives them)
  BudgetLedger perf_map_ledger_;  // perf-map entries and names
  ModuleCache modules_;
  std::unordered_map<pid_t, std::unique_ptr<Process>> procs_;
  uint64_t use_clock_ = 0;
  std::unique_ptr<Kallsyms> kallsyms_;
  std::chrono::steady_clock::time_point kallsyms_loaded_{};
  std::string kernel_build_id_;
  std::unordered_map<std::string, std::string> kmod_build_ids_;
  std::shared_ptr<Module> vdso_;
  bool vdso_tried_ = false;
  uint32_t budgets_scratch_ = 0;  // symbolize_user's budget bits (no stack to carry them)
  Stats stats_;

  friend class Process;
  std::shared_ptr<Module> host_vdso();
};

}  // namespace jankbpf::stack
