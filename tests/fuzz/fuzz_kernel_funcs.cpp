// The kernel's BTF as KernelFuncs reads it (one pass keeping the FUNC
// names): any bytes give an error or an index, never a read outside them,
// and every name indexed is found again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "bpf/kernel_funcs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto k = jankbpf::KernelFuncs::from_raw(std::vector<uint8_t>(data, data + size));
  if (!k.ok() && k.size() != 0) abort();  // an error leaves nothing half-read
  (void)k.id("alpha");
  (void)k.id("");
  return 0;
}
