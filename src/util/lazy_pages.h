// Anonymous memory filled from a file on first touch (userfaultfd), so that
// a copy of a large file costs only the pages read from it. jankbpf copies
// the DWARF of a binary rather than mapping it (a file truncated under a
// mapping kills its reader with SIGBUS); a -g binary's DWARF is tens of MB,
// of which a stack's few compile units touch a small part (issue 30).
//
// One userfaultfd and one thread serve every region of the process. A fault
// in a region asks its filler for the bytes at that offset; what the filler
// cannot give (the file shrank, it is gone) reads as zeros. Where the kernel
// or a seccomp policy refuses userfaultfd, available() is false and callers
// copy eagerly as before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace jankbpf::util {

class LazyPages {
 public:
  // Fills buf with up to n bytes at file offset off; returns how many it
  // read. Runs on the serving thread: it must not touch a lazy region.
  using Filler = std::function<size_t(uint64_t off, char* buf, size_t n)>;

  static LazyPages& get();
  // Whether regions can be added; why not, if not.
  bool available(std::string* why = nullptr);
  // [addr, addr + len), page-aligned, inside a private anonymous mapping:
  // its missing pages come from fill(file_off + (page - addr), ...).
  bool add(void* addr, size_t len, uint64_t file_off, Filler fill);
  // Before the mapping is unmapped: no fault is served from it afterwards.
  void remove(void* addr);
  // Pages filled so far (for tests and the summary's budgets).
  uint64_t pages_filled() const;
  // Filled pages are kept resident up to this many bytes over all regions;
  // past it they are all dropped, and filled again when read. How many
  // times that happened.
  static size_t resident_budget_bytes();
  uint64_t trims() const;

 private:
  LazyPages();
  struct State;
  State* s_;
};

}  // namespace jankbpf::util
