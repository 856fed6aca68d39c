// Running an external tool (trace-cmd) without a shell: an argv vector and
// an explicit environment handed to execve, stdin from /dev/null, stdout and
// stderr into a file, a deadline after which the child is SIGKILLed, and
// optionally a private mount namespace set up before the exec (see
// trace/capture.cpp for why trace-cmd needs one).
//
// fork() rather than posix_spawn() because posix_spawn cannot unshare or
// mount; between fork and execve the child makes raw system calls only
// (everything it needs is prepared beforehand), so this is safe from a
// multi-threaded process.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "util/fd.h"

namespace jankbpf {

struct MountOp {
  std::string source;
  std::string target;
  std::string fstype;
  unsigned long flags = 0;
  std::string data;
};

struct SpawnSpec {
  std::string path;               // absolute path of the program
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "NAME=value"; passed as is
  std::string cwd;                // empty: inherit
  int output_fd = -1;             // stdout+stderr; -1: /dev/null
  int input_fd = -1;              // stdin; -1: /dev/null (a file checked by the caller: /proc/self/fd/0 to the tool)
  // When set, the child unshares its mount namespace, makes / private
  // (nothing propagates back) and performs `mounts` in order before exec.
  bool private_mounts = false;
  std::vector<MountOp> mounts;
};

// The exit codes a child uses for its own failures before the program runs.
enum : int {
  kSpawnSetupFailed = 120,  // unshare or a mount failed (message in output)
  kSpawnExecFailed = 127,
};

class Child {
 public:
  Child() = default;
  Child(Child&& o) noexcept : pid_(std::exchange(o.pid_, -1)), pidfd_(std::move(o.pidfd_)) {}
  Child& operator=(Child&& o) noexcept {
    if (this != &o) {
      reap_or_kill();
      pid_ = std::exchange(o.pid_, -1);
      pidfd_ = std::move(o.pidfd_);
    }
    return *this;
  }
  ~Child();  // kills and reaps a child still running

  // Starts the child. False with `error` when fork itself fails; failures
  // inside the child show up as its exit status.
  bool start(const SpawnSpec& spec, std::string& error);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // Readable when the child has exited (a pidfd); -1 on kernels without.
  int wait_fd() const { return pidfd_.get(); }

  // Waits up to timeout_ms (0: just look; <0: forever). True when the child
  // was reaped, with `status` as from waitpid. False while it still runs.
  bool wait(int timeout_ms, int& status);
  // SIGKILL and reap.
  void kill(int& status);

 private:
  void reap_or_kill();

  pid_t pid_ = -1;
  Fd pidfd_;
};

}  // namespace jankbpf
