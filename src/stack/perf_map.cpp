#include "stack/perf_map.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

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

namespace {
constexpr size_t kMaxNameBytes = 4096;  // a longer name is a bad line
constexpr size_t kBlockBytes = 64u << 10;
}  // namespace

PerfMap PerfMap::parse(std::string_view text, PerfMapLimits limits) {
  PerfMap m(limits);
  m.feed(text);
  m.feed("\n");  // a last line without its newline
  m.finish();
  return m;
}

std::string_view PerfMap::keep_name(std::string_view name) {
  if (blocks_.empty() || kBlockBytes - block_used_ < name.size()) {
    blocks_.push_back(std::make_unique<char[]>(kBlockBytes));
    block_used_ = 0;
    held_ += kBlockBytes;
  }
  char* at = blocks_.back().get() + block_used_;
  std::memcpy(at, name.data(), name.size());
  block_used_ += name.size();
  return {at, name.size()};
}

void PerfMap::take_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return;
  Entry e;
  if (!take_hex(line, e.start) || line.empty() || line[0] != ' ') {
    ++bad_lines_;
    return;
  }
  line.remove_prefix(1);
  if (!take_hex(line, e.size) || line.empty() || line[0] != ' ' || e.size == 0 || e.start + e.size < e.start) {
    ++bad_lines_;
    return;
  }
  line.remove_prefix(1);
  if (line.empty() || line.size() > kMaxNameBytes) {
    ++bad_lines_;
    return;
  }
  // Room first: the entry (as the vector will hold it) and its name.
  const uint64_t grows = entries_.size() == entries_.capacity() ? entries_.capacity() * sizeof(Entry) + sizeof(Entry) : 0;
  const uint64_t need = held_ + grows + (kBlockBytes - block_used_ < line.size() ? kBlockBytes : 0);
  if (entries_.size() >= limits_.max_entries || need > limits_.max_bytes || !charge_.resize(need)) {
    cut_ = true;
    return;
  }
  held_ += grows;
  e.name = keep_name(line);
  entries_.push_back(e);
}

bool PerfMap::feed(std::string_view chunk) {
  while (!chunk.empty() && !cut_) {
    size_t nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      // The rest of a line comes with the next chunk; one longer than any
      // valid line is skipped to its end, never kept whole.
      if (!skipping_ && partial_.size() + chunk.size() <= kMaxNameBytes + 64) partial_.append(chunk);
      else {
        skipping_ = true;
        partial_.clear();
      }
      return !cut_;
    }
    std::string_view line = chunk.substr(0, nl);
    chunk.remove_prefix(nl + 1);
    if (skipping_) {
      skipping_ = false;
      ++bad_lines_;
      continue;
    }
    if (!partial_.empty()) {
      if (partial_.size() + line.size() <= kMaxNameBytes + 64) {
        partial_.append(line);
        take_line(partial_);
      } else {
        ++bad_lines_;
      }
      partial_.clear();
    } else {
      take_line(line);
    }
  }
  return !cut_;
}

void PerfMap::finish() {
  // Stable: among equal starts the later line stays last, and wins below.
  auto by_start = [](const Entry& a, const Entry& b) { return a.start < b.start; };
  std::stable_sort(entries_.begin() + static_cast<ptrdiff_t>(sorted_), entries_.end(), by_start);
  std::inplace_merge(entries_.begin(), entries_.begin() + static_cast<ptrdiff_t>(sorted_), entries_.end(), by_start);
  sorted_ = entries_.size();
}

const PerfMap::Entry* PerfMap::lookup(uint64_t addr) const {
  auto end = entries_.begin() + static_cast<ptrdiff_t>(sorted_);
  auto it = std::upper_bound(entries_.begin(), end, addr, [](uint64_t a, const Entry& e) { return a < e.start; });
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
