#include "bpf/hooks.h"

#include <asm/unistd.h>

#include "jankbpf/hooks.h"

namespace jankbpf {

std::string_view wait_name(uint32_t wait_id) {
  static constexpr std::string_view kNames[] = {
#define JB_X(name) #name,
      JB_EVENT_WAITS(JB_X) JB_CHILD_WAITS(JB_X)
#undef JB_X
  };
  static_assert(std::size(kNames) == JB_WAIT_NR);
  return wait_id < JB_WAIT_NR ? kNames[wait_id] : std::string_view{};
}

uint32_t wait_id(std::string_view name) {
  for (uint32_t id = 0; id < JB_WAIT_NR; id++)
    if (wait_name(id) == name) return id;
  return JB_WAIT_NR;
}

long host_syscall_nr(std::string_view name) {
  // The kernel headers of the arch this binary is built for (arm64 has no
  // epoll_wait, poll or select).
  static constexpr struct {
    std::string_view name;
    long nr;
  } kNumbers[] = {
#ifdef __NR_epoll_wait
      {"epoll_wait", __NR_epoll_wait},
#endif
#ifdef __NR_epoll_pwait
      {"epoll_pwait", __NR_epoll_pwait},
#endif
#ifdef __NR_epoll_pwait2
      {"epoll_pwait2", __NR_epoll_pwait2},
#endif
#ifdef __NR_poll
      {"poll", __NR_poll},
#endif
#ifdef __NR_ppoll
      {"ppoll", __NR_ppoll},
#endif
#ifdef __NR_select
      {"select", __NR_select},
#endif
#ifdef __NR_pselect6
      {"pselect6", __NR_pselect6},
#endif
#ifdef __NR_wait4
      {"wait4", __NR_wait4},
#endif
      {"restart_syscall", __NR_restart_syscall},
#ifdef __NR_waitid
      {"waitid", __NR_waitid},
#endif
  };
  for (const auto& n : kNumbers)
    if (n.name == name) return n.nr;
  return -1;
}

std::vector<long> compat_syscall_nrs(std::string_view name) {
#if defined(__x86_64__)
  // arch/x86/entry/syscalls/syscall_32.tbl: an ABI, fixed for good. Written
  // out because asm/unistd_32.h's macros clash with the native ones.
  static constexpr struct {
    std::string_view name;
    long nr;
  } kI386[] = {
      {"select", 82},     {"select", 142},  // old_select, _newselect
      {"poll", 168},      {"epoll_wait", 256}, {"pselect6", 308}, {"pselect6", 413},
      {"ppoll", 309},     {"ppoll", 414},   {"epoll_pwait", 319}, {"epoll_pwait2", 441},
      {"wait4", 114},     {"waitid", 284},
  };
  std::vector<long> out;
  for (const auto& n : kI386)
    if (n.name == name) out.push_back(n.nr);
  return out;
#else
  (void)name;
  return {};
#endif
}

}  // namespace jankbpf
