// Which watched processes run CPython, and their threads' Python frames.
//
// Two threads use it. The reporter thread finds the runtime (discover():
// ELF symbol tables of the modules the resolver already opened, so a slow
// file never stalls the ring reader). The ring thread reads the frames
// (capture()) the moment a sample arrives, while the sampled thread is
// still in the task the sample shows: read later, the memory would
// describe whatever the thread runs by then.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/python_frames.h"

namespace jankbpf::stack {
class Resolver;
}

namespace jankbpf::runtime {

// Looks through a process's modules for CPython's runtime: the module that
// defines `_PyRuntime` and `Py_Version` (3.11+), whatever its path
// (python3.11, a pyenv build, libpython3.X.so, an embedding program).
// `why` says what was found when no target comes back ("" when no module
// looks like CPython).
std::unique_ptr<PythonTarget> find_python(stack::Resolver& resolver, pid_t pid, std::string* why);

class PythonProcesses {
 public:
  // Reporter thread: looks at pid, again only when its executable changed
  // (an exec: `nice python3 app.py` is not Python when first seen).
  void discover(stack::Resolver& resolver, pid_t pid);
  // Whether pid was found to run a supported CPython.
  bool is_python(pid_t pid);
  void forget(pid_t pid);

  // Ring thread: the Python frames thread tid of pid runs now
  // (Status::None when pid is not, or not yet, known to run Python).
  PyCapture capture(pid_t pid, pid_t tid);

 private:
  // The tid as the process's pid namespace numbers it (PyThreadState has
  // that one): NSpid's last field in /proc/PID/task/TID/status.
  uint64_t ns_tid(pid_t pid, pid_t tid);

  std::mutex mu_;
  struct Known {
    std::shared_ptr<const PythonTarget> target;  // null: not a supported CPython
    uint64_t exe_dev = 0, exe_ino = 0;           // the executable looked at
  };
  std::unordered_map<pid_t, Known> known_;  // under mu_

  // Ring thread only.
  struct Live {
    std::shared_ptr<const PythonTarget> target;
    std::unique_ptr<PythonWalker> walker;
    std::unordered_map<pid_t, uint64_t> ns_tids;
  };
  std::unordered_map<pid_t, Live> live_;
};

}  // namespace jankbpf::runtime
