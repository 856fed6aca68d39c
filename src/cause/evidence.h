// What the kernel side sent about one task's causes (bpf/causes.bpf.h): its
// JB_EV_CAUSE record and the JB_EV_SUBJECT records of the threads followed
// while it waited. Collected by the ring reader until the task's own record
// comes, then handed to the reporter with it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cause/io_identity.h"
#include "jankbpf/events.h"

namespace jankbpf::cause {

// What names the causes, read from /proc when the record arrived: the
// process may be gone by the time the record is finished.
struct Prefetched {
  std::map<uint64_t, std::string> where;  // address -> where it lies
  std::map<int, std::string> fd_paths;
  std::map<pid_t, std::string> comms;     // threads of the process named, by tid
  std::map<uint64_t, MappedFile> files;   // fault: faulting address -> the file there
  std::map<int, BlockDevice> fd_devs;     // io: fd -> the device of its file
};

struct Evidence {
  std::optional<jb_cause_event> causes;  // none: never off the CPU in the task
  std::vector<jb_subject_event> subjects;
  Prefetched live;
};

// Bounded: records whose task record never comes (lost in a full ring, a
// task under the threshold whose subjects were followed) must not pile up.
class EvidenceStore {
 public:
  static constexpr size_t kMaxTasks = 1024;        // (tid, seq) pairs held at once
  static constexpr size_t kMaxSubjectsPerTask = 16;

  // Returns the task's evidence, for prefetch().
  Evidence& add_causes(const jb_cause_event& e);
  void add_subject(const jb_subject_event& e);
  // The evidence of (tid, seq), removed; older entries of the same thread go too.
  Evidence take(pid_t tid, uint64_t seq);
  // The same, kept (a hang: its task's jank comes later and needs it all).
  Evidence peek(pid_t tid, uint64_t seq) const;
  size_t size() const { return items_.size(); }
  uint64_t dropped() const { return dropped_; }

 private:
  Evidence& slot(pid_t tid, uint64_t seq);
  std::map<std::pair<pid_t, uint64_t>, Evidence> items_;
  std::vector<std::pair<pid_t, uint64_t>> order_;  // arrival order, for eviction
  uint64_t dropped_ = 0;
};

}  // namespace jankbpf::cause
