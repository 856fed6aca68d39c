#include "cause/irq_text.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string>

namespace jankbpf::cause {

bool interrupt_function(std::string_view name) {
  static constexpr std::string_view kPrefixes[] = {
      "asm_sysvec_", "sysvec_", "__sysvec_", "asm_common_interrupt", "common_interrupt", "__common_interrupt",
      "el0_interrupt", "el1_interrupt", "el1h_64_irq", "el0t_64_irq", "el0t_32_irq"};
  static constexpr std::string_view kNames[] = {
      "irq_exit_rcu", "__irq_exit_rcu", "irq_exit", "hrtimer_interrupt", "__hrtimer_run_queues",
      "hrtimer_run_softirq", "hrtimer_wakeup", "run_timer_softirq", "__run_timers", "call_timer_fn",
      "process_timeout", "tick_sched_timer", "gic_handle_irq", "generic_handle_domain_irq",
      "handle_domain_irq", "__handle_irq_event_percpu", "handle_irq_event_percpu", "handle_irq_event",
      "handle_edge_irq", "handle_fasteoi_irq", "vring_interrupt", "blk_mq_complete_request",
      "blk_complete_reqs", "blk_done_softirq"};
  for (auto p : kPrefixes)
    if (name.starts_with(p)) return true;
  for (auto n : kNames)
    if (name == n) return true;
  return false;
}

std::vector<std::pair<uint64_t, uint32_t>> irq_text_chunks(std::string_view text, size_t max_chunks) {
  // vmlinux text symbols, in address order; each runs to the next one.
  std::vector<std::pair<uint64_t, bool>> syms;
  size_t pos = 0;
  while (pos < text.size() && syms.size() < (4u << 20)) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    // "ADDR TYPE NAME[\t[MODULE]]"
    size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos || sp1 + 3 > line.size() || line[sp1 + 2] != ' ') continue;
    const char type = line[sp1 + 1];
    if (type != 't' && type != 'T') continue;
    std::string_view name = line.substr(sp1 + 3);
    if (name.find('[') != std::string_view::npos) continue;  // a module's
    uint64_t addr = 0;
    auto r = std::from_chars(line.data(), line.data() + sp1, addr, 16);
    if (r.ec != std::errc() || r.ptr != line.data() + sp1 || !addr) continue;
    syms.emplace_back(addr, interrupt_function(name));
  }
  std::sort(syms.begin(), syms.end());
  std::map<uint64_t, uint32_t> chunks;
  for (size_t i = 0; i + 1 < syms.size(); i++) {
    if (!syms[i].second) continue;
    const uint64_t start = syms[i].first, end = syms[i + 1].first;
    if (end <= start || end - start > (1u << 20)) continue;  // junk: no function is a megabyte
    // Only granules the function fills: arm64 code is 4-byte aligned, and
    // a granule shared with the function before it (el0t_64_sync's return
    // from its handler, 4 bytes before el0t_64_irq) is not interrupt code.
    for (uint64_t g = (start + 15) >> 4; g < end >> 4; g++) {
      auto it = chunks.find(g >> 4);
      if (it == chunks.end()) {
        if (chunks.size() >= max_chunks) break;
        it = chunks.emplace(g >> 4, 0).first;
      }
      it->second |= 1u << (g & 15);
    }
  }
  return {chunks.begin(), chunks.end()};
}

}  // namespace jankbpf::cause
