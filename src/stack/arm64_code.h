// A64 machine code facts the unwinder needs where there is no CFI.
#pragma once

#include <cstddef>
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

// The index in `code` of the PLT stub (adrp x16; ldr x17, [x16, #o];
// add x16, x16, #o; br x17) whose instructions include code[at], or -1.
// A PLT stub has no symbol and no CFI and touches neither SP nor x30: a
// sample inside one (a call on its way to a shared library) is a frameless
// leaf whose caller is at LR.
int a64_plt_stub_at(std::span<const uint32_t> code, size_t at);

}  // namespace jankbpf::stack
