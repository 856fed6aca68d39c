// The protobuf wire format, as much of it as a writer needs: varints,
// fixed64, length-delimited fields and nested messages. Perfetto traces are
// written with it by hand, so the build needs no protoc and no SDK.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace jankbpf::report {

class ProtoWriter {
 public:
  void varint(uint32_t field, uint64_t v) {
    tag(field, 0);
    raw_varint(v);
  }
  void sint(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }  // int32/int64 fields
  void boolean(uint32_t field, bool v) { varint(field, v ? 1 : 0); }
  void fixed64(uint32_t field, uint64_t v);
  void dbl(uint32_t field, double v);
  void flt(uint32_t field, float v);  // a `float` field: fixed32
  void bytes(uint32_t field, std::string_view v) {
    tag(field, 2);
    raw_varint(v.size());
    buf_.append(v);
  }
  void string(uint32_t field, std::string_view v) { bytes(field, v); }
  void message(uint32_t field, const ProtoWriter& m) { bytes(field, m.buf_); }
  // A packed repeated varint field.
  template <typename It>
  void packed(uint32_t field, It begin, It end) {
    ProtoWriter p;
    for (; begin != end; ++begin) p.raw_varint(static_cast<uint64_t>(*begin));
    bytes(field, p.buf_);
  }

  const std::string& data() const { return buf_; }
  std::string take() { return std::move(buf_); }
  size_t size() const { return buf_.size(); }
  void clear() { buf_.clear(); }
  void raw_varint(uint64_t v) {
    while (v >= 0x80) {
      buf_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    buf_.push_back(static_cast<char>(v));
  }

 private:
  void tag(uint32_t field, uint32_t wire) { raw_varint((uint64_t{field} << 3) | wire); }
  std::string buf_;
};

}  // namespace jankbpf::report
