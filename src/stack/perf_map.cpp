#include "stack/perf_map.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "stack/maps.h"

namespace jankbpf::stack {
namespace {

bool take_hex(std::string_view& s, uint64_t& out) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  if (ec != std::errc() || p == s.data()) return false;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return true;
}

bool parse_u32(std::string_view s, uint32_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 10);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

JitSymbol parse_jit_name(std::string_view name) {
  JitSymbol j;
  std::string_view s = name;
  // "Kind:" prefix: letters only, before any space.
  size_t colon = s.find(':');
  size_t space = s.find(' ');
  if (colon != std::string_view::npos && colon > 0 && (space == std::string_view::npos || colon < space)) {
    std::string_view kind = s.substr(0, colon);
    if (std::all_of(kind.begin(), kind.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); })) {
      static constexpr std::string_view kV8Kinds[] = {
          "JS", "LazyCompile", "Function", "InterpretedFunction", "Script", "Eval", "Builtin",
          "BytecodeHandler", "Handler", "Stub", "RegExp", "Callback", "CodeHandler"};
      if (std::find(std::begin(kV8Kinds), std::end(kV8Kinds), kind) != std::end(kV8Kinds))
        s.remove_prefix(colon + 1);
    }
  }
  if (!s.empty() && (s[0] == '*' || s[0] == '~' || s[0] == '^' || s[0] == '+')) s.remove_prefix(1);
  // "func location" where location is "file:line[:col]"
  size_t sp = s.rfind(' ');
  if (sp != std::string_view::npos) {
    std::string_view func = s.substr(0, sp);
    std::string_view loc = s.substr(sp + 1);
    uint32_t line = 0, col = 0;
    bool ok = false;
    size_t c2 = loc.rfind(':');
    if (c2 != std::string_view::npos && c2 > 0) {
      size_t c1 = loc.rfind(':', c2 - 1);
      if (c1 != std::string_view::npos && c1 > 0 && parse_u32(loc.substr(c1 + 1, c2 - c1 - 1), line) &&
          parse_u32(loc.substr(c2 + 1), col)) {
        j.file.assign(loc.substr(0, c1));
        ok = true;
      } else if (parse_u32(loc.substr(c2 + 1), line)) {
        j.file.assign(loc.substr(0, c2));
        ok = true;
      }
    }
    if (ok && !j.file.empty() && j.file != "file://" ) {
      while (!func.empty() && func.back() == ' ') func.remove_suffix(1);
      j.function = func.empty() ? "(anonymous)" : std::string(func);
      j.line = line;
      j.column = col;
      return j;
    }
    j.file.clear();
  }
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  j.function = s.empty() ? std::string(name) : std::string(s);
  if (j.function.empty()) j.function = "(anonymous)";
  return j;
}

PerfMap PerfMap::parse(std::string_view text) {
  PerfMap m;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    Entry e;
    if (!take_hex(line, e.start) || line.empty() || line[0] != ' ') {
      ++m.bad_lines_;
      continue;
    }
    line.remove_prefix(1);
    if (!take_hex(line, e.size) || line.empty() || line[0] != ' ' || e.size == 0 ||
        e.start + e.size < e.start) {
      ++m.bad_lines_;
      continue;
    }
    line.remove_prefix(1);
    if (line.empty() || line.size() > 4096) {
      ++m.bad_lines_;
      continue;
    }
    e.name.assign(line);
    m.entries_.push_back(std::move(e));
  }
  // Stable: among equal starts the later line stays last, and wins below.
  std::stable_sort(m.entries_.begin(), m.entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.start < b.start; });
  return m;
}

const PerfMap::Entry* PerfMap::lookup(uint64_t addr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const Entry& e) { return a < e.start; });
  // Walk back over a few entries: the newest one covering addr wins among
  // equal starts (it is last), and a short earlier one may not cover it.
  for (int i = 0; i < 4 && it != entries_.begin(); ++i) {
    --it;
    if (addr - it->start < it->size) return &*it;
  }
  return nullptr;
}

pid_t namespace_pid(const std::string& proc_root, pid_t pid) {
  std::string status;
  if (!read_small_file(proc_root + "/" + std::to_string(pid) + "/status", status, 1 << 16)) return pid;
  size_t p = status.find("\nNSpid:");
  if (p == std::string::npos) return pid;
  std::string_view line(status);
  line.remove_prefix(p + 7);
  line = line.substr(0, line.find('\n'));
  pid_t last = pid;
  while (!line.empty()) {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty()) break;
    long v = 0;
    auto [q, ec] = std::from_chars(line.data(), line.data() + line.size(), v, 10);
    if (ec != std::errc() || q == line.data()) break;
    if (v > 0 && v < (1L << 30)) last = static_cast<pid_t>(v);
    line.remove_prefix(static_cast<size_t>(q - line.data()));
  }
  return last;
}

}  // namespace jankbpf::stack
