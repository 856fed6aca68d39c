// Which named targets are JVMs (issue 29). A JVM's main thread is not the
// process's first one and never waits in an event loop; its loop threads
// are NIO selectors (epoll). Targets named by --pid, -- CMD or --comm are
// looked at on a short backoff after the start (a JVM maps libjvm.so some
// 50-100 ms after its exec) and each JVM is marked in the kernel, whose
// wait hooks then watch its threads that wait in epoll
// (Detector::mark_loop_threads). After the schedule nothing wakes
// jankbpf for it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace jankbpf {

// Whether pid maps a libjvm.so (its /proc/PID/maps, bounded).
bool maps_libjvm(pid_t pid);

class JvmTargets {
 public:
  JvmTargets(std::vector<pid_t> pids, std::string comm) : pids_(std::move(pids)), comm_(std::move(comm)) {}
  void add(pid_t pid) { pids_.push_back(pid); }
  // The JVMs among the targets not found before.
  std::vector<pid_t> look();
  // How many maps files the looks read (bench section 12; tests).
  size_t maps_reads() const { return maps_reads_; }
  // Milliseconds to the next look, 0 when the schedule is over: after its
  // last step, or once every target is settled (a JVM, or seen twice
  // without libjvm) and no --comm can name new ones. Watching one idle
  // non-JVM then wakes jankbpf twice, not 8 times over 25 s.
  uint64_t next_delay_ms();

 private:
  std::vector<pid_t> pids_;
  std::string comm_;
  std::set<pid_t> found_;
  // Targets seen without libjvm once, and twice: the second time (a look
  // at least 0.1 s later, past a launcher's 50-100 ms) they are not JVMs and
  // are not read again. Without it `--comm` with 10,000 processes read
  // 10,000 maps files at every look: 0.45 s of CPU each (bench section 12).
  std::set<pid_t> once_not_, not_jvm_;
  size_t step_ = 0;
  size_t maps_reads_ = 0;
};

}  // namespace jankbpf
