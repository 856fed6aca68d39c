#include "util/safe_open.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace jankbpf {
namespace {

// The first open of a path a watched process controls: O_PATH, which opens
// nothing (no driver's open, no FIFO, no tty), only names the inode; the
// file is opened for reading through that name once fstat says it is a
// regular file (reopen_checked).
constexpr int kPathFlags = O_PATH | O_CLOEXEC;
constexpr int kReadFlags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
std::atomic<bool> g_force_fallback{false};

const char* type_name(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symlink";
  return "not a regular file";
}

std::string why_open_failed(int err) {
  switch (err) {
    case ELOOP:
      return "a symlink or magic link (never followed in files a watched process controls)";
    case EXDEV:
      return "the path leads out of the process's root";
    default:
      return strerror(err);
  }
}

// fstat on the O_PATH descriptor -- the only view of the file that cannot
// change between the check and the read -- and only then, for a regular
// file within the policy, the open for reading, through /proc/self/fd: the
// very inode checked, never the path again. A device, FIFO or socket is
// refused without its open ever running (a driver's open can have effects).
void check_fd(Opened& o, const OpenPolicy& p, const std::string& shown) {
  if (!o.fd) return;
  if (::fstat(o.fd.get(), &o.st) != 0) {
    o.error = "'" + shown + "': fstat: " + strerror(errno);
  } else if (S_ISLNK(o.st.st_mode)) {
    o.error = "'" + shown + "': " + why_open_failed(ELOOP);
  } else if (!S_ISREG(o.st.st_mode)) {
    o.error = "'" + shown + "': " + type_name(o.st.st_mode) + ", not a regular file";
  } else if (static_cast<uint64_t>(o.st.st_size) > p.max_size) {
    o.error = "'" + shown + "': " + std::to_string(o.st.st_size) + " bytes, over the " +
              std::to_string(p.max_size) + " allowed for this file";
  } else if (o.st.st_size == 0 && !p.allow_unsized) {
    o.error = "'" + shown + "': empty";
  } else if (!p.owners.empty()) {
    bool ok = false;
    std::string allowed;
    for (uid_t u : p.owners) {
      ok |= o.st.st_uid == u;
      allowed += (allowed.empty() ? "" : ", ") + std::to_string(u);
    }
    if (!ok)
      o.error = "'" + shown + "': owned by uid " + std::to_string(o.st.st_uid) + "; allowed owners: " + allowed;
  }
  if (o.error.empty()) {
    char self[64];
    std::snprintf(self, sizeof self, "/proc/self/fd/%d", o.fd.get());
    Fd readable(::open(self, kReadFlags));
    struct stat st;
    if (!readable) {
      o.error = "'" + shown + "': reopening for reading: " + strerror(errno);
    } else if (::fstat(readable.get(), &st) != 0 || st.st_dev != o.st.st_dev || st.st_ino != o.st.st_ino) {
      o.error = "'" + shown + "': changed while opened";  // cannot happen: the same inode
    } else {
      o.st = st;
      o.fd = std::move(readable);
    }
  }
  if (!o.error.empty()) o.fd.reset();
}

// No openat2: one component at a time, each opened O_NOFOLLOW, so no
// symlink (magic or not) is ever followed and ".." is refused outright.
int walk_nofollow(int root_fd, std::string_view rel, int flags) {
  Fd cur(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!cur) return -1;
  size_t pos = 0;
  std::string comp;
  for (;;) {
    while (pos < rel.size() && rel[pos] == '/') ++pos;
    size_t end = rel.find('/', pos);
    if (end == std::string_view::npos) end = rel.size();
    comp.assign(rel.substr(pos, end - pos));
    pos = end;
    while (pos < rel.size() && rel[pos] == '/') ++pos;
    const bool last = pos >= rel.size();
    if (comp == "..") {
      errno = EXDEV;
      return -1;
    }
    if (comp.empty() || comp == ".") {
      if (last) {
        errno = EISDIR;
        return -1;
      }
      continue;
    }
    if (last) return ::openat(cur.get(), comp.c_str(), flags | O_NOFOLLOW);  // a link: its own O_PATH fd
    int next = ::openat(cur.get(), comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      // A symlink opened O_NOFOLLOW|O_DIRECTORY fails ENOTDIR: say why.
      struct stat st;
      if (errno == ENOTDIR && ::fstatat(cur.get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode))
        errno = ELOOP;
      return -1;
    }
    cur.reset(next);
  }
}

int open_beneath(int root_fd, std::string_view rel, const OpenPolicy& p) {
  std::string path(rel);
  while (!path.empty() && path.front() == '/') path.erase(0, 1);
  if (path.empty()) path = ".";
  if (!g_force_fallback.load(std::memory_order_relaxed)) {
    open_how how{};
    // With O_PATH|O_NOFOLLOW a final symlink comes back as itself (refused
    // by check_fd), never followed.
    how.flags = static_cast<uint64_t>(kPathFlags) | (p.follow_symlinks ? 0 : O_NOFOLLOW);
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (p.follow_symlinks ? 0 : RESOLVE_NO_SYMLINKS);
    for (int tries = 0; tries < 8; ++tries) {
      int fd = static_cast<int>(::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how));
      if (fd >= 0) return fd;
      if (errno == EAGAIN || errno == EINTR) continue;  // a rename raced the lookup
      if (errno != ENOSYS && errno != E2BIG && errno != EPERM) return -1;
      break;  // no openat2 here (EPERM: a seccomp filter that denies it)
    }
  }
  return walk_nofollow(root_fd, path, kPathFlags);
}

}  // namespace

Opened open_in_root(int root_fd, std::string_view rel, const OpenPolicy& policy, const std::string& shown_root) {
  Opened o;
  std::string shown = shown_root;
  if (!shown.empty() && shown.back() != '/' && (rel.empty() || rel.front() != '/')) shown += '/';
  shown += rel;
  o.fd.reset(open_beneath(root_fd, rel, policy));
  if (!o.fd) {
    o.error = "'" + shown + "': " + why_open_failed(errno);
    return o;
  }
  check_fd(o, policy, shown);
  return o;
}

Opened open_in_root(const std::string& root, std::string_view rel, const OpenPolicy& policy) {
  // The root itself may be /proc/PID/root: a magic link the kernel resolves
  // to the process's own root, which is what we want to be confined to.
  Fd root_fd(::open(root.empty() ? "/" : root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) {
    Opened o;
    o.error = "'" + root + "': " + strerror(errno);
    return o;
  }
  return open_in_root(root_fd.get(), rel, policy, root);
}

Opened open_untrusted(const std::string& path_in, const OpenPolicy& policy) {
  // /proc/self is the kernel's symlink, not a process's: spelled out, so
  // that no symlink needs following.
  std::string path = path_in;
  if (path.starts_with("/proc/self/")) path = "/proc/" + std::to_string(::getpid()) + path.substr(10);
  // "/proc/N/root/REST": REST inside process N's root.
  if (path.starts_with("/proc/")) {
    size_t digits_end = path.find('/', 6);
    if (digits_end != std::string::npos && digits_end > 6 &&
        path.find_first_not_of("0123456789", 6) == digits_end &&
        path.compare(digits_end, 6, "/root/") == 0)
      return open_in_root(path.substr(0, digits_end + 5), std::string_view(path).substr(digits_end + 6), policy);
  }
  return open_in_root("/", path, policy);
}

Opened open_magic(const std::string& path, const OpenPolicy& policy) {
  Opened o;
  o.fd.reset(::open(path.c_str(), kPathFlags));  // follows the magic link, opens nothing
  if (!o.fd) {
    o.error = "'" + path + "': " + strerror(errno);
    return o;
  }
  check_fd(o, policy, path);
  return o;
}

bool read_bounded(int fd, std::string& out, size_t limit) {
  out.clear();
  char buf[16384];
  while (out.size() < limit) {
    ssize_t n = ::read(fd, buf, std::min(sizeof buf, limit - out.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      return !out.empty();
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return true;
}

bool read_untrusted(const std::string& path, const OpenPolicy& policy, std::string& out, std::string* error) {
  out.clear();
  Opened o = open_untrusted(path, policy);
  if (!o) {
    if (error) *error = o.error;
    return false;
  }
  return read_bounded(o.fd.get(), out, policy.max_size);
}

std::vector<uid_t> process_file_owners(const std::string& proc_root, pid_t pid) {
  std::vector<uid_t> out;
  const std::string dir = proc_root + "/" + std::to_string(pid);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return out;
  out.push_back(0);
  if (st.st_uid != 0) out.push_back(st.st_uid);
  if (::stat((dir + "/root/").c_str(), &st) == 0 && st.st_uid != 0 && st.st_uid != out.back())
    out.push_back(st.st_uid);
  return out;
}

Fd open_parent_nofollow(const std::string& path, std::string* leaf, std::string* error) {
  Fd cur(::open(!path.empty() && path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  size_t slash = path.find_last_of('/');
  *leaf = slash == std::string::npos ? path : path.substr(slash + 1);
  if (leaf->empty() || *leaf == "." || *leaf == "..") {
    *error = "'" + path + "' names a directory, not a file";
    return Fd();
  }
  const std::string dirs = slash == std::string::npos ? "" : path.substr(0, slash);
  size_t pos = 0;
  while (cur && pos < dirs.size()) {
    size_t end = dirs.find('/', pos);
    if (end == std::string::npos) end = dirs.size();
    const std::string comp = dirs.substr(pos, end - pos);
    pos = end + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") {
      *error = "'" + path + "': \"..\" is not allowed in the path";
      return Fd();
    }
    int fd = ::openat(cur.get(), comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      int saved = errno;
      struct stat st;
      if (::fstatat(cur.get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        *error = "'" + path + "': \"" + comp + "\" is a symlink (jankbpf does not write through symlinks; give the real path)";
      else
        *error = "'" + path + "': \"" + comp + "\": " + strerror(saved);
      return Fd();
    }
    cur.reset(fd);
  }
  if (!cur) *error = "'" + path + "': " + strerror(errno);
  return cur;
}

int dup_cloexec(int fd) { return ::fcntl(fd, F_DUPFD_CLOEXEC, 0); }

void force_openat2_fallback_for_tests(bool on) { g_force_fallback = on; }

}  // namespace jankbpf
