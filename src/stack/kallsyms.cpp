#include "stack/kallsyms.h"

#include <elf.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "stack/elf_image.h"
#include "stack/maps.h"
#include "util/safe_open.h"

namespace jankbpf::stack {
namespace {

// A kernel function is never this big; past it the nearest symbol is a
// guess we would rather not print.
constexpr uint64_t kMaxKernelSymbolSpan = 1 << 20;
// /proc/kallsyms is read up to this size.
constexpr size_t kMaxFileBytes = 256 << 20;

}  // namespace

// One line at a time, so /proc/kallsyms (5 MB of text, 120,000 text
// symbols here) is never held whole: the names go to fixed-size blocks
// (no doubling copies), the table is reserved for a usual kernel's count.
struct Kallsyms::Builder {
  Kallsyms k;
  std::unordered_map<std::string, uint16_t> module_index;
  bool any_nonzero = false;

  Builder() { k.syms_.reserve(1 << 17); }

  void line(std::string_view line) {
    if (line.empty()) return;
    // ADDR TYPE NAME [\t[MODULE]]
    uint64_t addr = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), addr, 16);
    size_t pos = static_cast<size_t>(p - line.data());
    if (ec != std::errc() || pos == 0 || pos + 3 > line.size() || line[pos] != ' ' ||
        line[pos + 2] != ' ') {
      ++k.bad_lines_;
      return;
    }
    char type = line[pos + 1];
    std::string_view rest = line.substr(pos + 3);
    std::string_view name = rest, module;
    size_t tab = rest.find_first_of("\t ");
    if (tab != std::string_view::npos) {
      name = rest.substr(0, tab);
      std::string_view m = rest.substr(tab + 1);
      while (!m.empty() && (m.front() == ' ' || m.front() == '\t')) m.remove_prefix(1);
      if (m.size() >= 2 && m.front() == '[' && m.back() == ']') module = m.substr(1, m.size() - 2);
    }
    if (name.empty() || name.size() > 0xffff) {
      ++k.bad_lines_;
      return;
    }
    if (addr != 0) any_nonzero = true;
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') return;
    uint16_t mod = 0;
    if (!module.empty()) {
      auto [it, inserted] =
          module_index.try_emplace(std::string(module), static_cast<uint16_t>(k.modules_.size()));
      if (inserted) {
        if (k.modules_.size() >= 0xffff) return;
        k.modules_.emplace_back(module);
        k.module_base_.push_back(UINT64_MAX);
      }
      mod = it->second;
    }
    // A name never straddles two blocks.
    if (k.names_.empty() || k.block_used_ + name.size() > kNameBlock) {
      if (k.names_.size() >= (UINT32_MAX >> kNameBlockBits)) return;
      k.names_.emplace_back(new char[kNameBlock]);
      k.block_used_ = 0;
    }
    const uint32_t off = static_cast<uint32_t>(((k.names_.size() - 1) << kNameBlockBits) | k.block_used_);
    std::memcpy(k.names_.back().get() + k.block_used_, name.data(), name.size());
    k.block_used_ += name.size();
    k.syms_.push_back({addr, off, static_cast<uint16_t>(name.size()), mod});
  }

  Kallsyms finish() {
    k.hidden_ = !k.syms_.empty() && !any_nonzero;
    if (k.syms_.capacity() > k.syms_.size() + k.syms_.size() / 4) k.syms_.shrink_to_fit();
    std::stable_sort(k.syms_.begin(), k.syms_.end(),
                     [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
    for (const auto& s : k.syms_)
      if (s.module != 0) k.module_base_[s.module] = std::min(k.module_base_[s.module], s.addr);
    k.module_base_[0] = k.address_of("_text");
    return std::move(k);
  }
};

Kallsyms Kallsyms::parse(std::string_view text) {
  Builder b;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    b.line(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return b.finish();
}

Kallsyms Kallsyms::load(const std::string& path) {
  // /proc files say size 0; a regular file of another kind is still refused
  // over the limit, or when it is no regular file at all.
  OpenPolicy policy;
  policy.max_size = kMaxFileBytes;
  policy.allow_unsized = true;
  Opened o = open_untrusted(path, policy);
  if (!o) return {};
  Builder b;
  std::string buf(64 * 1024, '\0');
  size_t have = 0, total = 0;
  for (;;) {
    if (have == buf.size()) {
      // A line longer than the buffer is junk: skip to its end.
      ++b.k.bad_lines_;
      have = 0;
    }
    ssize_t n = ::read(o.fd.get(), buf.data() + have, buf.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    total += static_cast<size_t>(n);
    if (total > kMaxFileBytes) return {};
    have += static_cast<size_t>(n);
    std::string_view text(buf.data(), have);
    size_t done = 0;
    for (size_t nl; (nl = text.find('\n', done)) != std::string_view::npos; done = nl + 1)
      b.line(text.substr(done, nl - done));
    std::memmove(buf.data(), buf.data() + done, have - done);
    have -= done;
  }
  b.line(std::string_view(buf.data(), have));
  return b.finish();
}

uint64_t Kallsyms::address_of(std::string_view name) const {
  for (const auto& s : syms_)
    if (name_of(s) == name) return s.addr;
  return 0;
}

std::optional<Kallsyms::Hit> Kallsyms::lookup(uint64_t addr) const {
  if (hidden_ || addr == 0) return std::nullopt;
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr,
                             [](uint64_t a, const Sym& s) { return a < s.addr; });
  if (it == syms_.begin()) return std::nullopt;
  const Sym& s = *(it - 1);
  if (addr - s.addr > kMaxKernelSymbolSpan) return std::nullopt;
  Hit h;
  h.name = name_of(s);
  h.offset = addr - s.addr;
  h.module = modules_[s.module];
  uint64_t base = module_base_[s.module];
  h.module_offset = base != 0 && base != UINT64_MAX && addr >= base ? addr - base : addr;
  return h;
}

std::string build_id_from_notes(std::string_view notes) {
  size_t off = 0;
  auto align4 = [](size_t n) { return (n + 3) & ~size_t{3}; };
  while (off + sizeof(Elf64_Nhdr) <= notes.size()) {
    Elf64_Nhdr nh;
    std::memcpy(&nh, notes.data() + off, sizeof nh);
    off += sizeof nh;
    size_t name_len = align4(nh.n_namesz), desc_len = align4(nh.n_descsz);
    if (name_len > notes.size() - off) break;
    std::string_view name = notes.substr(off, nh.n_namesz);
    off += name_len;
    if (desc_len > notes.size() - off) break;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && name == std::string_view("GNU\0", 4) &&
        nh.n_descsz > 0 && nh.n_descsz <= 64)
      return hex_encode(reinterpret_cast<const uint8_t*>(notes.data() + off), nh.n_descsz);
    off += desc_len;
  }
  return "";
}

std::string kernel_build_id(const std::string& sys_root) {
  std::string notes;
  if (!read_small_file(sys_root + "/kernel/notes", notes, 1 << 16)) return "";
  return build_id_from_notes(notes);
}

std::string kernel_module_build_id(std::string_view module, const std::string& sys_root) {
  if (module.empty() || module.find('/') != std::string_view::npos || module.find("..") != std::string_view::npos)
    return "";
  std::string notes;
  if (!read_small_file(sys_root + "/module/" + std::string(module) + "/notes/.note.gnu.build-id",
                       notes, 1 << 16))
    return "";
  return build_id_from_notes(notes);
}

}  // namespace jankbpf::stack
