#include "cause/stack_source.h"

namespace jankbpf::cause {

std::vector<Window> sample_windows(const Evidence& ev) {
  std::vector<Window> out;
  for (const auto& s : ev.subjects) {
    if (s.flags & JB_CSF_FOREIGN) continue;
    if (s.pid) out.push_back({static_cast<pid_t>(s.tid), s.since_ns, s.until_ns});
    // Who woke it: a thread of a peer process, sampled as such.
    if (s.waker_tid && !(s.flags & JB_CSF_NO_WAKER)) out.push_back({static_cast<pid_t>(s.waker_tid), s.since_ns, s.until_ns});
  }
  // The threads that woke it and the owners named, over their longest stretch.
  if (ev.causes)
    for (uint32_t i = 0; i < ev.causes->nslices && i < JB_CAUSE_SLOTS; i++) {
      const jb_cause_slice& s = ev.causes->slices[i];
      const uint64_t from = s.max_off_ns, to = s.max_off_ns + s.max_ns;
      if (s.waker_tid && !(s.flags & JB_CSF_NO_WAKER)) out.push_back({static_cast<pid_t>(s.waker_tid), from, to});
      if (s.claim) out.push_back({static_cast<pid_t>(s.claim), from, to});
    }
  return out;
}

std::vector<uint64_t> capture_times(const Evidence& ev) {
  std::vector<uint64_t> out;
  if (!ev.causes) return out;
  for (uint32_t i = 0; i < ev.causes->nslices && i < JB_CAUSE_SLOTS; i++)
    if (ev.causes->slices[i].max_off_ns) out.push_back(ev.causes->slices[i].max_off_ns);
  return out;
}

void CollectedStacks::add_sample(pid_t tid, uint64_t time_ns, const stack::ResolvedStack& s) {
  if (samples_.size() < kMaxSamples) samples_.emplace(std::make_pair(tid, time_ns), s);
}

void CollectedStacks::add_capture(pid_t tid, uint64_t time_ns, const stack::ResolvedStack& s) {
  if (captures_.size() < JB_CAUSE_SLOTS) captures_.emplace(std::make_pair(tid, time_ns), s);
}

std::vector<const stack::ResolvedStack*> CollectedStacks::samples(pid_t tid, uint64_t from_ns, uint64_t to_ns) {
  std::vector<const stack::ResolvedStack*> out;
  for (auto it = samples_.lower_bound({tid, from_ns}); it != samples_.end() && it->first.first == tid &&
                                                      it->first.second <= to_ns;
       ++it)
    out.push_back(&it->second);
  return out;
}

const stack::ResolvedStack* CollectedStacks::capture(pid_t tid, uint64_t time_ns) {
  auto it = captures_.find({tid, time_ns});
  return it == captures_.end() ? nullptr : &it->second;
}

}  // namespace jankbpf::cause
