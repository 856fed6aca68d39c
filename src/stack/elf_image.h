// One ELF file opened read-only, treated as hostile input: every header,
// section and string is bounds-checked by libelf or here, and a damaged
// file yields fewer facts (no symbols, no build-id), never a crash.
//
// It is parsed from a private copy of the parts jankbpf reads -- the
// headers, the symbol tables, the CFI, the notes and debug link, the DWARF
// -- never of the whole file (issue 26: two sparse 1 GiB files once cost
// 2 GiB of copies) and never from a mapping of the file itself (a file
// truncated by its owner while mapped would SIGBUS jankbpf). The copy is
// anonymous memory at the file's own offsets: what is not copied costs no
// memory, and its section headers say SHT_NOBITS (its program headers
// PT_NULL for notes), so neither libelf nor libdw reads bytes that are not
// there. What is copied is bounded (ElfCopyLimits: bytes, charged to the
// process and uid in a BudgetLedger, and a time); a file over its
// budget loses the sections that do not fit (DWARF first, then .symtab),
// and says so (budget_cut()). No descriptor is held: bytes outside the
// copy (code, for arm64's leaf analysis and read-only memory) are read
// with pread through a small pool of descriptors, reopened by identity
// (ElfSource) when the pool closed them.
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stack/inflate_index.h"
#include "util/budget.h"
#include "util/fd.h"
#include "util/safe_open.h"

namespace jankbpf::stack {

struct ElfSymbol {
  uint64_t addr = 0;  // ELF virtual address (st_value)
  uint64_t size = 0;
  std::string_view name;  // points into the image; valid while it lives
};

// How to get a descriptor of the image's file again, once the pool closed
// the one it was opened with: the same file (device, inode, size, times) or
// nothing.
class ElfSource {
 public:
  virtual ~ElfSource() = default;
  virtual Fd reopen() const = 0;
};

struct ElfCopyLimits {
  // Bytes of this file copied at most (sections, rounded to pages).
  uint64_t max_copy = 256ull << 20;
  // Charged there (for pid, of uid) as well: the copy never passes the
  // ledger's headroom. Null: only max_copy bounds it.
  BudgetLedger* ledger = nullptr;
  pid_t pid = 0;
  uid_t uid = 0;
  // Copying a file's sections (headers, symbols, CFI) stops after this
  // long (those not copied by then are left out); DWARF, copied later, has
  // load_dwarf()'s own.
  std::chrono::milliseconds time = std::chrono::milliseconds::max();
  // DWARF read from the file page by page as libdw touches it
  // (util/lazy_pages.h), where userfaultfd works; else copied whole.
  bool lazy_dwarf = true;
};

// A source that reopens `path` (open_untrusted with `policy`) and takes it
// only if it is still the file `st` describes (device, inode, size, mtime).
std::unique_ptr<ElfSource> path_source(std::string path, OpenPolicy policy, const struct stat& st);

class ElfImage {
 public:
  // Files larger than this are not looked at.
  static constexpr uint64_t kMaxFileBytes = 4ull << 30;
  // Files at most this large are copied whole (no source needed later).
  static constexpr uint64_t kCopyWholeBelow = 256u << 10;
  // Opens the ELF at `fd` (taken over: kept in the descriptor pool, closed
  // when the pool needs room). nullptr if it is not a regular file of at
  // most kMaxFileBytes, not a 64-bit little-endian ELF libelf accepts, or
  // its headers alone do not fit the limits. `source` reopens it later.
  static std::unique_ptr<ElfImage> open(Fd fd, const ElfCopyLimits& limits = {},
                                        std::unique_ptr<ElfSource> source = nullptr);
  // Through util/safe_open's open_untrusted: "/proc/N/root/REST" paths stay
  // inside that root; symlinks are followed only as `policy` allows. The
  // path (with the file's identity) is the source.
  static std::unique_ptr<ElfImage> open_path(const std::string& path);
  static std::unique_ptr<ElfImage> open_path(const std::string& path, const OpenPolicy& policy,
                                             const ElfCopyLimits& limits = {});
  ~ElfImage();
  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;

  // The private copy as libelf sees it (read-only use).
  Elf* elf() const { return elf_; }
  // A new libelf handle on the same copy, for libdwfl (which ends it).
  Elf* new_handle() const;
  uint16_t machine() const { return machine_; }
  uint16_t type() const { return type_; }  // ET_EXEC, ET_DYN, ...
  const std::string& build_id() const { return build_id_; }  // hex, "" if none
  const std::string& debuglink() const { return debuglink_; }
  uint32_t debuglink_crc() const { return debuglink_crc_; }
  // A .symtab was copied (a stripped file, or one over its budget, has none).
  bool has_symtab() const { return has_symtab_; }
  // DWARF (.debug_info and the sections read with it) is in the copy.
  bool has_debug_info() const { return dwarf_ == Dwarf::Loaded; }
  // The file has DWARF that is (or may yet be) copied: load_dwarf().
  bool has_dwarf() const { return dwarf_ == Dwarf::Loaded || dwarf_ == Dwarf::Pending; }
  // DWARF is the bulk of a file and only names lines: it is copied when
  // first needed, charged then (for all of it). With lazy_dwarf its pages
  // are read on first touch; else it is copied a slice at a time (until
  // `until`, each call). True once it is all in the copy (and seen by
  // new_handle()'s handles); false while some remains, or when it is
  // refused (its budget).
  bool load_dwarf(std::chrono::steady_clock::time_point until);
  uint64_t file_size() const { return size_; }
  // Of the original file.
  uint64_t dev() const { return dev_; }
  uint64_t inode() const { return ino_; }
  int64_t mtime_ns() const { return mtime_ns_; }
  int64_t ctime_ns() const { return ctime_ns_; }
  // Lowest PT_LOAD p_vaddr rounded down to its p_align (libdwfl's "vaddr"),
  // and the end of the highest PT_LOAD (p_vaddr + p_memsz).
  uint64_t first_load_vaddr() const { return first_vaddr_; }
  uint64_t load_end_vaddr() const { return end_vaddr_; }
  bool has_loads() const { return !loads_.empty(); }

  // Bytes the private copy holds (pages), and whom it is charged to.
  uint64_t copied_bytes() const { return copied_; }
  // Compressed DWARF sections shown to libdw inflated page by page (after
  // load_dwarf; the rest libelf inflates whole).
  size_t sections_inflated_lazily() const {
    size_t n = 0;
    for (const auto& f : inflated_) n += f.index != nullptr;
    return n;
  }
  uid_t charged_uid() const { return limits_.uid; }
  // Budget bits (util/budget.h) that left sections out: kBudgetElfBytes,
  // kBudgetTime; 0 when everything wanted was copied.
  uint32_t budget_cut() const { return cut_; }

  // The load bias (runtime address - ELF vaddr) of a mapping of this file
  // at `map_start` with file offset `pgoff`, from the PT_LOAD that covers
  // pgoff. nullopt if no PT_LOAD covers it.
  std::optional<uint64_t> load_bias(uint64_t map_start, uint64_t pgoff) const;

  // Copies `len` bytes at file offset `off` (from the copy, else from the
  // file); false if outside the file or unreadable now.
  bool read(uint64_t off, void* out, size_t len) const;
  // CRC-32 of the whole file (what .gnu_debuglink records), read from the
  // file in chunks; nullopt if it could not be read whole.
  std::optional<uint32_t> crc32() const;

  // Symbols of this file (loaded on first use).
  const std::vector<ElfSymbol>& symbols() const;
  // Adds this file's symbols to `out` (for merging a debug file's table).
  void collect_symbols(std::vector<ElfSymbol>& out) const;

 private:
  ElfImage() = default;
  struct Plan;
  bool copy_in(int fd, Plan& plan, const ElfCopyLimits& limits);
  bool copy_range(int fd, uint64_t off, uint64_t len, std::chrono::steady_clock::time_point until, uint64_t* done);
  void recount();
  bool init_from_copy();
  bool copied(uint64_t off, size_t len) const;
  bool read_file(uint64_t off, void* out, size_t len) const;

  char* image_ = nullptr;  // anonymous mapping of image_size_ bytes
  char* lazy_ = nullptr;   // the start of its pages filled on first touch, if any
  bool load_dwarf_lazily(int fd);
  // A zlib-compressed DWARF section shown to libdw inflated, page by page
  // as it touches it (stack/inflate_index.h), rather than inflated whole
  // by libelf: its header then points at `slot`, past the file's bytes in
  // the copy, with the inflated size and no SHF_COMPRESSED.
  struct Inflated {
    size_t section = 0;
    uint64_t at = 0;  // its section header's offset in the copy (0: not deferred, not shown inflated)
    uint64_t slot = 0, size = 0, align = 1;
    uint64_t stream_off = 0, stream_len = 0;  // the zlib stream in the file
    std::unique_ptr<InflateIndex> index;      // built by load_dwarf_lazily
  };
  std::vector<Inflated> inflated_;
  char* lazy_inflated_ = nullptr;  // the slots' region, when registered
  void plan_inflated(int fd, const std::vector<size_t>& sections, const std::vector<Elf64_Shdr>& sh, uint64_t* end);
  void load_inflated(int fd);
  // The compressed stream of `f` as read from `fd`, for its index.
  static InflateIndex::Reader stream_reader(int fd, const Inflated& f);
  size_t image_size_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // copied [begin, end), sorted, merged
  BudgetLedger::Charge charge_;
  std::unique_ptr<ElfSource> source_;
  Elf* elf_ = nullptr;
  uint64_t size_ = 0, dev_ = 0, ino_ = 0, copied_ = 0;
  int64_t mtime_ns_ = 0, ctime_ns_ = 0;
  uint16_t machine_ = 0, type_ = 0;
  uint32_t cut_ = 0;
  std::string build_id_, debuglink_;
  uint32_t debuglink_crc_ = 0;
  bool has_symtab_ = false;
  enum class Dwarf : uint8_t { None, Pending, Loaded, Refused } dwarf_ = Dwarf::None;
  // The DWARF left for load_dwarf(): its ranges, its sections' original
  // headers (restored in the copy once loaded), what it will cost, how far
  // the copy got.
  struct Deferred {
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    std::vector<std::pair<uint64_t, Elf64_Shdr>> headers;  // offset in the copy, original header
    uint64_t cost = 0;
    size_t range = 0;
    uint64_t done = 0;
    bool charged = false;
  } deferred_;
  ElfCopyLimits limits_;
  uint64_t first_vaddr_ = 0, end_vaddr_ = 0;
  struct Load {
    uint64_t vaddr, offset, filesz, memsz;
  };
  std::vector<Load> loads_;
  mutable bool symbols_loaded_ = false;
  mutable std::vector<ElfSymbol> symbols_;
};

// Sorts and de-duplicates a symbol table for lookup_symbol().
void finish_symbol_table(std::vector<ElfSymbol>& syms);
// The symbol covering `addr` in a finished table, or nullptr. A zero-size
// symbol covers up to the next symbol.
const ElfSymbol* lookup_symbol(const std::vector<ElfSymbol>& syms, uint64_t addr);

std::string hex_encode(const uint8_t* p, size_t n);

// Descriptors of ELF files held open for reads outside their copies, at
// most this many at once (the least recently used is closed; its image
// reopens it through its ElfSource when it needs it again).
inline constexpr size_t kMaxElfSourceFds = 32;
size_t elf_source_fds_open();

}  // namespace jankbpf::stack
