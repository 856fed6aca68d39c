#include "cause/irq_text.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

void IrqTextScanner::line(std::string_view line) {
  if (starts_.size() >= (4u << 20)) return;  // no kernel has 4M text symbols
  // "ADDR TYPE NAME[\t[MODULE]]"
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 + 3 > line.size() || line[sp1 + 2] != ' ') return;
  const char type = line[sp1 + 1];
  if (type != 't' && type != 'T') return;
  std::string_view name = line.substr(sp1 + 3);
  if (name.find('[') != std::string_view::npos) return;  // a module's
  uint64_t addr = 0;
  auto r = std::from_chars(line.data(), line.data() + sp1, addr, 16);
  if (r.ec != std::errc() || r.ptr != line.data() + sp1 || !addr) return;
  starts_.push_back(addr);
  if (interrupt_function(name)) irq_.push_back(addr);
}

std::vector<std::pair<uint64_t, uint32_t>> IrqTextScanner::chunks(size_t max_chunks) {
  std::sort(starts_.begin(), starts_.end());
  std::sort(irq_.begin(), irq_.end());
  std::map<uint64_t, uint32_t> chunks;
  for (uint64_t start : irq_) {
    // Each symbol runs to the next one at a higher address.
    auto next = std::upper_bound(starts_.begin(), starts_.end(), start);
    if (next == starts_.end()) continue;
    const uint64_t end = *next;
    if (end - start > (1u << 20)) continue;  // junk: no function is a megabyte
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

std::vector<std::pair<uint64_t, uint32_t>> irq_text_chunks(std::string_view text, size_t max_chunks) {
  IrqTextScanner scan;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    scan.line(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return scan.chunks(max_chunks);
}

bool irq_text_chunks_of_file(const char* path, size_t max_chunks, std::vector<std::pair<uint64_t, uint32_t>>* out) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  IrqTextScanner scan;
  // A block at a time; a line longer than the block (no kallsyms line is
  // near it) is dropped whole.
  std::vector<char> buf(64 << 10);
  size_t held = 0;
  bool dropping = false, ok = true;
  for (;;) {
    const ssize_t n = read(fd, buf.data() + held, buf.size() - held);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      break;
    }
    if (n == 0) break;
    held += static_cast<size_t>(n);
    size_t pos = 0;
    for (size_t nl; (nl = std::string_view(buf.data() + pos, held - pos).find('\n')) != std::string_view::npos;) {
      if (!dropping) scan.line(std::string_view(buf.data() + pos, nl));
      dropping = false;
      pos += nl + 1;
    }
    held -= pos;
    memmove(buf.data(), buf.data() + pos, held);
    if (held == buf.size()) {  // no newline in a whole block
      held = 0;
      dropping = true;
    }
  }
  if (ok && held && !dropping) scan.line(std::string_view(buf.data(), held));
  close(fd);
  if (ok) *out = scan.chunks(max_chunks);
  return ok;
}

}  // namespace jankbpf::cause
