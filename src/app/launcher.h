// `jankbpf -- CMD ARGS...`: the command is forked first and held at a gate
// until the BPF programs are attached, so its first task is already seen.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "util/fd.h"

namespace jankbpf {

class Launcher {
 public:
  // Forks the child, which waits at the gate. Returns false with *error set.
  // With stdout_to_stderr the command's stdout goes to stderr, keeping
  // jankbpf's stdout JSON lines only.
  bool spawn(const std::vector<std::string>& argv, bool stdout_to_stderr, std::string* error);
  // Opens the gate: the child execs. Returns false with *error set when the
  // exec failed (the child then exits 127, as a shell would).
  bool release(std::string* error);
  pid_t pid() const { return pid_; }
  // Reaps the child if it has exited; sets *status to the shell-style exit
  // status (code, or 128 + signal). Non-blocking.
  bool reap(int* status);
  // Kills a child that was never released (start-up failed).
  void abandon();

 private:
  pid_t pid_ = -1;
  Fd gate_;      // write end: one byte opens it
  Fd exec_err_;  // read end: errno of a failed exec, EOF on success
};

}  // namespace jankbpf
