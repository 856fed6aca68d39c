// Facts about a process read from /proc, each file parsed as untrusted
// input (a process controls its own comm and can exec at any time).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
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

// Executable identity (path, build-id) per process, cached by the file's
// device and inode so an exec or a replaced binary is noticed.
class ExeCache {
 public:
  struct Exe {
    std::string path;
    std::string build_id;
  };
  Exe lookup(pid_t pid);

 private:
  struct Key {
    dev_t dev;
    ino_t ino;
    int64_t mtime_ns;
    auto operator<=>(const Key&) const = default;
  };
  std::map<Key, std::string> build_ids_;
};

}  // namespace jankbpf

namespace jankbpf {
// Real uid of the process (the Uid: line of /proc/PID/status), or -1.
long read_uid(pid_t pid);
}  // namespace jankbpf
