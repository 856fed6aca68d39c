// The stacks attribution looks at, copied out of the reporter's per-thread
// stores before a finished task's own are dropped: the off-CPU captures
// its slices name and the samples of the threads it was waiting for.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "cause/attribute.h"
#include "cause/evidence.h"

namespace jankbpf::cause {

struct Window {
  pid_t tid = 0;
  uint64_t from_ns = 0, to_ns = 0;
};

// What the evidence needs: the subjects' windows, and the switch-out times
// of the waiting thread's longest stretches (their captures).
std::vector<Window> sample_windows(const Evidence& ev);
std::vector<uint64_t> capture_times(const Evidence& ev);

class CollectedStacks : public StackSource {
 public:
  static constexpr size_t kMaxSamples = 4096;  // copies held for one record

  void add_sample(pid_t tid, uint64_t time_ns, const stack::ResolvedStack& s);
  void add_capture(pid_t tid, uint64_t time_ns, const stack::ResolvedStack& s);

  std::vector<const stack::ResolvedStack*> samples(pid_t tid, uint64_t from_ns, uint64_t to_ns) override;
  const stack::ResolvedStack* capture(pid_t tid, uint64_t time_ns) override;

 private:
  std::multimap<std::pair<pid_t, uint64_t>, stack::ResolvedStack> samples_;
  std::map<std::pair<pid_t, uint64_t>, stack::ResolvedStack> captures_;
};

}  // namespace jankbpf::cause
