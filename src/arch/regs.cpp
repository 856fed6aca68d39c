#include "arch/regs.h"

#include <elf.h>

#include <bit>

#if defined(__x86_64__) || defined(__aarch64__)
#include <asm/perf_regs.h>
#endif

namespace jankbpf {
namespace {

// perf indices, spelled out so both tables build on either host; the
// static_asserts below pin them to the kernel header of the host arch.
namespace x86 {
constexpr int AX = 0, BX = 1, CX = 2, DX = 3, SI = 4, DI = 5, BP = 6, SP = 7, IP = 8,
              R8 = 16, R15 = 23, MAX = 24;  // 9..15: FLAGS CS SS DS ES FS GS
}
namespace a64 {
constexpr int X29 = 29, LR = 30, SP = 31, PC = 32, MAX = 33;  // 0..28: x0..x28
}

#if defined(__x86_64__)
static_assert(x86::AX == int{PERF_REG_X86_AX} && x86::BP == int{PERF_REG_X86_BP} &&
              x86::SP == int{PERF_REG_X86_SP} && x86::IP == int{PERF_REG_X86_IP} &&
              x86::R8 == int{PERF_REG_X86_R8} && x86::R15 == int{PERF_REG_X86_R15} &&
              x86::MAX == int{PERF_REG_X86_64_MAX});
#elif defined(__aarch64__)
static_assert(a64::X29 == int{PERF_REG_ARM64_X29} && a64::LR == int{PERF_REG_ARM64_LR} &&
              a64::SP == int{PERF_REG_ARM64_SP} && a64::PC == int{PERF_REG_ARM64_PC} &&
              a64::MAX == int{PERF_REG_ARM64_MAX});
#endif

constexpr uint64_t bit(int n) { return uint64_t{1} << n; }

constexpr RegTable make_x86() {
  RegTable t{};
  t.arch = Arch::X86_64;
  t.e_machine = EM_X86_64;
  t.perf_max = x86::MAX;
  for (auto& d : t.perf_to_dwarf) d = -1;
  // DWARF numbering of the x86_64 psABI (3.6.2): rax rdx rcx rbx rsi rdi
  // rbp rsp r8..r15, then 16 = return address column (rip).
  t.perf_to_dwarf[x86::AX] = 0;
  t.perf_to_dwarf[x86::DX] = 1;
  t.perf_to_dwarf[x86::CX] = 2;
  t.perf_to_dwarf[x86::BX] = 3;
  t.perf_to_dwarf[x86::SI] = 4;
  t.perf_to_dwarf[x86::DI] = 5;
  t.perf_to_dwarf[x86::BP] = 6;
  t.perf_to_dwarf[x86::SP] = 7;
  for (int r = 0; r < 8; ++r) t.perf_to_dwarf[x86::R8 + r] = static_cast<int8_t>(8 + r);
  t.perf_to_dwarf[x86::IP] = 16;
  t.sample_regs_user = 0;
  for (int i = 0; i < x86::MAX; ++i)
    if (t.perf_to_dwarf[i] >= 0) t.sample_regs_user |= bit(i);
  t.pc_perf = x86::IP;
  t.sp_perf = x86::SP;
  t.fp_perf = x86::BP;
  t.lr_perf = -1;
  t.pc_dwarf = 16;
  t.sp_dwarf = 7;
  t.fp_dwarf = 6;
  t.lr_dwarf = -1;
  t.dwarf_count = 17;
  t.has_pac = false;
  return t;
}

constexpr RegTable make_arm64() {
  RegTable t{};
  t.arch = Arch::Arm64;
  t.e_machine = EM_AARCH64;
  t.perf_max = a64::MAX;
  for (auto& d : t.perf_to_dwarf) d = -1;
  // DWARF for AArch64 (ARM IHI 0057): x0..x30 = 0..30, sp = 31. The PC
  // has no DWARF number; the unwinder takes it separately.
  for (int r = 0; r <= a64::SP; ++r) t.perf_to_dwarf[r] = static_cast<int8_t>(r);
  t.sample_regs_user = bit(a64::MAX) - 1;  // x0..x30, sp, pc
  t.pc_perf = a64::PC;
  t.sp_perf = a64::SP;
  t.fp_perf = a64::X29;
  t.lr_perf = a64::LR;
  t.pc_dwarf = -1;
  t.sp_dwarf = 31;
  t.fp_dwarf = 29;
  t.lr_dwarf = 30;
  t.dwarf_count = 32;
  t.has_pac = true;
  return t;
}

constexpr RegTable kX86Regs = make_x86();
constexpr RegTable kArm64Regs = make_arm64();

static_assert(kX86Regs.sample_regs_user == 0xff01ff);
static_assert(kArm64Regs.sample_regs_user == 0x1ffffffff);

}  // namespace

const RegTable& reg_table(Arch arch) { return arch == Arch::Arm64 ? kArm64Regs : kX86Regs; }

std::optional<UserRegs> decode_user_regs(Arch arch, uint64_t mask,
                                         std::span<const uint64_t> values) {
  if (static_cast<size_t>(std::popcount(mask)) != values.size()) return std::nullopt;
  const RegTable& t = reg_table(arch);
  UserRegs r;
  r.arch = arch;
  size_t i = 0;
  for (int b = 0; b < 64; ++b) {
    if (!(mask & bit(b))) continue;
    uint64_t v = values[i++];
    if (static_cast<unsigned>(b) >= t.perf_max) continue;
    if (b == t.pc_perf) r.pc = v, r.has_pc = true;
    if (b == t.sp_perf) r.sp = v, r.has_sp = true;
    if (b == t.fp_perf) r.fp = v, r.has_fp = true;
    if (b == t.lr_perf) r.lr = v, r.has_lr = true;
    int d = t.perf_to_dwarf[b];
    if (d >= 0 && static_cast<unsigned>(d) < t.dwarf_count) {
      r.dwarf[d] = v;
      r.dwarf_valid |= bit(d);
    }
  }
  if (!r.has_pc || !r.has_sp) return std::nullopt;
  return r;
}

}  // namespace jankbpf
