#include "markers/marker_file.h"

#include <inttypes.h>
#include <sys/sysmacros.h>

#include <cstdio>

#include "stack/elf_image.h"
#include "stack/maps.h"
#include "util/safe_open.h"

namespace jankbpf {

std::unique_ptr<stack::ElfImage> MarkerFile::parse() const {
  int copy = dup_cloexec(fd_.get());
  if (copy < 0) return nullptr;
  return stack::ElfImage::open(Fd(copy));
}

bool same_mapped_file(const struct stat& st, const stack::MapEntry& m, bool kernel_link) {
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_ino) != m.inode) return false;
  return kernel_link || (major(st.st_dev) == m.dev_major && minor(st.st_dev) == m.dev_minor);
}

std::shared_ptr<MarkerFile> open_mapped_marker_file(pid_t pid, const stack::MapEntry& m, std::string* why) {
  const std::string proc = "/proc/" + std::to_string(pid);
  char range[64];
  std::snprintf(range, sizeof range, "/map_files/%" PRIx64 "-%" PRIx64, m.start, m.end);
  OpenPolicy policy;
  policy.max_size = stack::ElfImage::kMaxFileBytes;
  // map_files: the kernel's own link to the mapped file (no name to swap);
  // the mapping may still have been replaced since maps was read, hence the
  // identity check. Without CAP_SYS_ADMIN: the root path, no link followed.
  Opened o = open_magic(proc + range, policy);
  bool magic = o.fd.valid();
  if (!magic) {
    policy.owners = process_file_owners(proc + "/root", pid);
    o = open_in_root(proc + "/root", m.path, policy);
  }
  if (!o) {
    *why = o.error;
    return nullptr;
  }
  if (!same_mapped_file(o.st, m, magic)) {
    *why = "pid " + std::to_string(pid) + "'s " + m.path + " is not the file it maps (inode " +
           std::to_string(o.st.st_ino) + ", maps says " + std::to_string(m.inode) + ")";
    return nullptr;
  }
  FileId id{static_cast<uint64_t>(o.st.st_dev), static_cast<uint64_t>(o.st.st_ino)};
  return std::make_shared<MarkerFile>(std::move(o.fd), id, m.path);
}

std::shared_ptr<MarkerFile> open_marker_path(const std::string& real_path, std::string* why) {
  OpenPolicy policy;
  policy.max_size = stack::ElfImage::kMaxFileBytes;
  Opened o = open_untrusted(real_path, policy);
  if (!o) {
    *why = o.error;
    return nullptr;
  }
  FileId id{static_cast<uint64_t>(o.st.st_dev), static_cast<uint64_t>(o.st.st_ino)};
  return std::make_shared<MarkerFile>(std::move(o.fd), id, real_path);
}

}  // namespace jankbpf
