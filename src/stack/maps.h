// /proc/PID/maps, parsed as untrusted text: a process names its own
// mappings (memfd names, prctl(PR_SET_VMA_ANON_NAME)), so every field is
// bounds-checked and a malformed line is skipped, never fatal.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jankbpf::stack {

struct MapEntry {
  uint64_t start = 0, end = 0;  // [start, end)
  uint64_t pgoff = 0;           // file offset of start
  uint64_t dev_major = 0, dev_minor = 0, inode = 0;
  bool r = false, w = false, x = false, shared = false;
  std::string path;  // "" for anonymous; "[stack]", "[vdso]", ...
  bool deleted = false;  // path ended in " (deleted)" (stripped from path)

  bool contains(uint64_t addr) const { return addr >= start && addr < end; }
  // Backed by a file we can open (not anonymous, not [pseudo], not a device).
  bool file_backed() const;
  bool is_vdso() const { return path == "[vdso]"; }
  // Executable code with no file behind it: JIT output.
  bool anon_exec() const { return x && !file_backed() && !is_vdso() && path != "[vsyscall]"; }
};

class ProcMaps {
 public:
  ProcMaps() = default;
  // Parses maps text; lines that do not parse are counted and skipped.
  static ProcMaps parse(std::string_view text);

  const std::vector<MapEntry>& entries() const { return entries_; }
  size_t bad_lines() const { return bad_lines_; }
  bool empty() const { return entries_.empty(); }
  // The mapping holding `addr`, or nullptr.
  const MapEntry* find(uint64_t addr) const;
  // Highest mapped address + 1 (0 when empty); [vsyscall] is ignored.
  uint64_t highest_user_end() const { return highest_end_; }

 private:
  std::vector<MapEntry> entries_;  // sorted by start, non-overlapping
  size_t bad_lines_ = 0;
  uint64_t highest_end_ = 0;
};

// Reads a whole small file (a /proc file: size unknown, stat says 0) up to
// `limit` bytes, through util/safe_open (no FIFO, device or symlink; a
// "/proc/N/root/..." path stays inside that root). Returns false when it
// cannot be opened or is refused.
bool read_small_file(const std::string& path, std::string& out, size_t limit = 64 << 20);

}  // namespace jankbpf::stack
