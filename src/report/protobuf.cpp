#include "report/protobuf.h"

#include <cstring>

namespace jankbpf::report {

void ProtoWriter::fixed64(uint32_t field, uint64_t v) {
  tag(field, 1);
  for (int i = 0; i < 8; i++) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));  // little-endian
}

void ProtoWriter::dbl(uint32_t field, double v) {
  uint64_t bits;
  static_assert(sizeof bits == sizeof v);
  std::memcpy(&bits, &v, sizeof bits);
  fixed64(field, bits);
}

void ProtoWriter::flt(uint32_t field, float v) {
  uint32_t bits;
  static_assert(sizeof bits == sizeof v);
  std::memcpy(&bits, &v, sizeof bits);
  tag(field, 5);
  for (int i = 0; i < 4; i++) buf_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

}  // namespace jankbpf::report
