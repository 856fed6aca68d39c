#include "util/tracefs.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/log.h"

namespace jankbpf::tracefs {
namespace {

constexpr long kTracefsMagic = 0x74726163;  // TRACEFS_MAGIC

bool is_tracefs(const char* path) {
  struct statfs fs{};
  return statfs(path, &fs) == 0 && fs.f_type == kTracefsMagic;
}

std::string find_or_mount(std::string* error) {
  if (is_tracefs("/sys/kernel/tracing")) return "/sys/kernel/tracing";
  if (is_tracefs("/sys/kernel/debug/tracing")) return "/sys/kernel/debug/tracing";
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0) {
    log::info("mounted tracefs on /sys/kernel/tracing");
    return "/sys/kernel/tracing";
  }
  if (error)
    *error = std::string("tracefs is not mounted and mounting it on /sys/kernel/tracing failed (") +
             strerror(errno) + "); mount it with: mount -t tracefs nodev /sys/kernel/tracing";
  return "";
}

}  // namespace

const std::string& root(std::string* error) {
  static std::string cached;
  if (cached.empty()) cached = find_or_mount(error);
  return cached;
}

bool has_event(const std::string& category, const std::string& name) {
  const std::string& r = root();
  if (r.empty()) return false;
  std::string path = r + "/events/" + category + "/" + name;
  struct stat st{};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace jankbpf::tracefs
