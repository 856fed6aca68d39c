// The kernel text of interrupt and timer code, from /proc/kallsyms, for
// the BPF side's irq_text map (bpf/causes.bpf.h): a waker whose kernel
// stack passes through it is an interrupt, never blamed as a peer. As
// 256-byte chunks of text, each with a mask of its 16-byte granules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace jankbpf::cause {

// Whether a kernel function is hardirq entry, interrupt exit or timer code
// (x86_64 and arm64, 6.1 to 6.18). Softirq processing itself is not: a
// task's own local_bh_enable runs it (a loopback packet sent by a peer).
bool interrupt_function(std::string_view name);

// kallsyms fed a line at a time (a read of /proc/kallsyms need not be held
// whole: ~5 MB, most of an idle jankbpf's peak RSS otherwise). Keeps only
// the vmlinux text symbols' addresses (8 bytes each) and which of them are
// interrupt functions. Lines are parsed as untrusted; module symbols and
// lines not "ADDR TYPE NAME" are skipped.
class IrqTextScanner {
 public:
  void line(std::string_view line);
  // (pc >> 8, granule mask) of every chunk holding an interrupt function's
  // text (each runs to the next symbol), at most max_chunks (the rest are
  // left out: their frames read as a task's).
  std::vector<std::pair<uint64_t, uint32_t>> chunks(size_t max_chunks);

 private:
  std::vector<uint64_t> starts_;  // every vmlinux text symbol's address
  std::vector<uint64_t> irq_;     // those of interrupt functions
};

// The same from kallsyms text held whole.
std::vector<std::pair<uint64_t, uint32_t>> irq_text_chunks(std::string_view kallsyms, size_t max_chunks);

// The same from a file read a block at a time (/proc/kallsyms); false when
// it cannot be opened or read.
bool irq_text_chunks_of_file(const char* path, size_t max_chunks, std::vector<std::pair<uint64_t, uint32_t>>* out);

}  // namespace jankbpf::cause
