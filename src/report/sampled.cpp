#include "report/sampled.h"

#include "stack/tree.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <algorithm>

namespace jankbpf::report {
namespace {

std::string base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

bool is_hex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Splits "...(INNER)" at the '(' that matches the final ')': symbols such
// as "ns::f(int)" carry parentheses of their own.
bool strip_group(std::string_view& s, std::string_view* inner) {
  if (s.empty() || s.back() != ')') return false;
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') depth++;
    else if (s[i] == '(' && --depth == 0) {
      *inner = s.substr(i + 1, s.size() - i - 2);
      s = s.substr(0, i);
      return true;
    }
  }
  return false;
}

}  // namespace

std::string frame_name(const stack::Frame& f) {
  if (f.runtime == "java") return stack::StackTree::format_frame(f);  // "at pkg.Class.method(File.java:42)"
  if (!f.symbol.empty()) return f.kernel() ? f.symbol + "_[k]" : f.symbol;
  if (f.has_module()) return base_name(f.module) + "+" + hex(f.kernel() ? f.pc : f.module_offset);
  return f.jit() ? "[jit]" : "[unknown]";
}

const char* wait_state_label(char s) {
  switch (s) {
    case 'D': return "blocked_io";
    case 'R': return "runnable";
    default: return "sleeping";
  }
}

std::string off_cpu_frame(char wait_state) { return std::string("[off-CPU: ") + wait_state_label(wait_state) + "]"; }

SampledStack to_sampled(const stack::ResolvedStack& s, uint64_t time_ns) {
  SampledStack out;
  out.time_ns = time_ns;
  out.wait_state = s.wait_state;
  out.frames.reserve(s.frames.size());
  for (auto it = s.frames.rbegin(); it != s.frames.rend(); ++it)
    out.frames.push_back({frame_name(*it), it->is_runtime() ? "[" + it->runtime + "]" : base_name(it->module)});
  return out;
}

bool parse_log_frame(std::string_view t, SampledFrame* frame, char* wait_state) {
  *wait_state = 0;
  if (t.starts_with("wait ") && t.size() >= 6) {
    *wait_state = t[5];
    return true;
  }
  if (t.starts_with("at ") &&
      (t.starts_with("at [java: ") || t.starts_with("at [stub: ") ||
       (t.size() > 3 && t[3] != '(' && t.ends_with(")") && t.find('(') != std::string_view::npos &&
        t.substr(3, t.find('(') - 3).find(' ') == std::string_view::npos))) {
    frame->name = std::string(t);  // a Java frame, named as it is live: "at pkg.Class.method(File.java:42)"
    frame->module = "[java]";
    return true;
  }
  if (t.starts_with("at ")) {  // JIT frame: "at FUNC (FILE:LINE:COL)" or "at FUNC"
    t.remove_prefix(3);
    std::string_view inner;
    std::string_view name = t;
    if (name.ends_with(")") && strip_group(name, &inner) && name.ends_with(" ")) name.remove_suffix(1);
    else name = t;
    frame->name = std::string(name);
    frame->module = "[jit]";
    return true;
  }
  if (!t.starts_with("pc ")) return false;
  t.remove_prefix(3);
  auto sp = t.find(' ');
  if (sp == std::string_view::npos) return false;
  uint64_t pc = std::strtoull(std::string(t.substr(0, sp)).c_str(), nullptr, 16);
  std::string_view rest = t.substr(sp + 1);
  // A " [FILE:LINE]" suffix (source locations) is not part of the name.
  if (rest.ends_with("]")) {
    auto open = rest.rfind(" [");
    if (open != std::string_view::npos && rest.substr(open).find(':') != std::string_view::npos) rest = rest.substr(0, open);
  }
  if (rest == "[jit]" || rest == "[unknown]") {
    frame->name = std::string(rest);
    frame->module.clear();
    return true;
  }
  std::string_view g1, g2;
  std::string symbol;
  if (strip_group(rest, &g1)) {
    if (is_hex(g1) && g1.size() >= 16) {  // build-id
      if (strip_group(rest, &g2)) symbol = std::string(g2);
    } else {
      symbol = std::string(g1);
    }
  }
  // "SYMBOL+OFF": drop the decimal offset.
  if (auto plus = symbol.rfind('+'); plus != std::string::npos && plus + 1 < symbol.size() &&
                                     symbol.find_first_not_of("0123456789", plus + 1) == std::string::npos)
    symbol.resize(plus);
  const bool kernel = pc >= 0xffff000000000000ULL;
  frame->module = base_name(rest);
  if (!symbol.empty()) frame->name = kernel ? symbol + "_[k]" : symbol;
  else frame->name = frame->module + "+" + hex(pc);
  return true;
}

std::vector<SampledStack> parse_stack_log(std::string_view text, const StackLogLimits& limits, bool* truncated) {
  struct Open {
    SampledFrame frame;
    uint64_t count, in_children;
  };
  std::vector<SampledStack> out;
  std::vector<Open> path;  // the open nodes from the root
  size_t frame_refs = 0;
  bool cut = false;
  // A leaf's stack is its whole path: bounded in number and in frames, or
  // a deep chain of leaves would cost the square of its length.
  auto emit = [&](uint64_t count, char wait) {
    if (out.size() >= limits.max_stacks || frame_refs + path.size() > limits.max_frame_refs) {
      cut = true;
      return;
    }
    SampledStack s;
    s.count = static_cast<uint32_t>(std::min<uint64_t>(count, limits.max_count));
    s.wait_state = wait;
    s.frames.reserve(path.size());
    for (auto& o : path) s.frames.push_back(o.frame);
    frame_refs += path.size();
    out.push_back(std::move(s));
  };
  auto close_to = [&](size_t level) {
    while (path.size() > level) {
      const Open& n = path.back();
      if (n.count > n.in_children) emit(n.count - n.in_children, 0);
      path.pop_back();
    }
  };
  size_t pos = 0;
  while (pos < text.size() && !cut) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    size_t i = line.find_first_not_of(' ');
    if (i == std::string_view::npos || line[i] == '#') continue;
    line.remove_prefix(i);
    // "COUNT #LEVEL TEXT"
    char* end = nullptr;
    std::string head(line.substr(0, std::min<size_t>(line.size(), 24)));
    unsigned long long parsed = std::strtoull(head.c_str(), &end, 10);
    size_t used = static_cast<size_t>(end - head.c_str());
    if (!used || line.size() < used + 2 || line.substr(used, 2) != " #") continue;
    const uint64_t count = std::min<uint64_t>(parsed, limits.max_count);
    line.remove_prefix(used + 2);
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp > 20) continue;
    size_t level = std::strtoul(std::string(line.substr(0, sp)).c_str(), nullptr, 10);
    line.remove_prefix(sp + 1);
    // Deeper than the bound: the node's samples stay with its ancestor,
    // which then ends the stack.
    if (level > path.size() || level >= limits.max_depth) continue;
    SampledFrame f;
    char wait = 0;
    if (!parse_log_frame(line, &f, &wait)) continue;
    close_to(level);
    if (wait) {
      // Samples that ended in this wait state, under the open path.
      if (!path.empty()) path.back().in_children += count;
      emit(count, wait);
      continue;
    }
    if (!path.empty()) path.back().in_children += count;
    path.push_back({std::move(f), count, 0});
  }
  close_to(0);
  if (truncated) *truncated = cut;
  return out;
}

}  // namespace jankbpf::report
