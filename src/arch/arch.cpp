#include "arch/arch.h"

namespace jankbpf {
namespace {

// x86_64: arch/x86/entry/syscalls/syscall_64.tbl
constexpr WaitSyscall kX86Waits[] = {
    {"epoll_wait", 232}, {"epoll_pwait", 281}, {"epoll_pwait2", 441}, {"poll", 7},
    {"ppoll", 271},      {"select", 23},       {"pselect6", 270},
};

// arm64 uses the generic table (include/uapi/asm-generic/unistd.h), which
// has no epoll_wait, poll or select.
constexpr WaitSyscall kArm64Waits[] = {
    {"epoll_pwait", 22}, {"epoll_pwait2", 441}, {"ppoll", 73}, {"pselect6", 72},
};

constexpr WaitSyscall kX86ChildWaits[] = {{"wait4", 61}, {"waitid", 247}};
constexpr WaitSyscall kArm64ChildWaits[] = {{"wait4", 260}, {"waitid", 95}};

constexpr ArchInfo kX86{Arch::X86_64, "x86_64", kX86Waits, kX86ChildWaits};
constexpr ArchInfo kArm64{Arch::Arm64, "aarch64", kArm64Waits, kArm64ChildWaits};

}  // namespace

const ArchInfo& arch_info(Arch arch) { return arch == Arch::Arm64 ? kArm64 : kX86; }

const ArchInfo& host_arch() {
#if defined(__aarch64__)
  return kArm64;
#elif defined(__x86_64__)
  return kX86;
#else
#error "jankbpf supports x86_64 and aarch64"
#endif
}

std::optional<std::string_view> wait_syscall_name(const ArchInfo& arch, uint32_t nr) {
  for (const auto& w : arch.wait_syscalls)
    if (w.nr == nr) return w.name;
  for (const auto& w : arch.child_waits)
    if (w.nr == nr) return w.name;
  return std::nullopt;
}

}  // namespace jankbpf
