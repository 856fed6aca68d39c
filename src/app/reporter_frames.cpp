// The reporter's frame job (app/reporter.h): a janky frame's record gets
// the stacks its main thread collected while the frame ran -- the frame
// sampler's, past the deadline, and the long-task sampler's -- as its
// heaviest path, its runtime function's name and, for the renderers, every
// sample. The samples stay for a jank record of the same task.
#include "app/reporter.h"
#include "app/reporter_impl.h"
#include "frame/frame_causes.h"
#include "markers/naming.h"
#include "report/sampled.h"
#include "stack/tree.h"

namespace jankbpf {

void Reporter::handle(FrameJob& j) {
  FrameRecord& rec = j.rec;
  rec.proc.build_id = j.ctx.exe.build_id();
  stack::StackTree tree;
  stack::ModuleTable modules;
  auto it = impl_->stacks.find(rec.frame.tid);
  if (it != impl_->stacks.end()) {
    for (const auto& s : it->second) {
      if (s.time_ns < j.ctx.begin_ns || s.time_ns > j.ctx.end_ns) continue;
      const stack::ResolvedStack* st = &s.stack;
      stack::ResolvedStack with_runtime;
      if (s.runtime != runtime::RuntimeKind::Native || s.rt.any()) {
        with_runtime = s.stack;
        add_runtime_frames(with_runtime, s.rt, s.runtime, j.ctx.end_ns, true);
        st = &with_runtime;
      }
      tree.add(*st);
      if (cfg_.keep_samples) rec.sampled.push_back(report::to_sampled(*st, s.time_ns));
    }
  }
  rec.samples = static_cast<uint32_t>(tree.samples());
  if (tree.samples()) {
    rec.heaviest_stack = tree.heaviest_stack();
    for (const auto& line : tree.heaviest_path()) {
      if (!line.frame) continue;
      const auto& f = *line.frame;
      StackFrame sf;
      sf.module_index = modules.index(f);
      sf.offset = f.has_module() ? f.module_offset : f.pc;
      sf.symbol = f.symbol;
      sf.file = f.file;
      sf.line = f.line;
      sf.kernel = f.kernel();
      sf.jit = f.jit();
      sf.inlined = f.inlined();
      sf.runtime = f.runtime;
      rec.stack.push_back(std::move(sf));
    }
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
