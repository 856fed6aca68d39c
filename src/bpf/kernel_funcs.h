// The kernel's functions by name, from its BTF: which exist (a wait's
// kernel entry point, a kfunc) and their BTF ids (an fentry probe's
// target). The loader asks a few dozen names before the BPF object loads.
//
// One pass over /sys/kernel/btf/vmlinux that keeps only the FUNC entries:
// libbpf's full parse (btf__load_vmlinux_btf) took 7 ms of jankbpf's start,
// and libbpf parses it again for CO-RE anyway. Where that file is missing
// libbpf's search (vmlinux ELF files) stands in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jankbpf {

class KernelFuncs {
 public:
  // The running kernel's; empty (and `error()` says why) when it has no BTF.
  static KernelFuncs load();
  // From raw BTF bytes (tests, fuzzing): every offset is checked; on a
  // malformed blob the result is empty and `error()` names what is wrong.
  static KernelFuncs from_raw(std::vector<uint8_t> raw);

  KernelFuncs() = default;
  ~KernelFuncs();
  // The names point into raw_'s heap block or the mapping: moves keep them.
  KernelFuncs(KernelFuncs&& o) noexcept;
  KernelFuncs& operator=(KernelFuncs&& o) noexcept;
  KernelFuncs(const KernelFuncs&) = delete;
  KernelFuncs& operator=(const KernelFuncs&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // The BTF id of the FUNC named `name`, or 0.
  uint32_t id(std::string_view name) const;
  bool has(std::string_view name) const { return id(name) != 0; }
  size_t size() const { return funcs_.size(); }

 private:
  struct Func {
    std::string_view name;  // into raw_
    uint32_t id;
  };
  void index(const uint8_t* data, size_t size);
  void unmap();
  std::vector<uint8_t> raw_;
  void* map_ = nullptr;  // the kernel's BTF mapped (Linux 6.16+), else raw_
  size_t map_size_ = 0;
  std::vector<Func> funcs_;
  std::string error_;
};

}  // namespace jankbpf
