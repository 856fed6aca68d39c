#include "report/run.h"

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
  auto [it, fresh] = stack_ids_.try_emplace(std::move(key), static_cast<uint32_t>(stacks_.size()));
  if (fresh) stacks_.push_back(std::move(st));
  return it->second;
}

void Run::add(TaskRecord rec) {
  if (tasks.size() >= kMaxTasks) {
    tasks_dropped++;
    return;
  }
  TaskEntry e;
  e.samples.reserve(rec.sampled.size());
  for (const auto& s : rec.sampled) e.samples.push_back({s.time_ns, table.intern(s), s.count});
  rec.sampled.clear();
  rec.sampled.shrink_to_fit();
  e.rec = std::move(rec);
  tasks.push_back(std::move(e));
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
