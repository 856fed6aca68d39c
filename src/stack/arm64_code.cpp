#include "stack/arm64_code.h"

namespace jankbpf::stack {
namespace {

constexpr uint32_t kSp = 31, kLr = 30;

uint32_t rd(uint32_t i) { return i & 31; }          // Rd / Rt
uint32_t rn(uint32_t i) { return (i >> 5) & 31; }   // Rn (base register)
uint32_t rt2(uint32_t i) { return (i >> 10) & 31; }  // Rt2 of a pair

bool writes_lr_or_sp(uint32_t i) {
  // BL imm26; BLR Xn; BLRAA/BLRAB/BLRAAZ/BLRABZ.
  if ((i & 0xFC000000u) == 0x94000000u) return true;
  if ((i & 0xFFFFFC1Fu) == 0xD63F0000u) return true;
  if ((i & 0xFEFFF800u) == 0xD63F0800u) return true;
  // ADD/SUB (immediate) and (extended register) without flags, Rd = SP.
  bool s_clear = !(i & (1u << 29));
  if ((i & 0x1F800000u) == 0x11000000u && s_clear && rd(i) == kSp) return true;
  if ((i & 0x1FE00000u) == 0x0B200000u && s_clear && rd(i) == kSp) return true;
  // Load/store pair, post- or pre-indexed, base SP (writeback).
  uint32_t pair = i & 0x3B800000u;
  if ((pair == 0x28800000u || pair == 0x29800000u) && rn(i) == kSp) return true;
  // Load/store register (immediate), post- or pre-indexed, base SP.
  uint32_t single = i & 0x3B200C00u;
  if ((single == 0x38000400u || single == 0x38000C00u) && rn(i) == kSp) return true;
  // x30 in a destination (or transfer) field: loads, data processing, and
  // conservatively stores. Hints (PACIASP, AUTIASP, BTI) and RET have 31 or
  // 0 there.
  if (rd(i) == kLr) return true;
  if ((i & 0x3A000000u) == 0x28000000u && rt2(i) == kLr) return true;  // any pair
  return false;
}

}  // namespace

bool a64_frameless_leaf(std::span<const uint32_t> code) {
  if (code.empty()) return false;
  for (uint32_t i : code)
    if (writes_lr_or_sp(i)) return false;
  return true;
}

int a64_plt_stub_at(std::span<const uint32_t> code, size_t at) {
  auto is_stub = [&](size_t s) {
    return (code[s] & 0x9F00001Fu) == 0x90000010u &&      // adrp x16, page
           (code[s + 1] & 0xFFC003FFu) == 0xF9400211u &&  // ldr x17, [x16, #off]
           (code[s + 2] & 0xFFC003FFu) == 0x91000210u &&  // add x16, x16, #off
           code[s + 3] == 0xD61F0220u;                    // br x17
  };
  if (at >= code.size()) return -1;
  for (size_t back = 0; back < 4 && back <= at; ++back) {
    size_t s = at - back;
    if (s + 4 <= code.size() && is_stub(s)) return static_cast<int>(s);
  }
  return -1;
}

}  // namespace jankbpf::stack
