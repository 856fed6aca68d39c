// Names of kernel addresses the kernel causes carry: a contended lock's
// address (a static lock is a data symbol: `rtnl_mutex`, `cgroup_mutex`;
// kallsyms lists data only with CONFIG_KALLSYMS_ALL), the lock's class
// from the kernel's contention flags, and the owner's stack frames.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jankbpf::cause {

// The data symbols of /proc/kallsyms (types d, D, b, B, r, R), sorted.
// Parsed as untrusted text: junk lines skipped, at most kMaxSymbols kept.
class KernelObjects {
 public:
  static constexpr size_t kMaxSymbols = 1u << 21;
  static KernelObjects parse(std::string_view text);
  static KernelObjects load(const std::string& path = "/proc/kallsyms");
  // "sym" at its start, "sym+0x10" inside it (up to the next symbol, at
  // most 64 KB on); "" when no data symbol covers it.
  std::string name_of(uint64_t addr) const;
  size_t size() const { return syms_.size(); }

 private:
  struct Sym {
    uint64_t addr;
    std::string name;
  };
  std::vector<Sym> syms_;
};

// The lock's class and mode from the kernel's LCB_F_* flags
// (include/trace/events/lock.h): "rwsem"/"read", "mutex"/"", ...
std::string lock_class(uint32_t flags);
std::string lock_mode(uint32_t flags);

}  // namespace jankbpf::cause
