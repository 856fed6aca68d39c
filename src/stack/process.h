// Per-process state of the stack library (internal to Resolver): parsed
// /proc/PID/maps, the modules behind its file mappings, its perf map, and
// the cached libdwfl session that unwinds its samples.
#pragma once

#include <elfutils/libdwfl.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "arch/regs.h"
#include "stack/maps.h"
#include "stack/module.h"
#include "stack/perf_map.h"
#include "stack/stack.h"
#include "util/budget.h"
#include "util/safe_open.h"

namespace jankbpf::stack {

class Resolver;

class Process {
 public:
  Process(pid_t pid, Arch arch, Resolver& owner);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  Arch arch() const { return arch_; }
  // Maps were read at least once (the process existed).
  bool has_maps() const { return maps_loaded_; }
  const ProcMaps& maps() const { return maps_; }

  // Re-reads /proc/PID/maps; when it changed, drops the Dwfl and the
  // per-mapping modules. Returns true when it changed.
  bool reload_maps();
  // Maps read earlier, while the process lived (on the thread that saw its
  // task start): used when none can be read any more, so samples unwound
  // after a short process exited still find their mappings.
  void remember_maps(std::string text) { early_maps_ = std::move(text); }
  // reload_maps(), at most once per ResolverOptions::maps_refresh_interval.
  bool maybe_refresh();
  // The same, with the caller's interval (Resolver::prepare's: a long task's
  // pin re-reads the maps only when the last read is that old).
  bool maybe_refresh(std::chrono::milliseconds interval);
  // The process runs another executable than when its maps were read (an
  // exec): one stat() of /proc/PID/exe.
  bool exec_since_maps() const;

  struct Mapped {
    std::shared_ptr<Module> module;  // null: the file could not be opened/parsed
    uint64_t bias = 0;               // runtime address - ELF vaddr
    uint32_t budget = 0;             // util/budget.h bits: why it was refused or cut
  };
  // The module of a file-backed (or vdso) mapping, opened on first use.
  const Mapped& mapped(const MapEntry& m);

  struct UnwoundPc {
    uint64_t pc;
    bool activation;  // leaf or signal frame: look up pc itself, not pc-1
  };
  struct Unwound {
    std::vector<UnwoundPc> pcs;  // leaf first
    UnwindStop stop = UnwindStop::Complete;
    std::string error;
    bool unknown_pc = false;  // a pc fell outside every known mapping
  };
  Unwound unwind(const SampleInput& in, const UserRegs& regs);

  // The perf-map (JIT) entry for addr, re-reading the map file when it changed.
  const PerfMap::Entry* jit_lookup(uint64_t addr);
  // Opens the perf map (if the process has one) now, while the process
  // lives; jit_lookup() reads it through that descriptor later.
  bool hold_perf_map();

  // Removes arm64 pointer-authentication bits when what remains is code.
  uint64_t strip_pac(uint64_t v) const;

  // Its uid (the owner of /proc/PID), what its budgets are charged to.
  uid_t uid();
  // Budget bits its perf map hit (util/budget.h).
  uint32_t perf_map_budget() const { return perf_map_ && perf_map_->cut() ? static_cast<uint32_t>(kBudgetPerfMap) : 0u; }
  // Stops prepare()'s opening of modules at this time.
  void set_deadline(std::chrono::steady_clock::time_point t) { deadline_ = t; }

  uint64_t last_used = 0;

 private:
  struct Ctx;
  bool ensure_dwfl();
  void drop_dwfl();
  void report(uint64_t addr);
  bool read_word(uint64_t addr, uint64_t* out);
  int on_frame(Dwfl_Frame* state);
  bool walk_jit_frames();
  bool has_cfi(uint64_t pc);
  bool leaf_without_cfi(const MapEntry& m, uint64_t pc);
  bool in_plt_stub(const MapEntry& m, const Mapped& mp, uint64_t pc);
  int leaf_to_caller(uint64_t pc);
  Unwound unwind_once(const SampleInput& in, const UserRegs& regs);
  std::string proc_path(std::string_view leaf) const;
  // A new module for mapping m of the file opened as `o`, within the
  // budgets; null (with `budget` bits set when a budget said no) otherwise.
  std::shared_ptr<Module> open_module(const MapEntry& m, Opened o, std::string key, const DebugSearch& where,
                                      uint32_t& budget);

  static pid_t cb_next_thread(Dwfl*, void* arg, void** thread_argp);
  static bool cb_get_thread(Dwfl*, pid_t tid, void* arg, void** thread_argp);
  static bool cb_memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg);
  static bool cb_set_initial_registers(Dwfl_Thread* thread, void* arg);
  static int cb_frame(Dwfl_Frame* state, void* arg);

  pid_t pid_;
  Arch arch_;
  const RegTable& regs_;
  Resolver& owner_;
  std::string maps_text_;
  ProcMaps maps_;
  bool maps_loaded_ = false;
  uint64_t va_mask_ = ~uint64_t{0};
  uint64_t exe_dev_ = 0, exe_ino_ = 0;  // /proc/PID/exe when the maps were read
  std::chrono::steady_clock::time_point last_reload_{};
  std::unordered_map<uint64_t, Mapped> mapped_;  // by mapping start
  // Owners allowed for files we open from its root (util/safe_open).
  std::vector<uid_t> owners_;
  bool owners_known_ = false;
  uid_t uid_ = 0;
  bool uid_known_ = false;
  size_t modules_opened_ = 0;  // new modules made for it (budgets.modules_per_process)
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  const std::vector<uid_t>& owners();
  std::unordered_map<uint64_t, bool> leaf_memo_;  // function start -> leaf_without_cfi

  Dwfl* dwfl_ = nullptr;
  Elf* arch_elf_ = nullptr;
  alignas(8) unsigned char arch_elf_image_[64] = {};
  std::unordered_set<uint64_t> reported_;  // mapping starts reported to dwfl_
  bool dwfl_failed_ = false;

  std::string early_maps_;  // remember_maps()
  std::optional<PerfMap> perf_map_;
  Fd perf_map_fd_;  // held: the process may exit before its samples are unwound
  std::string perf_map_path_;  // inside the process's root: "/tmp/perf-NSPID.map"
  std::string perf_map_error_;  // the last refusal, logged once
  int64_t perf_map_mtime_ = -1;
  int64_t perf_map_size_ = -1;
  uint64_t perf_map_read_ = 0;  // bytes of the file parsed so far (a growing map is read on from there)
  uint64_t perf_map_ino_ = 0, perf_map_dev_ = 0;
  std::chrono::steady_clock::time_point perf_map_checked_{};

  Ctx* ctx_ = nullptr;  // the sample being unwound
};

}  // namespace jankbpf::stack
