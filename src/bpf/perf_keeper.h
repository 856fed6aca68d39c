// Perf events handed to the kernel to close after jankbpf has gone.
//
// Closing a tracepoint's or uprobe's perf event waits for RCU grace periods
// under the kernel's event mutex (perf_trace_destroy): 25-50 ms each, one
// after another, most of a second for the syscall tracepoints of the waits.
// Detaching the program from the event is quick (the link's release); only
// the event's last close is slow. So each such event is also put in a
// BPF_MAP_TYPE_PERF_EVENT_ARRAY that jankbpf owns: the map holds a reference
// to the event's file, the link's close then only detaches the program, and
// when the map's fd is closed (the exit) the kernel drops its references
// after one grace period, from its own worker (delayed fput), where the
// event's slow close no longer holds up jankbpf's exit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace jankbpf {

class PerfKeeper {
 public:
  // A map of `capacity` slots; nullptr with *error set when the kernel
  // refuses the map (then events close the slow way, as before).
  static std::unique_ptr<PerfKeeper> create(uint32_t capacity, std::string* error);
  ~PerfKeeper();
  PerfKeeper(const PerfKeeper&) = delete;
  PerfKeeper& operator=(const PerfKeeper&) = delete;

  // Keeps a reference to the event `perf_fd` is open on; its slot, or
  // nullopt (the map is full, or the kernel refuses this kind of event).
  std::optional<uint32_t> keep(int perf_fd);
  // Drops the slot's reference (the event closes in the kernel's worker
  // once nothing else holds it): for a probe released while running.
  void release(uint32_t slot);
  size_t kept() const { return kept_; }
  uint64_t refused() const { return refused_; }

 private:
  explicit PerfKeeper(int fd, uint32_t capacity);
  int fd_;
  std::vector<uint32_t> free_;  // free slots, the lowest last
  size_t kept_ = 0;
  uint64_t refused_ = 0;
};

// Opening the perf events jankbpf attaches programs to, as libbpf would,
// so that their fds are known (libbpf keeps its own to itself). -1 with
// *error set on failure.
int open_tracepoint_event(const std::string& category, const std::string& name, std::string* error);
// pid -1: every process. The binary by path, `offset` a file offset.
int open_uprobe_event(const std::string& binary, uint64_t offset, bool retprobe, int pid, std::string* error);

}  // namespace jankbpf
