#include "app/stack_text.h"

#include <cstdio>
#include <string_view>

namespace jankbpf {

std::string kernel_symbol(const stack::Kallsyms& ks, uint64_t addr) {
  auto hit = ks.lookup(addr);
  char buf[64];
  if (!hit) {
    snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(addr));
    return buf;
  }
  std::string s(hit->name);
  snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(hit->offset));
  s += buf;
  if (!hit->module.empty()) s += " [" + std::string(hit->module) + "]";
  return s;
}

std::vector<std::string> kernel_stack(const stack::Kallsyms& ks, const uint64_t* pcs, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n && pcs[i]; i++) out.push_back(kernel_symbol(ks, pcs[i]));
  return out;
}

std::string user_frame_text(const stack::Frame& f) {
  char off[32];
  std::string module = f.module.substr(f.module.rfind('/') == std::string::npos ? 0 : f.module.rfind('/') + 1);
  std::string s;
  if (!f.symbol.empty()) {
    snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(f.symbol_offset));
    s = f.symbol + (f.inlined() ? "" : off);
  } else {
    snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(f.has_module() ? f.module_offset : f.pc));
    s = off;
  }
  if (!module.empty()) s += " (" + module + ")";
  return s;
}

size_t tracing_frames(const stack::Kallsyms& ks, const uint64_t* pcs, size_t n) {
  size_t skip = 0;
  for (size_t i = 0; i < n && i < 8; i++) {
    auto hit = ks.lookup(pcs[i]);
    if (!hit) continue;
    std::string_view name = hit->name;
    if (name.starts_with("bpf_") || name.starts_with("__traceiter_") || hit->module == "bpf" ||
        name.starts_with("__bpf_trace_"))
      skip = i + 1;
  }
  return skip;
}

bool interrupt_context(const stack::Kallsyms& ks, const uint64_t* pcs, size_t n) {
  // Interrupt and softirq entry and exit, x86_64 and arm64, 6.1 to 6.18
  // (the names of the generic ones moved: __do_softirq -> handle_softirqs).
  static constexpr std::string_view kPrefixes[] = {"asm_sysvec_", "sysvec_", "__sysvec_", "asm_common_interrupt",
                                                   "common_interrupt", "el0_interrupt", "el1_interrupt",
                                                   "el1h_64_irq", "el0t_64_irq", "el0t_32_irq"};
  static constexpr std::string_view kNames[] = {"__do_softirq", "handle_softirqs", "do_softirq", "irq_exit_rcu",
                                                "__irq_exit_rcu", "irq_exit", "hrtimer_interrupt",
                                                "gic_handle_irq", "call_on_irq_stack", "generic_handle_domain_irq"};
  for (size_t i = 0; i < n && pcs[i]; i++) {
    auto hit = ks.lookup(pcs[i]);
    if (!hit) continue;
    std::string_view name = hit->name;
    for (auto p : kPrefixes)
      if (name.starts_with(p)) return true;
    for (auto k : kNames)
      if (name == k) return true;
  }
  return false;
}

std::vector<StackFrame> structured_path(const stack::StackTree& tree, stack::ModuleTable& modules) {
  std::vector<StackFrame> out;
  for (const auto& line : tree.heaviest_path()) {
    if (!line.frame) continue;
    const auto& f = *line.frame;
    StackFrame sf;
    sf.module_index = modules.index(f);
    sf.offset = f.has_module() ? f.module_offset : f.pc;
    sf.symbol = f.symbol;
    sf.file = f.file;
    sf.line = f.line;
    sf.kernel = f.kernel();
    sf.jit = f.jit();
    sf.inlined = f.inlined();
    sf.runtime = f.runtime;
    out.push_back(std::move(sf));
  }
  return out;
}

}  // namespace jankbpf
