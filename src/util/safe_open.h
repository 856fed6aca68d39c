// Opening files a watched process controls (its perf map, anything under
// /proc/PID/root, its binaries and debug files) without letting it choose
// what jankbpf, running as root, opens or how long that takes:
//
//  * nothing opened before it is checked: the path is opened O_PATH (no
//    driver's open runs, a FIFO does not block, a tty never becomes ours),
//    fstat on that descriptor decides, and only a regular file within the
//    policy is then opened for reading, through /proc/self/fd (the same
//    inode, not the path again);
//  * no links out: paths below a process's root are resolved by openat2
//    with RESOLVE_IN_ROOT (an absolute symlink or ".." stays in the
//    container) and RESOLVE_NO_MAGICLINKS (no /proc/self/fd/N hops), and
//    by default RESOLVE_NO_SYMLINKS as well; without openat2 (ENOSYS) the
//    path is walked component by component with O_NOFOLLOW, refusing
//    "..", every symlink and every magic link;
//  * checked before open: fstat on the O_PATH descriptor must show a
//    regular file within the size bound of its use, owned by an allowed uid.
//
// /proc/PID/map_files/* and /proc/PID/exe are magic links the kernel
// resolves to the very file mapped or run: open_magic() follows them (that
// is their point) but applies the same descriptor checks.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/fd.h"

namespace jankbpf {

struct OpenPolicy {
  uint64_t max_size = 64u << 20;  // a larger file is refused, not cut
  // Symlinks inside the root are followed (still confined to it): for
  // debug-file trees, whose .build-id entries are symlinks on some distros.
  bool follow_symlinks = false;
  // The file's owner must be one of these; empty: any owner.
  std::vector<uid_t> owners;
  // procfs/sysfs files report size 0 and are read up to max_size instead.
  bool allow_unsized = false;
};

struct Opened {
  Fd fd;
  struct stat st {};
  std::string error;  // why not, naming the path: "" when fd is valid
  explicit operator bool() const { return fd.valid(); }
};

// Opens `rel` (relative or absolute: both are taken inside the root) below
// the directory `root`, as a process whose root that is would see it.
Opened open_in_root(const std::string& root, std::string_view rel, const OpenPolicy& policy);
Opened open_in_root(int root_fd, std::string_view rel, const OpenPolicy& policy,
                    const std::string& shown_root = "");

// An absolute path: a "/proc/N/root/REST" path is resolved as REST inside
// that process's root; any other path inside "/" (symlinks refused unless
// the policy follows them).
Opened open_untrusted(const std::string& path, const OpenPolicy& policy);

// A kernel magic link (/proc/PID/map_files/A-B, /proc/PID/exe): followed,
// then held to the same descriptor checks.
Opened open_magic(const std::string& path, const OpenPolicy& policy);

// Reads what `fd` holds (at most `limit` bytes; EINTR retried, EAGAIN ends
// the read) into `out`.
bool read_bounded(int fd, std::string& out, size_t limit);

// open_untrusted + read_bounded(policy.max_size).
bool read_untrusted(const std::string& path, const OpenPolicy& policy, std::string& out,
                    std::string* error = nullptr);

// The uids whose files a process may legitimately hand us: root, the
// process's own (the owner of /proc/PID) and its root directory's owner (a
// user-namespace container's root). Empty when the process is gone.
std::vector<uid_t> process_file_owners(const std::string& proc_root, pid_t pid);

// The same descriptor, close-on-exec (nothing of a watched process's may
// reach a child such as trace-cmd). -1 on failure.
int dup_cloexec(int fd);

// For files jankbpf writes where the user said (--output): the directory
// holding `path`, walked from "/" (or the working directory) with
// O_NOFOLLOW at every component, so no symlink anywhere on the path is
// followed. Sets *leaf to the last component; on failure *error names the
// component and why.
Fd open_parent_nofollow(const std::string& path, std::string* leaf, std::string* error);

// Tests: behave as on a kernel without openat2.
void force_openat2_fallback_for_tests(bool on);

}  // namespace jankbpf
