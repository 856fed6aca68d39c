// What names a `fault` or an `io` cause: the file a faulting address maps
// (from /proc/PID/maps), a block device's name (from
// /sys/dev/block/MAJ:MIN/uevent), the device a file descriptor's file lives
// on. /proc and /sys text is parsed as hostile: a process names its own
// mappings, and every field is bounded and escaped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace jankbpf::stack {
class ProcMaps;
}

namespace jankbpf::cause {

// A file mapped at an address: its path (escaped; "" when the mapping has
// none we can name), its device and inode, and the address's file offset.
struct MappedFile {
  std::string path;
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  uint64_t offset = 0;
  bool found = false;  // a file-backed mapping holds the address

  // "path", else "MAJ:MIN:INODE" (a deleted or unnamed file).
  std::string name() const;
};

// The file-backed mapping holding addr in these maps (found false if none).
MappedFile file_at(const stack::ProcMaps& maps, uint64_t addr);

// A block device: "MAJ:MIN" and the kernel's name for it ("vda", "nvme0n1p2";
// "" when /sys does not know it, e.g. a filesystem on no block device).
struct BlockDevice {
  uint32_t major = 0, minor = 0;
  std::string name;
  std::string id() const { return std::to_string(major) + ":" + std::to_string(minor); }
};

// The kernel's dev_t as BPF reads it (major << 20 | minor) split.
inline BlockDevice kernel_dev(uint32_t kdev) { return {kdev >> 20, kdev & 0xfffff, ""}; }

// DEVNAME of a uevent file's text ("MAJOR=8\nMINOR=0\nDEVNAME=sda\n..."):
// a plain device name (letters, digits, '-', '_', '.', '/', at most 64
// bytes, no "..") or "" when there is none such.
std::string uevent_devname(const std::string& text);

// Live readers.
// /sys/dev/block/MAJ:MIN/uevent's DEVNAME ("" when absent).
std::string block_device_name(uint32_t major, uint32_t minor);
// The device a process's fd's file lives on (stat of /proc/PID/fd/N), as
// the kernel's dev_t split; found false when the fd is not open.
bool fd_device(pid_t pid, int fd, BlockDevice* out);

}  // namespace jankbpf::cause
