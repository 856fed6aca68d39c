#include "runtime/mem_reader.h"

#include <limits.h>
#include <sys/uio.h>

#include <vector>

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

void ProcessMemory::read_batch(std::span<Op> ops) {
  // process_vm_readv stops at the first remote range it cannot read: the
  // ops before it are whole, that one is failed, and the rest go again.
  size_t i = 0;
  std::vector<iovec> local, remote;
  while (i < ops.size()) {
    size_t n = std::min<size_t>(ops.size() - i, IOV_MAX);
    local.clear();
    remote.clear();
    for (size_t k = i; k < i + n; ++k) {
      ops[k].ok = false;
      local.push_back({ops[k].out, ops[k].len});
      remote.push_back({reinterpret_cast<void*>(ops[k].addr), ops[k].len});
    }
    ++reads_;
    ssize_t got = process_vm_readv(pid_, local.data(), n, remote.data(), n, 0);
    size_t bytes = got > 0 ? static_cast<size_t>(got) : 0;
    size_t k = i;
    for (; k < i + n && bytes >= ops[k].len; ++k) {
      ops[k].ok = true;
      bytes -= ops[k].len;
    }
    i = k < i + n ? k + 1 : k;  // ops[k] (if any) is the one that failed
  }
}

}  // namespace jankbpf::runtime
