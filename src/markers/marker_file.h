// A marker binary opened once and held by descriptor from parsing to
// attaching: a name resolved again later (/proc/PID/root/PATH, a symlink
// swapped in by the process's owner) could put a uprobe, or a USDT
// semaphore's increment, at an offset parsed from another file. The
// descriptor is parsed (ElfImage's private copy) and attached through
// /proc/self/fd/N, which the kernel resolves to this very inode.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <compare>
#include <cstdint>
#include <memory>
#include <string>

#include "util/fd.h"

namespace jankbpf {

namespace stack {
struct MapEntry;
class ElfImage;
}  // namespace stack

struct FileId {
  uint64_t dev = 0, ino = 0;
  auto operator<=>(const FileId&) const = default;
};

class MarkerFile {
 public:
  MarkerFile(Fd fd, FileId id, std::string shown) : fd_(std::move(fd)), id_(id), shown_(std::move(shown)) {}
  FileId id() const { return id_; }
  int fd() const { return fd_.get(); }
  // What libbpf and the kernel are given: this descriptor's magic link.
  std::string attach_path() const { return "/proc/self/fd/" + std::to_string(fd_.get()); }
  // The path as the process (or the user) names it, for messages.
  const std::string& shown() const { return shown_; }
  // A parse of this descriptor (a private copy: the file may shrink).
  std::unique_ptr<stack::ElfImage> parse() const;

 private:
  Fd fd_;
  FileId id_;
  std::string shown_;
};

// Whether `st` (fstat of an opened descriptor) is the regular file a maps
// line names: same device and inode. `kernel_link`: opened through
// map_files, which is the mapped file unless the range was remapped since;
// the inode number is compared, not the device, which overlayfs and btrfs
// subvolumes report differently in stat and in maps.
bool same_mapped_file(const struct stat& st, const stack::MapEntry& m, bool kernel_link);

// The file process `pid` maps at `m`, through /proc/PID/map_files (the
// kernel's link to the very file mapped), else its root without following
// any link; verified against m's device and inode. nullptr with *why.
std::shared_ptr<MarkerFile> open_mapped_marker_file(pid_t pid, const stack::MapEntry& m, std::string* why);

// A binary the user named, already resolved to a real path: opened without
// following a symlink swapped in since, a regular file. nullptr with *why.
std::shared_ptr<MarkerFile> open_marker_path(const std::string& real_path, std::string* why);

}  // namespace jankbpf
