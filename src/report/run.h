// A run's records as the renderers (HTML, Perfetto, folded) read them:
// tasks in arrival order with their samples, stacks interned once for the
// whole run so a thousand janks of one process cost their samples, not a
// thousand copies of the same frames.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/records.h"

namespace jankbpf::report {

class StackTable {
 public:
  struct Stack {
    std::vector<uint32_t> frames;  // into frames(), root first
    char wait_state = 0;           // 0 on-CPU, else the off-CPU state
  };
  // Frames over all distinct stacks: 64 MiB of ids at most, whatever the
  // logs hold (a run of jankbpf's repeats its stacks far more than that).
  static constexpr size_t kMaxFrameIds = 1u << 24;
  static constexpr uint32_t kFull = UINT32_MAX;  // intern(): a new stack past kMaxFrameIds
  uint32_t intern(const SampledStack& s);
  const std::vector<SampledFrame>& frames() const { return frames_; }
  const std::vector<Stack>& stacks() const { return stacks_; }

 private:
  uint32_t intern_frame(const SampledFrame& f);
  std::vector<SampledFrame> frames_;
  std::unordered_map<std::string, uint32_t> frame_ids_;
  std::vector<Stack> stacks_;
  std::unordered_map<std::string, uint32_t> stack_ids_;
  size_t interned_frame_ids_ = 0;  // over all stacks_
};

struct Sample {
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC; 0 when rebuilt from a log
  uint32_t stack = 0;    // into StackTable::stacks()
  uint32_t count = 1;
};

struct TaskEntry {
  TaskRecord rec;  // rec.sampled is moved into `samples`
  std::vector<Sample> samples;
};

// A janky frame's record with its samples interned (frames: issue 28).
struct FrameEntry {
  FrameRecord rec;  // rec.sampled is moved into `samples`
  std::vector<Sample> samples;
};

struct Run {
  StackTable table;
  std::vector<TaskEntry> tasks;
  std::vector<ExitRecord> exits;
  std::optional<SummaryRecord> summary;
  uint64_t tasks_dropped = 0;    // not kept: over kMaxTasks
  uint64_t exits_dropped = 0;    // not kept: over kMaxExits
  uint64_t samples_dropped = 0;  // sample entries over kMaxSamples or the stack table's bound

  // What a run may hold, live (--report) or read back (`jankbpf report`).
  static constexpr size_t kMaxTasks = 20000;
  static constexpr size_t kMaxExits = 20000;
  static constexpr size_t kMaxSamples = 1u << 22;  // (stack, count) entries over all tasks: 64 MiB
  void add(TaskRecord rec);
  // A task whose stack log is the one tasks[other] was read from.
  void add_samples_of(TaskRecord rec, size_t other);
  void add(ExitRecord e);
  size_t samples() const { return samples_; }


  // Frames: every frame of every surface (the last kMaxFrames), the janky
  // ones' records (at most kMaxTasks), and each process's name.
  std::deque<FrameTiming> frames;
  std::vector<FrameEntry> janky_frames;
  std::map<pid_t, std::string> frame_procs;
  uint64_t frames_dropped = 0;  // the oldest frames let go: over kMaxFrames
  static constexpr size_t kMaxFrames = 20000;
  void add(FrameRecord rec);
  void add(const FrameBatch& batch);

 private:
  size_t samples_ = 0;
};

// "name (pid N)": the root frame of a process's folded stacks and the
// title of its aggregate flame graph.
std::string process_label(const TaskRecord& r);

}  // namespace jankbpf::report
