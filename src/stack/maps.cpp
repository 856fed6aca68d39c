#include "stack/maps.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "util/fd.h"
#include "util/safe_open.h"

namespace jankbpf::stack {
namespace {

// Consumes a hex number from the front of `s`; false when there is none.
bool take_hex(std::string_view& s, uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  if (ec != std::errc() || p == s.data()) return false;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return true;
}

bool take_dec(std::string_view& s, uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 10);
  if (ec != std::errc() || p == s.data()) return false;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return true;
}

bool take_char(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

bool skip_spaces(std::string_view& s) {
  size_t n = 0;
  while (n < s.size() && (s[n] == ' ' || s[n] == '\t')) ++n;
  s.remove_prefix(n);
  return n > 0;
}

bool parse_line(std::string_view line, MapEntry& e) {
  // start-end perms offset major:minor inode [path]
  if (!take_hex(line, e.start) || !take_char(line, '-') || !take_hex(line, e.end)) return false;
  if (e.end <= e.start) return false;
  if (!skip_spaces(line) || line.size() < 4) return false;
  e.r = line[0] == 'r';
  e.w = line[1] == 'w';
  e.x = line[2] == 'x';
  e.shared = line[3] == 's';
  line.remove_prefix(4);
  if (!skip_spaces(line) || !take_hex(line, e.pgoff)) return false;
  if (!skip_spaces(line) || !take_hex(line, e.dev_major) || !take_char(line, ':') ||
      !take_hex(line, e.dev_minor))
    return false;
  if (!skip_spaces(line) || !take_dec(line, e.inode)) return false;
  skip_spaces(line);
  constexpr std::string_view kDeleted = " (deleted)";
  if (line.size() > kDeleted.size() && line.ends_with(kDeleted)) {
    e.deleted = true;
    line.remove_suffix(kDeleted.size());
  }
  e.path.assign(line);
  return true;
}

}  // namespace

bool MapEntry::file_backed() const {
  if (path.empty() || path[0] != '/') return false;  // anon, [stack], [vdso], [anon:...]
  if (inode == 0) return false;
  if (path.starts_with("/dev/") || path.starts_with("/memfd:") || path.starts_with("/SYSV"))
    return false;
  return true;
}

ProcMaps ProcMaps::parse(std::string_view text) {
  ProcMaps m;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    MapEntry e;
    if (!parse_line(line, e)) {
      ++m.bad_lines_;
      continue;
    }
    m.entries_.push_back(std::move(e));
  }
  std::stable_sort(m.entries_.begin(), m.entries_.end(),
                   [](const MapEntry& a, const MapEntry& b) { return a.start < b.start; });
  // Drop overlaps (the kernel never emits them; junk input might).
  std::vector<MapEntry> clean;
  clean.reserve(m.entries_.size());
  for (auto& e : m.entries_) {
    if (!clean.empty() && e.start < clean.back().end) {
      ++m.bad_lines_;
      continue;
    }
    clean.push_back(std::move(e));
  }
  m.entries_ = std::move(clean);
  for (const auto& e : m.entries_)
    if (e.path != "[vsyscall]") m.highest_end_ = std::max(m.highest_end_, e.end);
  return m;
}

const MapEntry* ProcMaps::find(uint64_t addr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const MapEntry& e) { return a < e.start; });
  if (it == entries_.begin()) return nullptr;
  --it;
  return it->contains(addr) ? &*it : nullptr;
}

bool read_small_file(const std::string& path, std::string& out, size_t limit) {
  // /proc and /sys files say size 0; a regular file of another kind is
  // still refused when it is over the limit, or is no regular file at all.
  OpenPolicy p;
  p.max_size = limit;
  p.allow_unsized = true;
  return read_untrusted(path, p, out);
}

}  // namespace jankbpf::stack
