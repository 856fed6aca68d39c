// One ELF file opened read-only through libelf, treated as hostile input:
// every header, section and string is bounds-checked by libelf or here, and
// a damaged file yields fewer facts (no symbols, no build-id), never a
// crash. It is parsed from a private copy (a sealed memfd), never from a
// mapping of the file itself: a file truncated by its owner while mapped
// would SIGBUS jankbpf; the copy cannot shrink, and fd() hands libdwfl the
// same copy. Holds what the unwinder and symbolizer need from the file itself:
// PT_LOADs (load bias), the build-id, .gnu_debuglink, and a sorted symbol
// table of .symtab + .dynsym for O(log n) address lookups.
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/fd.h"
#include "util/safe_open.h"

namespace jankbpf::stack {

struct ElfSymbol {
  uint64_t addr = 0;  // ELF virtual address (st_value)
  uint64_t size = 0;
  std::string_view name;  // points into the image; valid while it lives
};

class ElfImage {
 public:
  // Files larger than this are not parsed (copying them costs their size).
  static constexpr uint64_t kMaxFileBytes = 1ull << 30;
  // Opens the ELF at `fd` (taken over; closed once copied). nullptr if it
  // is not a regular file of at most max_bytes or not a 64-bit ELF libelf
  // accepts.
  static std::unique_ptr<ElfImage> open(Fd fd, uint64_t max_bytes = kMaxFileBytes);
  // Through util/safe_open's open_untrusted: "/proc/N/root/REST" paths stay
  // inside that root; symlinks are followed only as `policy` allows.
  static std::unique_ptr<ElfImage> open_path(const std::string& path);
  static std::unique_ptr<ElfImage> open_path(const std::string& path, const OpenPolicy& policy);
  ~ElfImage();
  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;

  // The private copy (a sealed memfd): safe to map, to dup for libdwfl.
  int fd() const { return fd_.get(); }
  Elf* elf() const { return elf_; }
  uint16_t machine() const { return machine_; }
  uint16_t type() const { return type_; }  // ET_EXEC, ET_DYN, ...
  const std::string& build_id() const { return build_id_; }  // hex, "" if none
  const std::string& debuglink() const { return debuglink_; }
  uint32_t debuglink_crc() const { return debuglink_crc_; }
  bool has_symtab() const { return has_symtab_; }
  bool has_debug_info() const { return has_debug_info_; }
  uint64_t file_size() const { return size_; }
  // Of the original file (the copy has its own).
  uint64_t dev() const { return dev_; }
  uint64_t inode() const { return ino_; }
  int64_t mtime_ns() const { return mtime_ns_; }
  int64_t ctime_ns() const { return ctime_ns_; }
  // Lowest PT_LOAD p_vaddr rounded down to its p_align (libdwfl's "vaddr").
  uint64_t first_load_vaddr() const { return first_vaddr_; }

  // The load bias (runtime address - ELF vaddr) of a mapping of this file
  // at `map_start` with file offset `pgoff`, from the PT_LOAD that covers
  // pgoff. nullopt if no PT_LOAD covers it.
  std::optional<uint64_t> load_bias(uint64_t map_start, uint64_t pgoff) const;

  // Copies `len` bytes at file offset `off`; false if outside the file.
  bool read(uint64_t off, void* out, size_t len) const;
  // CRC-32 of the whole file (what .gnu_debuglink records).
  uint32_t crc32() const;

  // Symbols of this file (loaded on first use).
  const std::vector<ElfSymbol>& symbols() const;
  // Adds this file's symbols to `out` (for merging a debug file's table).
  void collect_symbols(std::vector<ElfSymbol>& out) const;

 private:
  ElfImage() = default;
  bool init();

  Fd fd_;
  Elf* elf_ = nullptr;
  const char* raw_ = nullptr;
  uint64_t size_ = 0, dev_ = 0, ino_ = 0;
  int64_t mtime_ns_ = 0, ctime_ns_ = 0;
  uint16_t machine_ = 0, type_ = 0;
  std::string build_id_, debuglink_;
  uint32_t debuglink_crc_ = 0;
  bool has_symtab_ = false, has_debug_info_ = false;
  uint64_t first_vaddr_ = 0;
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

}  // namespace jankbpf::stack
