#include "cause/io_identity.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <sstream>

#include "cause/identity.h"
#include "stack/maps.h"
#include "util/safe_open.h"

namespace jankbpf::cause {

std::string MappedFile::name() const {
  if (!path.empty()) return path;
  return std::to_string(dev_major) + ":" + std::to_string(dev_minor) + ":" + std::to_string(inode);
}

MappedFile file_at(const stack::ProcMaps& maps, uint64_t addr) {
  MappedFile out;
  const auto* m = maps.find(addr);
  // A file mapping has an inode; its path is whatever the process's file
  // was called (a memfd's own name too): named, escaped, never opened here.
  if (!m || !m->inode || addr < m->start) return out;
  out.found = true;
  out.dev_major = static_cast<uint32_t>(m->dev_major);
  out.dev_minor = static_cast<uint32_t>(m->dev_minor);
  out.inode = m->inode;
  const uint64_t delta = addr - m->start;
  out.offset = m->pgoff + delta < m->pgoff ? 0 : m->pgoff + delta;  // wrapped: junk pgoff
  if (!m->path.empty() && m->path[0] == '/' && !m->deleted) out.path = safe_name(m->path, 512);
  return out;
}

std::string uevent_devname(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  size_t lines = 0;
  while (++lines < 256 && std::getline(in, line)) {
    if (line.compare(0, 8, "DEVNAME=") != 0) continue;
    std::string name = line.substr(8);
    if (name.empty() || name.size() > 64 || name.find("..") != std::string::npos || name[0] == '/') return "";
    for (char c : name)
      if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/')) return "";
    return name;
  }
  return "";
}

std::string block_device_name(uint32_t major, uint32_t minor) {
  if (major > 4095 || minor > 0xfffff) return "";
  std::string text;
  const std::string path = "/sys/dev/block/" + std::to_string(major) + ":" + std::to_string(minor) + "/uevent";
  // /sys/dev/block/M:m is the kernel's link to the device's directory:
  // followed (inside /), the text read as hostile all the same.
  OpenPolicy p;
  p.max_size = 4096;
  p.allow_unsized = true;
  p.follow_symlinks = true;
  if (!read_untrusted(path, p, text)) return "";
  return uevent_devname(text);
}

bool fd_device(pid_t pid, int fd, BlockDevice* out) {
  if (pid <= 0 || fd < 0) return false;
  struct stat st{};
  // stat through the magic link: the open file itself, whatever its name now.
  const std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  if (::stat(link.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  out->major = major(st.st_dev);
  out->minor = minor(st.st_dev);
  return true;
}

}  // namespace jankbpf::cause
