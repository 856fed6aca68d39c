// /proc/PID/maps text as a watched process can shape it (memfd and anon VMA
// names, paths with spaces, newlines and " (deleted)"): parse must never
// crash, and what it keeps must be what the unwinder relies on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "stack/maps.h"

using jankbpf::stack::ProcMaps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ProcMaps m = ProcMaps::parse(text);
  // find() binary-searches: entries must be sorted, non-empty, non-overlapping.
  uint64_t prev_end = 0, highest = 0;
  for (const auto& e : m.entries()) {
    if (e.end <= e.start || e.start < prev_end) abort();
    prev_end = e.end;
    if (e.path != "[vsyscall]" && e.end > highest) highest = e.end;
    if (m.find(e.start) != &e || m.find(e.end - 1) != &e) abort();
    (void)e.file_backed();
    (void)e.anon_exec();
  }
  if (m.highest_user_end() != highest) abort();
  // Each line is either kept or counted bad, never lost.
  size_t lines = 0;
  for (std::string_view t = text; !t.empty();) {
    size_t nl = t.find('\n');
    if (nl != 0) ++lines;
    t.remove_prefix(nl == std::string_view::npos ? t.size() : nl + 1);
  }
  if (m.entries().size() + m.bad_lines() != lines) abort();
  return 0;
}
