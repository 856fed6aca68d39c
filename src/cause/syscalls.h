// The syscalls a cause names (a wait's, a sleep's), by this build's
// numbers: their names, and the classes the BPF side tells apart
// (enum jb_syscall_class, its cause_class_of_nr table).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jankbpf::cause {

// "read", "futex", ...; "" for a number this table does not know.
std::string_view syscall_name(long nr);
// The name, or "syscall_N" (32-bit: "syscall_N (32-bit)"), or "" for -1.
std::string syscall_text(long nr, bool compat = false);
// (number, enum jb_syscall_class) of every syscall with a class.
std::vector<std::pair<long, uint8_t>> syscall_classes();
// Whether the syscall's first argument is a file descriptor.
bool first_arg_is_fd(long nr);

}  // namespace jankbpf::cause
