// A process's memory for the runtime-frame decoders' tests: sparse
// regions at addresses, a read must fall inside one (never partial); a
// recorder of a live walk's reads, and the hex its fixtures store them in.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
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

// Records what a live walk reads, so that walk can be replayed offline.
class RecordingMemory final : public runtime::MemReader {
 public:
  explicit RecordingMemory(runtime::MemReader& live) : live_(live) {}
  bool read(uint64_t addr, void* out, size_t len) override {
    bool ok = live_.read(addr, out, len);
    if (ok) reads.push_back({addr, std::vector<uint8_t>(static_cast<uint8_t*>(out), static_cast<uint8_t*>(out) + len)});
    return ok;
  }
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> reads;

 private:
  runtime::MemReader& live_;
};

// Bytes as the fixtures store them: two lowercase hex digits each.
inline std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += d[p[i] >> 4], s += d[p[i] & 15];
  return s;
}

inline std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return out;
}

}  // namespace jankbpf::test
