// A process's memory as a fuzz input: bytes mapped at `base`. Any read
// longer than `max_read` aborts: every read a decoder makes is bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "runtime/mem_reader.h"

namespace jankbpf::fuzz {

class InputMemory final : public runtime::MemReader {
 public:
  InputMemory(const uint8_t* d, size_t n, uint64_t base, size_t max_read)
      : data_(d), size_(n), base_(base), max_read_(max_read) {}
  bool read(uint64_t addr, void* out, size_t len) override {
    if (len > max_read_) abort();
    if (addr < base_ || addr - base_ > size_ || len > size_ - (addr - base_)) return false;
    if (len) std::memcpy(out, data_ + (addr - base_), len);
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  uint64_t base_;
  size_t max_read_;
};

}  // namespace jankbpf::fuzz
