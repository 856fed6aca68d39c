// The reporter's jobs (app/reporter.h): a sample unwound and kept, an
// off-CPU capture and its waker, and a task's record finished -- its stacks,
// off-CPU periods, name, stack log and trace -- before the sinks render it.
#include <algorithm>
#include <cstring>

#include "app/reporter.h"
#include "app/reporter_impl.h"
#include "app/stack_text.h"
#include "cause/attribute.h"
#include "cause/stack_source.h"
#include "arch/regs.h"
#include "logs/log_dir.h"
#include "logs/quota.h"
#include "markers/naming.h"
#include "report/sampled.h"
#include "runtime/interleave.h"
#include "runtime/jvm_pause.h"
#include "runtime/runtime_procs.h"
#include "stack/perf_sample.h"
#include "stack/tree.h"
#include "util/budget.h"
#include "util/clock.h"
#include "util/log.h"

namespace jankbpf {
namespace {

const char* state_name(uint32_t st) {
  return st == JB_ST_BLOCKED ? "blocked_io" : st == JB_ST_RUNNABLE ? "runnable" : "sleeping";
}

}  // namespace

void Reporter::add_runtime_frames(stack::ResolvedStack& s, const runtime::RuntimeCapture& rt,
                                  runtime::RuntimeKind kind, uint64_t task_end_ns, bool count) {
  runtime::RuntimeFrameStats st;
  const bool python = kind == runtime::RuntimeKind::Python, v8 = kind == runtime::RuntimeKind::V8,
             java = kind == runtime::RuntimeKind::Java;
  if (python || rt.python.status != runtime::PyCapture::Status::None)
    runtime::interleave_python(s, rt.python, python, task_end_ns, st);
  if (v8 || rt.js.status != runtime::JsCapture::Status::None) runtime::interleave_js(s, rt.js, v8, task_end_ns, st);
  if (java || rt.java.status != runtime::JavaCapture::Status::None)
    runtime::interleave_java(s, rt.java, java, task_end_ns, st);
  if (!count || (!st.read && !st.unreadable)) return;
  std::lock_guard lk(mu_);
  stats_.runtime_frames_read += st.read;
  stats_.runtime_frames_unreadable += st.unreadable;
}

void Reporter::handle(SampleJob& j) {
  stack::PerfSampleView v;
  if (!stack::parse_perf_sample(j.record, cfg_.perf_sample_type, cfg_.regs_mask, v)) return;
  stack::SampleInput in = stack::to_sample_input(v, cfg_.regs_mask);
  auto resolved = impl_->resolver.resolve(in);
  impl_->store(static_cast<pid_t>(v.tid), v.time, std::move(resolved), std::move(j.rt), python_->kind(in.pid));
  records_.give(std::move(j.record));
}

void Reporter::handle(OffCpuJob& j) {
  const jb_offcpu_event& e = *j.event;
  stack::SampleInput in;
  in.pid = static_cast<pid_t>(e.hdr.pid);
  in.tid = static_cast<pid_t>(e.hdr.tid);
  in.regs_mask = cfg_.regs_mask;
  size_t nregs = std::min<size_t>(e.nr_regs, JB_MAX_USER_REGS);
  in.regs_abi = nregs ? static_cast<uint64_t>(RegsAbi::Abi64) : static_cast<uint64_t>(RegsAbi::None);
  in.regs = std::span<const uint64_t>(reinterpret_cast<const uint64_t*>(e.regs), nregs);
  size_t ubytes = std::min<size_t>(e.ustack_bytes, sizeof e.ustack);
  in.stack = std::span<const uint8_t>(e.ustack, ubytes);
  in.stack_dyn_size = ubytes;
  size_t kframes = std::min<size_t>(e.kstack_bytes / 8, JB_KSTACK_DEPTH);
  const auto* kpcs = reinterpret_cast<const uint64_t*>(e.kstack);
  size_t skip = tracing_frames(impl_->resolver.kallsyms(), kpcs, kframes);
  kpcs += skip;
  kframes -= skip;
  in.kernel_callchain = std::span<const uint64_t>(kpcs, kframes);
  in.wait_state = e.state == JB_ST_BLOCKED ? 'D' : e.state == JB_ST_RUNNABLE ? 'R' : 'S';
  auto resolved = impl_->resolver.resolve(in);
  std::optional<runtime::PauseSample> pause;
  if (j.rt.java.status != runtime::JavaCapture::Status::None) pause = runtime::jvm_pause_of(resolved, j.rt.java);
  impl_->store(in.tid, e.hdr.time_ns, std::move(resolved), std::move(j.rt), python_->kind(in.pid));

  Impl::OffCpu off;
  if (pause) {
    off.pause_kind = std::move(pause->kind);
    off.pause_op = std::move(pause->operation);
  }
  off.pid = in.pid;
  off.seq = e.seq;
  off.time_ns = e.hdr.time_ns;
  off.state = e.state;
  off.kstack = kernel_stack(impl_->resolver.kallsyms(), kpcs, kframes);
  impl_->make_room(impl_->offcpu, in.tid, false);  // counted with its stacks
  auto& list = impl_->offcpu[in.tid];
  if (list.size() >= 64) list.erase(list.begin());
  list.push_back(std::move(off));
}

void Reporter::handle(WakerJob& j) {
  const jb_waker_event& e = j.event;
  auto it = impl_->offcpu.find(static_cast<pid_t>(e.hdr.tid));
  if (it == impl_->offcpu.end() || it->second.empty()) return;
  auto& off = it->second.back();
  if (off.seq != e.seq || off.has_waker) return;
  off.has_waker = true;
  off.woken_ns = e.hdr.time_ns;
  off.waker.pid = static_cast<pid_t>(e.waker_pid);
  off.waker.tid = static_cast<pid_t>(e.waker_tid);
  off.waker.comm = std::string(e.waker_comm, strnlen(e.waker_comm, sizeof e.waker_comm));
  const auto* kpcs = reinterpret_cast<const uint64_t*>(e.kstack);
  size_t n = std::min<size_t>(e.kstack_bytes / 8, JB_WAKER_DEPTH);
  size_t skip = tracing_frames(impl_->resolver.kallsyms(), kpcs, n);
  off.waker.kernel_stack = kernel_stack(impl_->resolver.kallsyms(), kpcs + skip, n - skip);
  // An interrupt's "waker" is the task it came in on: its user stack says
  // nothing of the wakeup, and symbolizing it would read the binaries of
  // every process a timer interrupt happens to land on.
  off.waker.in_interrupt = interrupt_context(impl_->resolver.kallsyms(), kpcs + skip, n - skip);
  if (off.waker.in_interrupt) return;
  // The waker's user stack: the kernel's frame-pointer walk (no copy of its
  // stack to unwind), so a waker built without frame pointers shows its
  // leaf and whatever the walk could follow.
  std::vector<uint64_t> upcs;
  for (size_t i = 0; i < std::min<size_t>(e.ustack_bytes / 8, JB_WAKER_DEPTH) && e.ustack[i]; i++)
    upcs.push_back(e.ustack[i]);
  if (!upcs.empty() && e.waker_pid != 0)
    for (const auto& f : impl_->resolver.symbolize_user(static_cast<pid_t>(e.waker_pid), host_arch().arch, upcs))
      off.waker.user_stack.push_back(user_frame_text(f));
}

void Reporter::handle(TaskJob& j) {
  TaskRecord& rec = j.rec;
  TaskContext& ctx = j.ctx;
  const bool hang = rec.kind == TaskRecord::Kind::Hang;
  rec.proc.build_id = ctx.exe.build_id();

  // 0. The stacks its causes name (before step 1 drops the task's own).
  cause::CollectedStacks cause_stacks;
  if (ctx.causes_enabled) {
    if (auto own = impl_->stacks.find(rec.tid); own != impl_->stacks.end())
      for (uint64_t t : cause::capture_times(ctx.causes))
        for (const auto& s : own->second)
          if (s.time_ns == t && s.stack.wait_state) cause_stacks.add_capture(rec.tid, t, s.stack);
    for (const auto& w : cause::sample_windows(ctx.causes))
      if (auto sub = impl_->stacks.find(w.tid); sub != impl_->stacks.end())
        for (const auto& s : sub->second)
          if (s.time_ns >= w.from_ns && s.time_ns <= w.to_ns && !s.stack.wait_state)
            cause_stacks.add_sample(w.tid, s.time_ns, s.stack);
  }

  // 1. The stacks this thread collected during the task.
  //    An off-CPU capture weighs the sampling periods it slept (a task
  //    asleep 300 ms names its sleep, not the two preemptions of the
  //    code around it); `samples` stays the number of stacks.
  stack::StackTree tree, on_cpu;
  stack::ModuleTable modules;
  uint32_t stacks = 0;
  auto it = impl_->stacks.find(rec.tid);
  if (it != impl_->stacks.end()) {
    auto& q = it->second;
    for (size_t i = 0; i < q.size(); ++i)
      if (const auto& s = q[i]; s.time_ns >= ctx.begin_ns && s.time_ns <= ctx.end_ns) {
        // Budgets that cost this stack names or lines (issue 26).
        rec.budgets |= s.stack.budgets;
        if (s.rt.python.budget_cut || s.rt.js.budget_cut) rec.budgets |= kBudgetRuntimeCache;
        const stack::ResolvedStack* st = &s.stack;
        stack::ResolvedStack with_runtime;
        if (s.runtime != runtime::RuntimeKind::Native || s.rt.any()) {
          with_runtime = s.stack;
          add_runtime_frames(with_runtime, s.rt, s.runtime, ctx.end_ns, !hang);
          st = &with_runtime;
        }
        tree.add(*st, s.stack.wait_state ? capture_weight(rec.tid, s.time_ns, s.stack.wait_state,
                                                          i + 1 < q.size() ? q[i + 1].time_ns : 0, ctx.begin_ns,
                                                          ctx.end_ns, cfg_.sample_period_ns)
                                         : 1);
        if (!s.stack.wait_state) on_cpu.add(*st);
        ++stacks;
        if (cfg_.keep_samples) rec.sampled.push_back(report::to_sampled(*st, s.time_ns));
      }
    // A finished task's stacks (and those of shorter tasks before it) are
    // no longer needed; a hang keeps them for the task's final report. The
    // last few seconds' stay for a janky frame inside the task, whose
    // record is made when its present is known (app/reporter_frames.cpp).
    if (!hang)
      while (!q.empty() && q.front().time_ns + kFrameGraceNs <= ctx.end_ns) q.pop_front();
  }
  // Its process's stack jobs skipped for want of reporter time since its
  // last record: fewer samples than taken.
  if (auto pb = impl_->pid_budgets.find(rec.proc.pid); pb != impl_->pid_budgets.end()) {
    rec.budgets |= pb->second;
    if (!hang) impl_->pid_budgets.erase(pb);
  }
  rec.samples = stacks;
  if (tree.samples()) {
    rec.heaviest_stack = tree.heaviest_stack();
    rec.stack = structured_path(tree, modules);
    rec.modules = modules.modules();
    // Where the running time went, for `why`: the on-CPU samples' own
    // heaviest path (the tree's may be a sleep that outweighs them).
    stack::ModuleTable unused;
    rec.on_cpu_stack = on_cpu.samples() ? structured_path(on_cpu, unused) : std::vector<StackFrame>{};
  }
  // The runnable's name, from the stack: a runtime marker's callback, or
  // the innermost interpreter frame (markers/naming.h).
  name_runnable_from_stack(rec);
  name_runnable_from_runtime(rec);

  // 2. Where it was off the CPU, and who woke it.
  auto ot = impl_->offcpu.find(rec.tid);
  if (ot != impl_->offcpu.end()) {
    double longest = 0;
    const auto& list = ot->second;
    for (size_t i = 0; i < list.size(); i++) {
      const auto& o = list[i];
      if (o.seq != ctx.seq) continue;
      if (!o.pause_kind.empty()) {
        // Held by its JVM (a GC, a safepoint) for this long, not waiting
        // for its own reasons: said in the record. Without a waker its end
        // is known only for a hang's last capture (asleep still); any other
        // was preempted or woken before its switch-out was traced: short.
        const bool asleep_now = hang && i + 1 == list.size();
        uint64_t until = o.woken_ns > o.time_ns ? o.woken_ns : asleep_now ? std::max(ctx.end_ns, o.time_ns) : o.time_ns;
        double ms = static_cast<double>(until - o.time_ns) / 1e6;
        if (!rec.jvm_pause) rec.jvm_pause = JvmPause{};
        rec.jvm_pause->ms += ms;
        if (ms >= longest || rec.jvm_pause->operation.empty()) {
          if (!o.pause_op.empty() || rec.jvm_pause->operation.empty()) {
            rec.jvm_pause->kind = o.pause_kind;
            rec.jvm_pause->operation = o.pause_op;
          }
          longest = std::max(longest, ms);
        }
      }
      OffCpuInfo info;
      info.state = state_name(o.state);
      info.kernel_stack = o.kstack;
      if (o.woken_ns > o.time_ns) info.duration_ms = static_cast<double>(o.woken_ns - o.time_ns) / 1e6;
      info.off_ns = o.time_ns;
      info.woken_ns = o.woken_ns;
      info.has_waker = o.has_waker;
      info.waker = o.waker;
      rec.off_cpu.push_back(std::move(info));
    }
    if (!hang) std::erase_if(ot->second, [&](const auto& o) { return o.seq <= ctx.seq; });
    // A task preempted a hundred times should not make a record of a
    // hundred entries: keep the longest waits (the ones that explain it).
    constexpr size_t kMaxOffCpu = 8;
    if (rec.off_cpu.size() > kMaxOffCpu) {
      std::stable_sort(rec.off_cpu.begin(), rec.off_cpu.end(),
                       [](const auto& a, const auto& b) { return a.duration_ms > b.duration_ms; });
      rec.off_cpu.resize(kMaxOffCpu);
    }
  }

  // 2b. Why it was not running: slices, identities, the one line.
  cause::PrefetchedIdentities ids(ctx.causes.live, impl_->identities);
  cause::attribute(rec, ctx.causes, ctx.causes_enabled, ids, cause_stacks);
  impl_->task_whys.remember(rec);  // for the janky frames of this task still to come

  // 3. The stack log: for finished tasks, within the quota.
  if (!hang && tree.samples() && cfg_.jank.stacks_enabled()) {
    ProcessKey key{rec.proc.pid, ctx.proc_start_ns};
    Suppressed why;
    const std::string fp = tree.fingerprint();
    const int64_t taken_ms = monotonic_ns() / 1'000'000;
    log::debug("stack fingerprint of pid %d task %llu: %s", rec.proc.pid,
               static_cast<unsigned long long>(ctx.seq), fp.c_str());
    why = quota_->take_stack(key, fp, taken_ms);
    if (why != Suppressed::None) {
      rec.suppressed.push_back(why);
    } else {
      std::string text = "# jankbpf stack log: pid " + std::to_string(rec.proc.pid) + " tid " +
                         std::to_string(rec.tid) + " (" + log::escape_control(rec.proc.name) + ") task of " +
                         std::to_string(rec.duration_ms) + " ms, " + std::to_string(stacks) + " samples" +
                         (tree.samples() != stacks ? ", counted in " + std::to_string(tree.samples()) +
                                                         " sampling periods"
                                                   : std::string()) +
                         "\n" + (rec.why.empty() ? "" : "# why: " + log::escape_control(rec.why) + "\n") +
                         tree.render();
      LogWrite w = logs_->write(LogKind::Stack, rec.proc.pid, text);
      if (w.ok()) {
        rec.external_log.push_back(w.path);
        std::lock_guard lk(mu_);
        stats_.stack_logs++;
      } else {
        quota_->give_back_stack(key, fp, taken_ms);
      }
      rec.log_over_limit |= w.over_limit;
      if (!w.error.empty()) rec.log_error = w.error;
    }
  }

  // 4. The trace, when one is being captured for this task: the record
  // waits for it, parked, while the next jobs run; and so do the records
  // of its process that come after it.
  if (ctx.trace || impl_->parked.holds(rec.proc.pid)) {
    auto wake = [this] {
      {
        std::lock_guard lk(mu_);
        trace_done_ = true;
      }
      cv_.notify_all();
    };
    pid_t pid = rec.proc.pid;
    impl_->parked.park(pid, std::move(rec), std::move(ctx.trace), wake, ParkedRecords::Clock::now());
    emit_parked(false);  // the trace may be saved already
    return;
  }
  write_task(rec);
}

}  // namespace jankbpf
