// The waits jankbpf hooks, from the one table both sides share
// (include/jankbpf/hooks.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace jankbpf {

// The name of a jb_wait_id ("epoll_wait"), or "" for an id outside the table.
std::string_view wait_name(uint32_t wait_id);
// The id of a wait by name, or JB_WAIT_NR.
uint32_t wait_id(std::string_view name);
// This build's syscall number of a wait (the `nr` its tracepoints carry),
// or -1 when the arch has no such syscall.
long host_syscall_nr(std::string_view name);
// The numbers a 32-bit (ia32) process calls the wait by on x86_64, old and
// y2038 variants included (select: old_select and _newselect); empty
// elsewhere.
std::vector<long> compat_syscall_nrs(std::string_view name);

}  // namespace jankbpf
