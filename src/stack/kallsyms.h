// Kernel symbols from /proc/kallsyms: a sorted table of text symbols,
// binary-searched. Parsed as untrusted text (junk lines skipped).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace jankbpf::stack {

class Kallsyms {
 public:
  struct Hit {
    std::string_view name;
    uint64_t offset;          // addr - symbol start
    std::string_view module;  // "" for vmlinux, else the module name
    uint64_t module_offset;   // addr - _text (vmlinux) or - module's lowest symbol
  };

  static Kallsyms parse(std::string_view text);
  // Reads and parses `path`; an unreadable file gives an empty table.
  static Kallsyms load(const std::string& path);

  std::optional<Hit> lookup(uint64_t addr) const;
  size_t size() const { return syms_.size(); }
  size_t bad_lines() const { return bad_lines_; }
  // All addresses zero: kptr_restrict hides them (not root).
  bool hidden() const { return hidden_; }
  // Address of a symbol by exact name (tests, _text), or 0.
  uint64_t address_of(std::string_view name) const;

 private:
  struct Sym {
    uint64_t addr;
    uint32_t name_off;
    uint16_t name_len;
    uint16_t module;  // index into modules_ (0 = vmlinux)
  };
  struct Builder;
  // Names in blocks of 64 KB; a name_off is block << 16 | offset.
  static constexpr unsigned kNameBlockBits = 16;
  static constexpr size_t kNameBlock = size_t{1} << kNameBlockBits;
  std::string_view name_of(const Sym& s) const {
    return {names_[s.name_off >> kNameBlockBits].get() + (s.name_off & (kNameBlock - 1)), s.name_len};
  }
  std::vector<Sym> syms_;
  std::vector<std::unique_ptr<char[]>> names_;
  size_t block_used_ = 0;
  std::vector<std::string> modules_{""};
  std::vector<uint64_t> module_base_{0};
  size_t bad_lines_ = 0;
  bool hidden_ = false;
};

// GNU build-id (hex) of the running kernel from /sys/kernel/notes, and of a
// module from /sys/module/NAME/notes/.note.gnu.build-id; "" if unknown.
std::string kernel_build_id(const std::string& sys_root = "/sys");
std::string kernel_module_build_id(std::string_view module, const std::string& sys_root = "/sys");
// The build-id in a raw ELF note blob (what those files hold).
std::string build_id_from_notes(std::string_view notes);

}  // namespace jankbpf::stack
