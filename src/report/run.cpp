#include "report/run.h"

#include <algorithm>

namespace jankbpf::report {

uint32_t StackTable::intern_frame(const SampledFrame& f) {
  std::string key = f.name + '\x1f' + f.module;
  auto [it, fresh] = frame_ids_.try_emplace(std::move(key), static_cast<uint32_t>(frames_.size()));
  if (fresh) frames_.push_back(f);
  return it->second;
}

uint32_t StackTable::intern(const SampledStack& s) {
  Stack st;
  st.wait_state = s.wait_state;
  st.frames.reserve(s.frames.size());
  std::string key(1, s.wait_state ? s.wait_state : '-');
  for (const auto& f : s.frames) {
    uint32_t id = intern_frame(f);
    st.frames.push_back(id);
    key.append(reinterpret_cast<const char*>(&id), sizeof id);
  }
  auto found = stack_ids_.find(key);
  if (found != stack_ids_.end()) return found->second;
  if (interned_frame_ids_ + st.frames.size() > kMaxFrameIds) return kFull;
  interned_frame_ids_ += st.frames.size();
  stack_ids_.emplace(std::move(key), static_cast<uint32_t>(stacks_.size()));
  stacks_.push_back(std::move(st));
  return static_cast<uint32_t>(stacks_.size() - 1);
}

void Run::add(TaskRecord rec) {
  if (tasks.size() >= kMaxTasks) {
    tasks_dropped++;
    return;
  }
  TaskEntry e;
  e.samples.reserve(std::min(rec.sampled.size(), kMaxSamples - samples_));
  for (const auto& s : rec.sampled) {
    uint32_t id = samples_ < kMaxSamples ? table.intern(s) : StackTable::kFull;
    if (id == StackTable::kFull) {
      samples_dropped++;
      continue;
    }
    e.samples.push_back({s.time_ns, id, s.count});
    samples_++;
  }
  rec.sampled.clear();
  rec.sampled.shrink_to_fit();
  e.rec = std::move(rec);
  tasks.push_back(std::move(e));
}

void Run::add_samples_of(TaskRecord rec, size_t other) {
  if (tasks.size() >= kMaxTasks || other >= tasks.size()) {
    add(std::move(rec));
    return;
  }
  rec.sampled.clear();
  add(std::move(rec));
  const auto& from = tasks[other].samples;
  auto& to = tasks.back().samples;
  const size_t n = std::min(from.size(), kMaxSamples - samples_);
  to.assign(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
  samples_ += n;
  samples_dropped += from.size() - n;
}

void Run::add(ExitRecord e) {
  if (exits.size() >= kMaxExits) {
    exits_dropped++;
    return;
  }
  exits.push_back(std::move(e));
}

void Run::add(FrameRecord rec) {
  if (janky_frames.size() >= kMaxTasks) return;
  FrameEntry e;
  for (const auto& s : rec.sampled) e.samples.push_back({s.time_ns, table.intern(s), s.count});
  rec.sampled.clear();
  rec.sampled.shrink_to_fit();
  frame_procs[rec.proc.pid] = rec.proc.name;
  e.rec = std::move(rec);
  janky_frames.push_back(std::move(e));
}

void Run::add(const FrameBatch& batch) {
  for (const auto& [pid, p] : batch.procs) frame_procs[pid] = p.comm;
  for (const auto& f : batch.frames) {
    if (frames.size() >= kMaxFrames) {
      frames.pop_front();
      frames_dropped++;
    }
    frames.push_back(f);
  }
}

std::string process_label(const TaskRecord& r) {
  return (r.proc.name.empty() ? std::string("?") : r.proc.name) + " (pid " +
         std::to_string(r.proc.pid) + ")";
}

}  // namespace jankbpf::report
