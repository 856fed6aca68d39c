// A loaded module (executable or shared object), shared by every process
// that maps it and cached by file identity (see module_key; never by the
// build-id the file claims, which a container can copy from the host's):
// its ELF image, its separate debug file, a merged symbol table, a libdwfl
// session for DWARF line info and inlined frames, and memoized results per
// address so a warm lookup is one hash probe.
#pragma once

#include <elfutils/libdwfl.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "stack/elf_image.h"

namespace jankbpf::stack {

// One function at an address, innermost first: inlined callees, then the
// function the address physically lies in.
struct SymbolizedFrame {
  std::string function;  // demangled, "" if unknown
  uint64_t function_start = 0;  // ELF vaddr of the symbol (physical frame only)
  bool has_start = false;
  std::string file;
  uint32_t line = 0, column = 0;
  bool inlined = false;
};

struct Symbolized {
  std::vector<SymbolizedFrame> frames;  // never empty once computed
};

// Where to look for separate debug files: the target's root first
// ("/proc/PID/root"), then the host root ("/"); `path` is the binary's path
// as the target sees it (for .gnu_debuglink's directory rules).
struct DebugSearch {
  std::vector<std::string> roots;
  std::string path;
  std::vector<uid_t> owners;  // a candidate must be owned by one; empty: any
};

// Finds and opens the separate debug file of `elf`: .build-id/xx/yyyy.debug
// under <root>/usr/lib/debug, then .gnu_debuglink next to the binary, in
// .debug/, and under <root>/usr/lib/debug/<dir>. A candidate must carry the
// same build-id (or, without one, match the debuglink CRC), read from its
// headers (or the file) before anything of it is copied, within `limits`.
std::unique_ptr<ElfImage> find_debug_file(const ElfImage& elf, const DebugSearch& where,
                                          std::string* found_path = nullptr, const ElfCopyLimits& limits = {});

std::string demangle(std::string_view name);

// Dwfl callbacks for sessions whose modules are reported with
// dwfl_report_module and tied to an ElfImage with attach_image(): libdwfl
// gets a libelf handle on the image's private copy (no descriptor, nothing
// read from the file), and never a separate debug file (a Module's own
// session reports the image that holds the DWARF instead).
const Dwfl_Callbacks* module_dwfl_callbacks();
void attach_image(Dwfl_Module* mod, const ElfImage* image);
// Reports `image` to `dwfl` (between dwfl_report_begin[_add] and _end) as
// loaded with `bias` (runtime address - ELF vaddr), under `name`.
Dwfl_Module* report_image(Dwfl* dwfl, const ElfImage& image, uint64_t bias, const char* name);

class Module {
 public:
  // `limits`: for the separate debug file, if one is looked for.
  Module(std::unique_ptr<ElfImage> elf, std::string path, const DebugSearch& where,
         const ElfCopyLimits& limits = {});
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& path() const { return path_; }
  const std::string& build_id() const { return elf_->build_id(); }
  const ElfImage& elf() const { return *elf_; }
  const ElfImage* debug() const { return debug_.get(); }
  const std::string& debug_path() const { return debug_path_; }

  // Functions at ELF vaddr `vaddr` (pc - load bias, already pc-1 for
  // return addresses). `lines`: consult DWARF for file:line and inlines.
  // DWARF not copied yet is copied until `until` (ElfImage::load_dwarf); a
  // result computed before it is all in has no lines and is not memoized.
  const Symbolized& symbolize(uint64_t vaddr, bool lines,
                              std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::max());
  // True once DWARF is open or refused for good: symbolize() no longer
  // reads `until`.
  bool dwarf_settled() const { return dwarf_tried_; }
  size_t cached_results() const { return cache_.size(); }
  // Times the address memo was full and started over.
  uint64_t memo_resets() const { return memo_resets_; }
  // Budget bits (util/budget.h) that cost this module sections (its file's
  // or its debug file's): its frames may lack names or lines.
  uint32_t budget_cut() const { return elf_->budget_cut() | (debug_ ? debug_->budget_cut() : 0); }
  uid_t charged_uid() const { return elf_->charged_uid(); }
  // Bytes held: both copies.
  uint64_t held_bytes() const { return elf_->copied_bytes() + (debug_ ? debug_->copied_bytes() : 0); }

 private:
  void load_symbols();
  bool open_dwarf(std::chrono::steady_clock::time_point until);
  void dwarf_frames(uint64_t vaddr, Symbolized& out, std::chrono::steady_clock::time_point until);

  std::string path_;
  std::unique_ptr<ElfImage> elf_;
  std::unique_ptr<ElfImage> debug_;
  std::string debug_path_;
  bool symbols_loaded_ = false;
  std::vector<ElfSymbol> symbols_;
  bool dwarf_tried_ = false;
  Dwfl* dwfl_ = nullptr;
  Dwfl_Module* dwmod_ = nullptr;
  std::unordered_map<uint64_t, Symbolized> cache_;
  Symbolized unmemoized_;  // a result while DWARF is still being copied
  size_t cache_bytes_ = 0;  // names and files memoized, roughly
  uint64_t memo_resets_ = 0;
};

// The cache key of a module: the file's device, inode, size, mtime and
// ctime (any rewrite changes one), and where its debug file is looked for
// (the same file in two roots may find two debug files).
std::string module_key(const ElfImage& elf, const DebugSearch& where);
// The same key from the fstat of the file as opened in the process (before
// ElfImage copies it): a cached module is found without copying the file.
std::string module_key(const struct stat& st, const DebugSearch& where);

class ModuleCache {
 public:
  // The module for `elf` (opened from `path` in a process), reusing the
  // cached one of the same file (module_key).
  std::shared_ptr<Module> get(std::unique_ptr<ElfImage> elf, const std::string& path,
                              const DebugSearch& where);
  // The cached module of this key (module_key), counted as a hit, or null;
  // and a module made on a miss, cached under that key.
  std::shared_ptr<Module> find(const std::string& key);
  std::shared_ptr<Module> insert(std::string key, std::unique_ptr<ElfImage> elf, const std::string& path,
                                 const DebugSearch& where, const ElfCopyLimits& limits = {});
  // Drops modules no process holds, least recently used first (those
  // charged to `uid` first), until `ledger` has `want` bytes of headroom
  // for pid (of uid) again, or none is left to drop: a module cached after
  // its processes exited must not hold a uid's budget.
  void make_room(const BudgetLedger& ledger, uint64_t want, pid_t pid, uid_t uid);
  size_t size() const { return modules_.size(); }
  void clear() { modules_.clear(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  // Modules dropped to stay under the cap (each is re-read if seen again).
  uint64_t evictions() const { return evictions_; }
  // Address memos started over, in modules cached now and dropped before.
  uint64_t memo_resets() const;

 private:
  struct Entry {
    std::shared_ptr<Module> module;
    uint64_t used = 0;  // use_clock_ at its last find or insert
  };
  void drop(std::unordered_map<std::string, Entry>::iterator it);
  std::unordered_map<std::string, Entry> modules_;
  uint64_t use_clock_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0, dropped_memo_resets_ = 0;
};

}  // namespace jankbpf::stack
