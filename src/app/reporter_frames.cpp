// The reporter's frame job (app/reporter.h): a janky frame's record gets
// the stacks its main thread collected while the frame ran -- the frame
// sampler's, past the deadline, and the long-task sampler's -- as its
// heaviest path, its runtime function's name and, for the renderers, every
// sample. The samples stay for a jank record of the same task.
//
// The frame sampler samples only on-CPU, one stack per period (a quarter
// of the refresh); an off-CPU capture is taken once per sleep. So in the
// tree a capture weighs the time it slept inside the frame, in periods: a
// frame that slept 800 ms and drew for 8 names the sleep, as a wall-clock
// sampler would.
#include <algorithm>

#include "app/reporter.h"
#include "app/reporter_impl.h"
#include "app/stack_text.h"
#include "frame/frame_causes.h"
#include "markers/naming.h"
#include "report/sampled.h"
#include "stack/tree.h"

namespace jankbpf {

uint32_t Reporter::capture_weight(pid_t tid, uint64_t time_ns, char wait_state, uint64_t next_ns, uint64_t begin_ns,
                                  uint64_t end_ns, uint64_t period_ns) const {
  if (period_ns == 0) return 1;
  uint64_t until = end_ns;  // not woken yet, as far as the reporter knows
  bool woken = false;
  if (auto it = impl_->offcpu.find(tid); it != impl_->offcpu.end())
    for (const auto& off : it->second)
      if (off.time_ns == time_ns && off.woken_ns > time_ns) until = std::min(until, off.woken_ns), woken = true;
  if (next_ns > time_ns) until = std::min(until, next_ns);
  else if (!woken && wait_state == 'R') return 1;
  uint64_t from = std::max(time_ns, begin_ns);
  uint64_t slept = until > from ? until - from : 0;
  constexpr uint64_t kMaxWeight = 1u << 16;  // a day's sleep still fits the tree's counts
  return static_cast<uint32_t>(std::clamp<uint64_t>(slept / period_ns, 1, kMaxWeight));
}

void Reporter::handle(FrameJob& j) {
  FrameRecord& rec = j.rec;
  rec.proc.build_id = j.ctx.exe.build_id();
  stack::StackTree tree;
  stack::ModuleTable modules;
  uint32_t stacks = 0;
  auto it = impl_->stacks.find(rec.frame.tid);
  if (it != impl_->stacks.end()) {
    const auto& q = it->second;
    for (size_t i = 0; i < q.size(); ++i) {
      const auto& s = q[i];
      if (s.time_ns < j.ctx.begin_ns || s.time_ns > j.ctx.end_ns) continue;
      const stack::ResolvedStack* st = &s.stack;
      stack::ResolvedStack with_runtime;
      if (s.runtime != runtime::RuntimeKind::Native || s.rt.any()) {
        with_runtime = s.stack;
        add_runtime_frames(with_runtime, s.rt, s.runtime, j.ctx.end_ns, true);
        st = &with_runtime;
      }
      tree.add(*st, s.stack.wait_state ? capture_weight(rec.frame.tid, s.time_ns, s.stack.wait_state,
                                                        i + 1 < q.size() ? q[i + 1].time_ns : 0, j.ctx.begin_ns,
                                                        j.ctx.end_ns, j.ctx.sample_period_ns)
                                       : 1);
      ++stacks;
      if (cfg_.keep_samples) rec.sampled.push_back(report::to_sampled(*st, s.time_ns));
    }
  }
  rec.samples = stacks;
  if (tree.samples()) {
    rec.heaviest_stack = tree.heaviest_stack();
    rec.stack = structured_path(tree, modules);
    rec.modules = modules.modules();
    // The runtime's function, named as a task's is (markers/naming.h).
    TaskRecord named;
    named.stack = rec.stack;
    name_runnable_from_runtime(named);
    rec.runnable_name = named.runnable_name;
  }
  frame::attach_causes(rec, impl_->task_whys);
  {
    std::lock_guard lk(mu_);
    stats_.frame_records++;
  }
  out_.emit(rec);
}

}  // namespace jankbpf
