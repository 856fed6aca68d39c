// Everything that differs between the architectures jankbpf supports lives
// in one table per arch: which wait syscalls exist and their numbers, and
// (for the unwinder) how user registers are laid out. Code asks the table;
// nothing else switches on the architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jankbpf {

enum class Arch { X86_64, Arm64 };

// A wait syscall this arch has (its hooks come from include/jankbpf/hooks.h).
struct WaitSyscall {
  std::string_view name;  // as in syscalls:sys_enter_<name>
};

struct ArchInfo {
  Arch arch;
  std::string_view name;  // "x86_64", "aarch64"
  std::span<const WaitSyscall> wait_syscalls;
  // Waits for a child (wait4, waitid): they bound tasks only while a
  // job-control shell has handed its terminal to the job it waits for.
  std::span<const WaitSyscall> child_waits;
};

// Kernel functions that implement `syscall` on `arch`, for BPF trampolines:
// first the native entry point (__x64_sys_NAME, __arm64_sys_NAME), then the
// ones 32-bit processes reach on x86_64 (__ia32_sys_NAME,
// __ia32_compat_sys_NAME, time32/time64 variants). Candidates only: the
// kernel's BTF says which exist.
std::vector<std::string> syscall_functions(const ArchInfo& arch, std::string_view syscall);

// The table of the architecture jankbpf was built for.
const ArchInfo& host_arch();
// The table of a given architecture (unit tests, cross-arch fixtures).
const ArchInfo& arch_info(Arch arch);

}  // namespace jankbpf
