#include "arch/arch.h"

namespace jankbpf {
namespace {

// x86_64 (arch/x86/entry/syscalls/syscall_64.tbl)
constexpr WaitSyscall kX86Waits[] = {
    {"epoll_wait"}, {"epoll_pwait"}, {"epoll_pwait2"}, {"poll"},
    {"ppoll"},      {"select"},       {"pselect6"},
};

// arm64 uses the generic table (include/uapi/asm-generic/unistd.h), which
// has no epoll_wait, poll or select.
constexpr WaitSyscall kArm64Waits[] = {
    {"epoll_pwait"}, {"epoll_pwait2"}, {"ppoll"}, {"pselect6"},
};

constexpr WaitSyscall kX86ChildWaits[] = {{"wait4"}, {"waitid"}};
constexpr WaitSyscall kArm64ChildWaits[] = {{"wait4"}, {"waitid"}};

constexpr ArchInfo kX86{Arch::X86_64, "x86_64", kX86Waits, kX86ChildWaits};
constexpr ArchInfo kArm64{Arch::Arm64, "aarch64", kArm64Waits, kArm64ChildWaits};

}  // namespace

std::vector<std::string> syscall_functions(const ArchInfo& arch, std::string_view syscall) {
  std::string name(syscall);
  if (arch.arch == Arch::Arm64) return {"__arm64_sys_" + name};
  std::vector<std::string> out{"__x64_sys_" + name};
  // i386 entry points: the generic one where the syscall needs no compat
  // conversion, the compat one where it does, and the y2038 pairs.
  for (const char* suffix : {"", "_time32", "_time64"}) {
    out.push_back("__ia32_compat_sys_" + name + suffix);
    out.push_back("__ia32_sys_" + name + suffix);
  }
  if (syscall == "select") out.push_back("__ia32_compat_sys_old_select");
  return out;
}

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

}  // namespace jankbpf
