#include "report/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace jankbpf::report {
namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

Opened open_input_file(const std::string& path, uint64_t max_size) {
  Opened o;
  Fd where(::open(path.c_str(), O_PATH | O_CLOEXEC));
  struct stat st{};
  if (!where || ::fstat(where.get(), &st) != 0) {
    o.error = "'" + path + "': " + strerror(errno);
    return o;
  }
  if (!S_ISREG(st.st_mode)) {
    o.error = "'" + path + "': " + kind_of(st.st_mode) + ", not a regular file";
    return o;
  }
  if (static_cast<uint64_t>(st.st_size) > max_size) {
    o.error = "'" + path + "': " + std::to_string(st.st_size) + " bytes, over the " + std::to_string(max_size) +
              " allowed";
    return o;
  }
  OpenPolicy policy;
  policy.max_size = max_size;
  policy.allow_unsized = true;
  o = open_magic("/proc/self/fd/" + std::to_string(where.get()), policy);
  if (o && (o.st.st_dev != st.st_dev || o.st.st_ino != st.st_ino)) {
    o.fd.reset();
    o.error = "'" + path + "': changed while being opened";
  }
  if (!o && o.error.find("/proc/self/fd/") != std::string::npos) o.error = "'" + path + "': " + o.error;
  return o;
}

}  // namespace jankbpf::report
