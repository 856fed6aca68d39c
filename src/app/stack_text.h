// Short text forms of stack frames for records: kernel frames as
// "symbol+0xoff [module]", user frames as "symbol+0xoff (module)".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/records.h"
#include "stack/kallsyms.h"
#include "stack/resolver.h"
#include "stack/tree.h"

namespace jankbpf {

std::string kernel_symbol(const stack::Kallsyms& ks, uint64_t addr);
// The first n pcs (to the first 0), each as kernel_symbol().
std::vector<std::string> kernel_stack(const stack::Kallsyms& ks, const uint64_t* pcs, size_t n);
// "symbol+0xoff (module)", "0xoff (module)" or "0xpc": short, for a list.
std::string user_frame_text(const stack::Frame& f);
// bpf_get_stack from a tracepoint starts inside the BPF program and the
// tracepoint machinery; how many leading pcs are those (the stack worth
// reading starts after them).
size_t tracing_frames(const stack::Kallsyms& ks, const uint64_t* pcs, size_t n);
// Whether a kernel stack was taken in interrupt context (a hard or soft
// IRQ: a timer's wakeup, a NIC's), by the entry frames on it. There the
// current task is whatever the interrupt came in on, unrelated to the
// wakeup: its user stack is no waker's.
bool interrupt_context(const stack::Kallsyms& ks, const uint64_t* pcs, size_t n);
// A tree's heaviest path as a record's `stack`, leaf first; its frames'
// modules are added to `modules`.
std::vector<StackFrame> structured_path(const stack::StackTree& tree, stack::ModuleTable& modules);

}  // namespace jankbpf
