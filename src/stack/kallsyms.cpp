#include "stack/kallsyms.h"

#include <elf.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "stack/elf_image.h"
#include "stack/maps.h"

namespace jankbpf::stack {
namespace {

// A kernel function is never this big; past it the nearest symbol is a
// guess we would rather not print.
constexpr uint64_t kMaxKernelSymbolSpan = 1 << 20;

}  // namespace

Kallsyms Kallsyms::parse(std::string_view text) {
  Kallsyms k;
  std::unordered_map<std::string, uint16_t> module_index;
  bool any_nonzero = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    // ADDR TYPE NAME [\t[MODULE]]
    uint64_t addr = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), addr, 16);
    size_t pos = static_cast<size_t>(p - line.data());
    if (ec != std::errc() || pos == 0 || pos + 3 > line.size() || line[pos] != ' ' ||
        line[pos + 2] != ' ') {
      ++k.bad_lines_;
      continue;
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
      continue;
    }
    if (addr != 0) any_nonzero = true;
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
    uint16_t mod = 0;
    if (!module.empty()) {
      auto [it, inserted] =
          module_index.try_emplace(std::string(module), static_cast<uint16_t>(k.modules_.size()));
      if (inserted) {
        if (k.modules_.size() >= 0xffff) continue;
        k.modules_.emplace_back(module);
        k.module_base_.push_back(UINT64_MAX);
      }
      mod = it->second;
    }
    if (k.names_.size() > UINT32_MAX - name.size()) break;
    k.syms_.push_back({addr, static_cast<uint32_t>(k.names_.size()),
                       static_cast<uint16_t>(name.size()), mod});
    k.names_.append(name);
  }
  k.hidden_ = !k.syms_.empty() && !any_nonzero;
  std::stable_sort(k.syms_.begin(), k.syms_.end(),
                   [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
  for (const auto& s : k.syms_)
    if (s.module != 0) k.module_base_[s.module] = std::min(k.module_base_[s.module], s.addr);
  k.module_base_[0] = k.address_of("_text");
  return k;
}

Kallsyms Kallsyms::load(const std::string& path) {
  std::string text;
  if (!read_small_file(path, text, 256 << 20)) return {};
  return parse(text);
}

uint64_t Kallsyms::address_of(std::string_view name) const {
  for (const auto& s : syms_)
    if (std::string_view(names_).substr(s.name_off, s.name_len) == name) return s.addr;
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
  h.name = std::string_view(names_).substr(s.name_off, s.name_len);
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
