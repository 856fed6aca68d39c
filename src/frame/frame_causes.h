// A janky frame's `why`, from the causes work (issue 27: bpf/causes.bpf.h,
// src/cause/): a frame that is part of a long task (`task_seq` set: it
// committed past --threshold into the task) says the `why` of that task's
// jank or hang record. Causes are collected per long task only, so a frame
// shorter than the threshold says nothing: no why is made up for it.
//
// The reporter remembers the line of each task record it made (the last
// kMaxTasks, by thread and task number) and gives it to the frames of that
// task that come after it; a frame record made before its task's record
// (the task ran on long after the commit) has none.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include "model/records.h"

namespace jankbpf::frame {

class TaskWhys {
 public:
  static constexpr size_t kMaxTasks = 1024;  // a few seconds of janks, more than a frame waits for its present
  // A task record's why (a hang's so far, then its jank's, which replaces it).
  void remember(const TaskRecord& rec);
  // The why of the task a frame is part of, nullptr if none is known.
  const std::string* find(pid_t tid, uint64_t task_seq) const;
  size_t size() const { return whys_.size(); }

 private:
  using Key = std::pair<pid_t, uint64_t>;
  std::map<Key, std::string> whys_;
  std::deque<Key> order_;  // oldest first
};

// Called by the reporter on each frame record, after its stacks, before the sinks.
void attach_causes(FrameRecord& rec, const TaskWhys& tasks);

}  // namespace jankbpf::frame
