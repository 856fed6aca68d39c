// User register layout per architecture, for the DWARF unwinder.
//
// A perf sample with PERF_SAMPLE_REGS_USER carries one u64 per bit set in
// attr.sample_regs_user, in ascending bit order; the bit numbers are the
// kernel's PERF_REG_<ARCH>_* indices (<asm/perf_regs.h>). The BPF off-CPU
// capture copies pt_regs into the same order, so both feed one decoder.
// This table says which mask to ask for and how each perf index maps to a
// DWARF register number (what CFI talks about), and which of them are the
// PC, SP, frame pointer and link register.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "arch/arch.h"

namespace jankbpf {

// PERF_SAMPLE_REGS_ABI_* (include/uapi/linux/perf_event.h).
enum class RegsAbi : uint64_t { None = 0, Abi32 = 1, Abi64 = 2 };

struct RegTable {
  Arch arch;
  uint16_t e_machine;  // EM_X86_64 / EM_AARCH64
  // The attr.sample_regs_user to request: every register CFI may refer to,
  // nothing else (no FLAGS/segments; DS, ES, FS, GS are refused by the
  // kernel anyway). With it a sample carries, in this order:
  //   x86_64 0xff01ff:     ax bx cx dx si di bp sp ip r8 r9 r10 r11 r12 r13 r14 r15
  //   aarch64 0x1ffffffff: x0 .. x28, x29 (fp), x30 (lr), sp, pc
  // (a BPF capture from pt_regs must write them in the same order).
  uint64_t sample_regs_user;
  // Highest perf index + 1 for this arch (PERF_REG_X86_64_MAX, ...).
  unsigned perf_max;
  // perf index -> DWARF register number, or -1 when CFI has no number for
  // it (x86 FLAGS/segments, arm64 PC).
  std::array<int8_t, 64> perf_to_dwarf;
  // perf indices of the special registers (-1: the arch has none).
  int pc_perf, sp_perf, fp_perf, lr_perf;
  // DWARF numbers of the same, and how many DWARF registers the unwinder's
  // initial state covers (x86_64: rax..r15 + the RA column 16; arm64:
  // x0..x30 + sp, the PC is passed separately as it has no DWARF number).
  int pc_dwarf, sp_dwarf, fp_dwarf, lr_dwarf;
  unsigned dwarf_count;
  // Return addresses may carry pointer-authentication bits (arm64).
  bool has_pac;
};

const RegTable& reg_table(Arch arch);

// One sample's user registers decoded into DWARF numbering.
struct UserRegs {
  Arch arch = Arch::X86_64;
  std::array<uint64_t, 64> dwarf{};  // by DWARF regno (< dwarf_count)
  uint64_t dwarf_valid = 0;          // bit n: dwarf[n] was in the sample
  uint64_t pc = 0, sp = 0, fp = 0, lr = 0;
  bool has_pc = false, has_sp = false, has_fp = false, has_lr = false;
};

// Decodes the PERF_SAMPLE_REGS_USER payload `values` taken with `mask`.
// Fails (nullopt) when the value count does not match the mask, or when
// PC or SP is missing: without both no unwinding can start. Extra bits the
// table does not know are skipped, so a wider mask is accepted.
std::optional<UserRegs> decode_user_regs(Arch arch, uint64_t mask,
                                         std::span<const uint64_t> values);

}  // namespace jankbpf
