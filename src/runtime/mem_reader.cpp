#include "runtime/mem_reader.h"

#include <sys/uio.h>

namespace jankbpf::runtime {

bool ProcessMemory::read(uint64_t addr, void* out, size_t len) {
  if (len == 0) return true;
  if (addr + len < addr) return false;
  ++reads_;
  iovec local{out, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  return n == static_cast<ssize_t>(len);
}

}  // namespace jankbpf::runtime
