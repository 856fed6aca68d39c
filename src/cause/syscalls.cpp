#include "cause/syscalls.h"

#include <asm/unistd.h>

#include <iterator>

#include "jankbpf/events.h"

namespace jankbpf::cause {
namespace {

struct Entry {
  std::string_view name;
  long nr;
  uint8_t cls;
  bool fd;  // the first argument is a file descriptor
};

// The kernel headers of the arch this binary is built for (arm64 has no
// poll, select, epoll_wait, pause, ...).
#define JB_SC(name, cls, fd) {#name, __NR_##name, cls, fd},
constexpr Entry kTable[] = {
#ifdef __NR_futex
    JB_SC(futex, JB_SC_FUTEX, false)
#endif
#ifdef __NR_futex_waitv
    JB_SC(futex_waitv, JB_SC_FUTEX_WAITV, false)
#endif
#ifdef __NR_nanosleep
    JB_SC(nanosleep, JB_SC_SLEEP, false)
#endif
#ifdef __NR_clock_nanosleep
    JB_SC(clock_nanosleep, JB_SC_SLEEP, false)
#endif
#ifdef __NR_poll
    JB_SC(poll, JB_SC_TIMED, false)
#endif
#ifdef __NR_ppoll
    JB_SC(ppoll, JB_SC_TIMED, false)
#endif
#ifdef __NR_select
    JB_SC(select, JB_SC_TIMED, false)
#endif
#ifdef __NR_pselect6
    JB_SC(pselect6, JB_SC_TIMED, false)
#endif
#ifdef __NR_epoll_wait
    JB_SC(epoll_wait, JB_SC_TIMED, true)
#endif
#ifdef __NR_epoll_pwait
    JB_SC(epoll_pwait, JB_SC_TIMED, true)
#endif
#ifdef __NR_epoll_pwait2
    JB_SC(epoll_pwait2, JB_SC_TIMED, true)
#endif
#ifdef __NR_semtimedop
    JB_SC(semtimedop, JB_SC_TIMED, false)
#endif
#ifdef __NR_mq_timedreceive
    JB_SC(mq_timedreceive, JB_SC_TIMED, true)
#endif
#ifdef __NR_rt_sigtimedwait
    JB_SC(rt_sigtimedwait, JB_SC_TIMED, false)
#endif
#ifdef __NR_read
    JB_SC(read, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_readv
    JB_SC(readv, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_pread64
    JB_SC(pread64, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_preadv
    JB_SC(preadv, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_preadv2
    JB_SC(preadv2, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_write
    JB_SC(write, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_writev
    JB_SC(writev, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_pwrite64
    JB_SC(pwrite64, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_pwritev
    JB_SC(pwritev, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_recvfrom
    JB_SC(recvfrom, JB_SC_NONE, true)
#endif
#ifdef __NR_recvmsg
    JB_SC(recvmsg, JB_SC_NONE, true)
#endif
#ifdef __NR_recvmmsg
    JB_SC(recvmmsg, JB_SC_NONE, true)
#endif
#ifdef __NR_sendto
    JB_SC(sendto, JB_SC_NONE, true)
#endif
#ifdef __NR_sendmsg
    JB_SC(sendmsg, JB_SC_NONE, true)
#endif
#ifdef __NR_sendmmsg
    JB_SC(sendmmsg, JB_SC_NONE, true)
#endif
#ifdef __NR_accept
    JB_SC(accept, JB_SC_NONE, true)
#endif
#ifdef __NR_accept4
    JB_SC(accept4, JB_SC_NONE, true)
#endif
#ifdef __NR_connect
    JB_SC(connect, JB_SC_NONE, true)
#endif
#ifdef __NR_fsync
    JB_SC(fsync, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_fdatasync
    JB_SC(fdatasync, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_sync_file_range
    JB_SC(sync_file_range, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_sync
    JB_SC(sync, JB_SC_FILE_IO, false)
#endif
#ifdef __NR_syncfs
    JB_SC(syncfs, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_flock
    JB_SC(flock, JB_SC_NONE, true)
#endif
#ifdef __NR_fcntl
    JB_SC(fcntl, JB_SC_NONE, true)
#endif
#ifdef __NR_ioctl
    JB_SC(ioctl, JB_SC_NONE, true)
#endif
#ifdef __NR_open
    JB_SC(open, JB_SC_NONE, false)
#endif
#ifdef __NR_openat
    JB_SC(openat, JB_SC_NONE, false)
#endif
#ifdef __NR_close
    JB_SC(close, JB_SC_NONE, true)
#endif
#ifdef __NR_fallocate
    JB_SC(fallocate, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_ftruncate
    JB_SC(ftruncate, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_splice
    JB_SC(splice, JB_SC_NONE, true)
#endif
#ifdef __NR_sendfile
    JB_SC(sendfile, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_copy_file_range
    JB_SC(copy_file_range, JB_SC_FILE_IO, true)
#endif
#ifdef __NR_wait4
    JB_SC(wait4, JB_SC_NONE, false)
#endif
#ifdef __NR_waitid
    JB_SC(waitid, JB_SC_NONE, false)
#endif
#ifdef __NR_pause
    JB_SC(pause, JB_SC_NONE, false)
#endif
// The memory map's own calls: they wait on mmap_lock (kernel_lock).
#ifdef __NR_mmap
    JB_SC(mmap, JB_SC_NONE, false)
#endif
#ifdef __NR_munmap
    JB_SC(munmap, JB_SC_NONE, false)
#endif
#ifdef __NR_mprotect
    JB_SC(mprotect, JB_SC_NONE, false)
#endif
#ifdef __NR_mincore
    JB_SC(mincore, JB_SC_NONE, false)
#endif
#ifdef __NR_madvise
    JB_SC(madvise, JB_SC_NONE, false)
#endif
#ifdef __NR_mremap
    JB_SC(mremap, JB_SC_NONE, false)
#endif
#ifdef __NR_brk
    JB_SC(brk, JB_SC_NONE, false)
#endif
#ifdef __NR_mlock
    JB_SC(mlock, JB_SC_NONE, false)
#endif
#ifdef __NR_msync
    JB_SC(msync, JB_SC_FILE_IO, false)  // io: it writes the file back
#endif
#ifdef __NR_rt_sigsuspend
    JB_SC(rt_sigsuspend, JB_SC_NONE, false)
#endif
#ifdef __NR_msgrcv
    JB_SC(msgrcv, JB_SC_NONE, false)
#endif
#ifdef __NR_semop
    JB_SC(semop, JB_SC_NONE, false)
#endif
#ifdef __NR_sched_yield
    JB_SC(sched_yield, JB_SC_NONE, false)
#endif
#ifdef __NR_clone
    JB_SC(clone, JB_SC_NONE, false)
#endif
#ifdef __NR_clone3
    JB_SC(clone3, JB_SC_NONE, false)
#endif
#ifdef __NR_execve
    JB_SC(execve, JB_SC_NONE, false)
#endif
#ifdef __NR_getrandom
    JB_SC(getrandom, JB_SC_NONE, false)
#endif
#ifdef __NR_io_uring_enter
    JB_SC(io_uring_enter, JB_SC_TIMED, true)
#endif
#ifdef __NR_io_getevents
    JB_SC(io_getevents, JB_SC_TIMED, false)
#endif
#ifdef __NR_statx
    JB_SC(statx, JB_SC_NONE, false)
#endif
#ifdef __NR_newfstatat
    JB_SC(newfstatat, JB_SC_NONE, false)
#endif
#ifdef __NR_unlinkat
    JB_SC(unlinkat, JB_SC_NONE, false)
#endif
#ifdef __NR_renameat2
    JB_SC(renameat2, JB_SC_NONE, false)
#endif
#ifdef __NR_getdents64
    JB_SC(getdents64, JB_SC_FILE_IO, true)
#endif
};
#undef JB_SC

const Entry* find(long nr) {
  for (const auto& e : kTable)
    if (e.nr == nr) return &e;
  return nullptr;
}

}  // namespace

std::string_view syscall_name(long nr) {
  const Entry* e = find(nr);
  return e ? e->name : std::string_view{};
}

std::string syscall_text(long nr, bool compat) {
  if (nr < 0) return "";
  if (compat) return "syscall_" + std::to_string(nr) + " (32-bit)";
  std::string_view n = syscall_name(nr);
  return n.empty() ? "syscall_" + std::to_string(nr) : std::string(n);
}

std::vector<std::pair<long, uint8_t>> syscall_classes() {
  std::vector<std::pair<long, uint8_t>> out;
  for (const auto& e : kTable)
    if (e.cls != JB_SC_NONE) out.emplace_back(e.nr, e.cls);
  return out;
}

bool first_arg_is_fd(long nr) {
  const Entry* e = find(nr);
  return e && e->fd;
}

}  // namespace jankbpf::cause
