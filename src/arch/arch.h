// Everything that differs between the architectures jankbpf supports lives
// in one table per arch: which wait syscalls exist and their numbers, and
// (for the unwinder) how user registers are laid out. Code asks the table;
// nothing else switches on the architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace jankbpf {

enum class Arch { X86_64, Arm64 };

// An event-loop wait syscall: the tracepoint pair that bounds tasks.
struct WaitSyscall {
  std::string_view name;  // as in syscalls:sys_enter_<name>
  uint32_t nr;            // syscall number on this arch
};

struct ArchInfo {
  Arch arch;
  std::string_view name;  // "x86_64", "aarch64"
  std::span<const WaitSyscall> wait_syscalls;
  // Waits for a child (wait4, waitid): they bound tasks only while a
  // job-control shell has handed its terminal to the job it waits for.
  std::span<const WaitSyscall> child_waits;
};

// The table of the architecture jankbpf was built for.
const ArchInfo& host_arch();
// The table of a given architecture (unit tests, cross-arch fixtures).
const ArchInfo& arch_info(Arch arch);
// Name of a wait syscall (event-loop or child wait) by number on `arch`.
std::optional<std::string_view> wait_syscall_name(const ArchInfo& arch, uint32_t nr);

}  // namespace jankbpf
