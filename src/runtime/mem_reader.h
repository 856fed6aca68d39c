// Reading another process's memory, behind an interface so the decoders
// that parse it (runtime frames) can be fed fixtures and fuzz input.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace jankbpf::runtime {

class MemReader {
 public:
  virtual ~MemReader() = default;
  // Copies `len` bytes at `addr`; false when any of them cannot be read
  // (unmapped, the process gone). Never partial.
  virtual bool read(uint64_t addr, void* out, size_t len) = 0;

  template <typename T>
  bool read_value(uint64_t addr, T* out) { return read(addr, out, sizeof *out); }

  // Many reads at once (one system call for a live process); each says
  // whether it succeeded, as read() would have.
  struct Op {
    uint64_t addr;
    void* out;
    size_t len;
    bool ok = false;
  };
  virtual void read_batch(std::span<Op> ops) {
    for (auto& o : ops) o.ok = read(o.addr, o.out, o.len);
  }
};

// process_vm_readv on a live process: no ptrace stop, the target runs on.
class ProcessMemory final : public MemReader {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}
  bool read(uint64_t addr, void* out, size_t len) override;
  void read_batch(std::span<Op> ops) override;
  uint64_t reads() const { return reads_; }  // system calls made

 private:
  pid_t pid_;
  uint64_t reads_ = 0;
};

}  // namespace jankbpf::runtime
