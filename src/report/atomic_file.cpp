#include "report/atomic_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/fd.h"
#include "util/safe_open.h"

namespace jankbpf::report {
namespace {

// The directory, and the name in it; the name must be a regular file or absent.
// Every directory of the path is opened without following a symlink, as
// --output's are: root must not be steered into another directory by a
// link planted anywhere on the path.
bool open_parent(const std::string& path, Fd* dirfd, std::string* name, std::string* error) {
  *dirfd = open_parent_nofollow(path, name, error);
  if (!*dirfd) return false;
  struct stat st{};
  if (fstatat(dirfd->get(), name->c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) {
      *error = "'" + path + "' is a symlink; jankbpf does not write through symlinks";
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      *error = "'" + path + "' exists and is not a regular file";
      return false;
    }
  } else if (errno != ENOENT) {
    *error = "cannot look at '" + path + "': " + strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

bool check_writable(const std::string& path, std::string* error) {
  Fd dirfd;
  std::string name;
  return open_parent(path, &dirfd, &name, error);
}

bool write_atomic(const std::string& path, std::string_view data, std::string* error) {
  Fd dirfd;
  std::string name;
  if (!open_parent(path, &dirfd, &name, error)) return false;
  // Hidden and unpredictable, so nobody can plant it; O_EXCL would refuse anyway.
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = static_cast<uint64_t>(getpid()) ^ reinterpret_cast<uintptr_t>(&rnd);
  char suffix[24];
  snprintf(suffix, sizeof suffix, ".%016llx", static_cast<unsigned long long>(rnd));
  std::string tmp = "." + name.substr(0, 200) + suffix + ".tmp";
  Fd fd(openat(dirfd.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640));
  if (!fd) {
    *error = "cannot create a temporary file next to '" + path + "': " + strerror(errno);
    return false;
  }
  const char* p = data.data();
  size_t left = data.size();
  while (left) {
    ssize_t n = write(fd.get(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = "cannot write '" + path + "': " + strerror(n < 0 ? errno : EIO);
      unlinkat(dirfd.get(), tmp.c_str(), 0);
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (fsync(fd.get()) != 0 || renameat(dirfd.get(), tmp.c_str(), dirfd.get(), name.c_str()) != 0) {
    *error = "cannot replace '" + path + "': " + strerror(errno);
    unlinkat(dirfd.get(), tmp.c_str(), 0);
    return false;
  }
  // The rename itself survives a crash (the walk's descriptor is O_PATH:
  // fsync needs one opened for reading).
  if (Fd sync(openat(dirfd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)); sync) fsync(sync.get());
  return true;
}

}  // namespace jankbpf::report
