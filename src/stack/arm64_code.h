// A64 machine code facts the unwinder needs where there is no CFI.
#pragma once

#include <cstdint>
#include <span>

namespace jankbpf::stack {

// True when no instruction of `code` (a whole function) can change SP or
// x30: no BL/BLR (any PAC form), no add/sub writing SP, no load/store with
// writeback to SP, nothing with x30 as its destination field (loads and
// data processing; stores of x30 are refused too, conservatively). In such
// a function, at every instruction, the caller's state is the current one
// with PC = x30: CFA = SP, return address in LR, x29 and x19..x28 as they
// were. The arm64 vDSO's functions are all like that, and it has no CFI.
bool a64_frameless_leaf(std::span<const uint32_t> code);

}  // namespace jankbpf::stack
