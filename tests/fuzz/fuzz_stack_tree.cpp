// The stack tree, its text, the heaviest path and the fingerprint from
// arbitrary frame lists (names are a watched process's bytes: symbols, JIT
// names, paths). Frames are drawn from small pools as often as not, so
// stacks share prefixes and the merging is exercised, not only leaves.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "stack/tree.h"

using namespace jankbpf::stack;

namespace {

std::string pick(FuzzedDataProvider& in, std::initializer_list<const char*> pool) {
  size_t i = in.ConsumeIntegralInRange<size_t>(0, pool.size());
  if (i == pool.size()) return in.ConsumeRandomLengthString(64);
  return *(pool.begin() + i);
}

Frame frame(FuzzedDataProvider& in) {
  Frame f;
  f.flags = in.ConsumeIntegralInRange<uint32_t>(0, 15);
  f.pc = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 8) * 0x10 : in.ConsumeIntegral<uint64_t>();
  f.module = pick(in, {"", "/usr/bin/app", "/lib/libc.so.6", "[kernel.kallsyms]", "[vdso]"});
  f.build_id = pick(in, {"", "0123abcd"});
  f.module_offset = in.ConsumeIntegralInRange<uint64_t>(0, 64);
  f.symbol = pick(in, {"", "main", "busy", "poll", "(anonymous)"});
  f.symbol_offset = in.ConsumeIntegral<uint64_t>();
  f.file = pick(in, {"", "/app/index.js", "main.c"});
  f.line = in.ConsumeIntegral<uint32_t>();
  f.column = in.ConsumeIntegral<uint32_t>();
  return f;
}

size_t count(const std::string& s, char c) {
  size_t n = 0;
  for (char x : s) n += x == c;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  TreeOptions opts;
  opts.merge = in.ConsumeBool() ? TreeOptions::Merge::Function : TreeOptions::Merge::Pc;
  opts.source_locations = in.ConsumeBool();
  StackTree tree(opts);
  ModuleTable modules;
  size_t nonempty = 0;
  while (in.remaining_bytes() > 0) {
    ResolvedStack s;
    size_t n = in.ConsumeIntegralInRange<size_t>(0, 48);
    for (size_t i = 0; i < n && in.remaining_bytes() > 0; ++i) s.frames.push_back(frame(in));
    if (in.ConsumeBool()) s.wait_state = in.ConsumeIntegral<char>();
    nonempty += !s.frames.empty() || s.wait_state;
    tree.add(s);
    for (const auto& nf : modules.frames(s))
      if (nf.module >= static_cast<int>(modules.modules().size()) || nf.offset.empty()) abort();
  }

  // One node, one line: a name must not break the log's line structure.
  const auto lines = tree.lines();
  const std::string text = tree.render();
  if (count(text, '\n') != lines.size()) abort();
  // Counts: the roots hold every sample with a frame; a child never more
  // than its parent; levels step down one at a time.
  uint64_t roots = 0;
  std::vector<uint32_t> parent;
  for (const auto& l : lines) {
    if (l.level < 0 || static_cast<size_t>(l.level) > parent.size()) abort();
    parent.resize(static_cast<size_t>(l.level));
    if (!parent.empty() && l.count > parent.back()) abort();
    if (l.level == 0) roots += l.count;
    parent.push_back(l.count);
  }
  if (roots != nonempty) abort();

  const auto path = tree.heaviest_path();  // leaf first
  for (size_t i = 1; i < path.size(); ++i)
    if (path[i].count < path[i - 1].count) abort();
  if (nonempty && path.empty()) abort();
  const std::string heaviest = tree.heaviest_stack();
  if (!path.empty() && count(heaviest, '\n') != path.size() - 1) abort();
  (void)tree.fingerprint();
  return 0;
}
