// A process's memory for the runtime-frame decoders' tests: sparse
// regions at addresses, a read must fall inside one (never partial).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "runtime/mem_reader.h"

namespace jankbpf::test {

// Sparse memory: regions at addresses; a read must fall inside one.
class FakeMemory final : public runtime::MemReader {
 public:
  bool read(uint64_t addr, void* out, size_t len) override {
    ++reads;
    auto it = regions.upper_bound(addr);
    if (it == regions.begin()) return false;
    --it;
    const auto& [base, bytes] = *it;
    if (addr - base > bytes.size() || len > bytes.size() - (addr - base)) return false;
    std::memcpy(out, bytes.data() + (addr - base), len);
    return true;
  }
  std::vector<uint8_t>& region(uint64_t addr, size_t size) {
    auto& r = regions[addr];
    if (r.size() < size) r.resize(size);
    return r;
  }
  template <typename T>
  void put(uint64_t addr, T v) {
    auto it = regions.upper_bound(addr);
    REQUIRE(it != regions.begin());
    --it;
    REQUIRE(addr + sizeof v <= it->first + it->second.size());
    std::memcpy(it->second.data() + (addr - it->first), &v, sizeof v);
  }
  std::map<uint64_t, std::vector<uint8_t>> regions;
  uint64_t reads = 0;
};

}  // namespace jankbpf::test
