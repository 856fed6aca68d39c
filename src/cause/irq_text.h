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

// (pc >> 8, granule mask) of every chunk holding such a function's text,
// at most max_chunks (the rest are left out: their frames read as a
// task's). kallsyms text is parsed as untrusted; module symbols are skipped.
std::vector<std::pair<uint64_t, uint32_t>> irq_text_chunks(std::string_view kallsyms, size_t max_chunks);

}  // namespace jankbpf::cause
