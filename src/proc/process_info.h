// Facts about a process read from /proc, each file parsed as untrusted
// input (a process controls its own comm and can exec at any time).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace jankbpf {

bool process_exists(pid_t pid);
std::string read_comm(pid_t pid);
std::string read_exe_path(pid_t pid);
// The cgroup v2 path ("0::/path" line of /proc/PID/cgroup), or "".
std::string read_cgroup(pid_t pid);
// Parses the content of a /proc/PID/cgroup file (exposed for tests).
std::string parse_cgroup_v2(const std::string& content);

class Fd;

// The file a process runs, opened through /proc/PID/exe while the process
// lives. Its build-id is read by build_id(), on whichever thread calls it:
// the ring-buffer thread opens, the reporter's worker reads (an ELF scan
// has no place on the thread that drains the kernel's buffers).
class ExeFile {
 public:
  std::string path;
  // "" when the file is not ELF, has no build-id, or could not be opened.
  // The first call reads the file (once per file identity, machine-wide:
  // the answer is remembered by the ExeCache that opened it).
  std::string build_id();

 private:
  friend class ExeCache;
  struct Shared;
  std::shared_ptr<Shared> cache_;
  std::shared_ptr<Fd> fd_;  // held until build_id() reads it
  std::string build_id_;
  bool known_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  int64_t mtime_ns_ = 0;
};

// Executable identity (path, build-id) per process, build-ids cached by the
// file's device, inode and mtime so an exec or a replaced binary is
// noticed. Thread-safe.
class ExeCache {
 public:
  ExeCache();
  ~ExeCache();
  // Path and an open file; the build-id too when this file was read before.
  ExeFile open(pid_t pid);
  struct Exe {
    std::string path;
    std::string build_id;
  };
  // open() and build_id() at once.
  Exe lookup(pid_t pid);

  // At most this many files are handed out still open (each holds a
  // descriptor until its job runs); past it open() reads the build-id
  // itself rather than let a flood of new binaries exhaust descriptors.
  static constexpr int kMaxHeldOpen = 64;

 private:
  std::shared_ptr<ExeFile::Shared> shared_;
};

}  // namespace jankbpf

namespace jankbpf {
// Real uid of the process (the Uid: line of /proc/PID/status), or -1.
long read_uid(pid_t pid);
}  // namespace jankbpf
