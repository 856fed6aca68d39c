#include "app/reporter.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "app/parked_records.h"
#include "app/stack_text.h"
#include "arch/regs.h"
#include "logs/log_dir.h"
#include "logs/quota.h"
#include "markers/naming.h"
#include "report/sampled.h"
#include "runtime/interleave.h"
#include "runtime/python_procs.h"
#include "stack/maps.h"
#include "stack/perf_sample.h"
#include "stack/resolver.h"
#include "stack/tree.h"
#include "util/clock.h"
#include "util/log.h"

namespace jankbpf {
namespace {

// Bounds that keep memory finite when stacks arrive faster than they are
// reported (a stuck thread sampled for minutes, thousands of threads).
constexpr size_t kMaxQueuedSamples = 4096;
// Every job queued, records included: a record is a few KB, so this bounds
// the queue at some hundreds of MB while the output cannot be written.
constexpr size_t kMaxQueuedJobs = 65536;
constexpr size_t kMaxStacksPerThread = 2048;
constexpr uint64_t kMaxStackAgeNs = 120'000'000'000ULL;
// Threads with stacks or off-CPU captures kept at once: a thread whose task
// is never reported (short-lived processes in a fork loop) must not keep
// them for good. Past this, the thread with the oldest newest entry goes.
constexpr size_t kMaxStoredThreads = 4096;

const char* state_name(uint32_t st) {
  return st == JB_ST_BLOCKED ? "blocked_io" : st == JB_ST_RUNNABLE ? "runnable" : "sleeping";
}

}  // namespace

struct Reporter::Impl {
  stack::Resolver resolver;
  ParkedRecords parked;  // records waiting for a trace to be saved
  struct Stored {
    uint64_t time_ns;
    pid_t pid;
    stack::ResolvedStack stack;
    // Python frames read at the sample's arrival: placed in the stack when
    // the task is reported, if they were read before it ended.
    runtime::PyCapture python;
    bool python_process = false;
  };
  std::unordered_map<pid_t, std::deque<Stored>> stacks;  // by tid
  struct OffCpu {
    pid_t pid;
    uint64_t seq, time_ns, woken_ns = 0;
    uint32_t state;
    std::vector<std::string> kstack;
    bool has_waker = false;
    WakerInfo waker;
  };
  std::unordered_map<pid_t, std::vector<OffCpu>> offcpu;  // by tid

  uint64_t evicted = 0;  // threads whose stored stacks were dropped unreported

  // Makes room for `tid` in `table` (keyed by tid, values non-empty lists
  // of entries with a time_ns, newest last).
  template <typename Table>
  void make_room(Table& table, pid_t tid, bool count) {
    if (table.size() < kMaxStoredThreads || table.count(tid)) return;
    auto oldest = table.end();
    for (auto it = table.begin(); it != table.end(); ++it)
      if (oldest == table.end() || it->second.empty() ||
          (!oldest->second.empty() && it->second.back().time_ns < oldest->second.back().time_ns))
        oldest = it;
    table.erase(oldest);
    if (count) ++evicted;
  }

  void store(pid_t tid, uint64_t time_ns, stack::ResolvedStack&& s, runtime::PyCapture&& py = {},
             bool python_process = false) {
    make_room(stacks, tid, true);
    auto& q = stacks[tid];
    while (!q.empty() && (q.size() >= kMaxStacksPerThread || time_ns - q.front().time_ns > kMaxStackAgeNs))
      q.pop_front();
    pid_t pid = s.pid;
    q.push_back({time_ns, pid, std::move(s), std::move(py), python_process});
  }
};

Reporter::Reporter(ReporterConfig cfg, Output& out)
    : impl_(std::make_unique<Impl>()),
      python_(std::make_unique<runtime::PythonProcesses>()),
      cfg_(std::move(cfg)),
      out_(out) {
  LogDirOptions lo;
  lo.path = cfg_.log_dir;
  lo.cap_bytes = cfg_.log_cap;
  logs_ = std::make_unique<LogDir>(lo);
  QuotaPolicy qp;
  qp.stack_reports = cfg_.jank.report_times_per_app;
  qp.dev = cfg_.dev;
  quota_ = std::make_unique<ReportQuota>(qp);
  worker_ = std::thread([this] { run(); });
}

Reporter::~Reporter() { finish(); }

bool Reporter::finish(std::chrono::milliseconds budget) {
  std::unique_lock lk(mu_);
  if (!worker_.joinable()) return true;
  stopping_ = true;
  cv_.notify_all();
  if (budget != std::chrono::milliseconds::max()) {
    // Whatever a job is doing (a file on a stalled FUSE mount, a trace
    // never saved), a stop request must end the run within its budget.
    auto start = std::chrono::steady_clock::now();
    if (!done_cv_.wait_until(lk, start + budget * 2 / 3, [&] { return worker_done_; })) {
      hurry_ = true;
      cv_.notify_all();  // parked records stop waiting for their traces
      if (!done_cv_.wait_until(lk, start + budget, [&] { return worker_done_; })) return false;
    }
  }
  lk.unlock();
  worker_.join();
  return true;
}

std::string Reporter::busy_with() {
  std::lock_guard lk(mu_);
  return busy_;
}

ReporterStats Reporter::stats() {
  ReporterStats s;
  {
    std::lock_guard lk(mu_);
    s = stats_;
    s.evicted_threads = evicted_;
  }
  s.quota_evictions = quota_->counts().evicted;
  return s;
}

void Reporter::copy_bounds() {
  evicted_ = impl_->evicted;
  auto rs = impl_->resolver.stats();
  stats_.process_evictions = rs.process_evictions;
  stats_.module_evictions = rs.module_evictions;
  stats_.memo_resets = rs.memo_resets;
}

void Reporter::push(Job job, bool droppable) {
  bool first_drop = false;
  {
    std::lock_guard lk(mu_);
    if (droppable && queue_.size() >= kMaxQueuedSamples) {
      stats_.dropped++;
      return;
    }
    // Records wait here only while the output blocks (a reader that
    // stopped reading): past the bound they are dropped, counted, rather
    // than held until memory runs out.
    const bool record = std::holds_alternative<TaskJob>(job) || std::holds_alternative<ExitJob>(job);
    if (record && queue_.size() >= kMaxQueuedJobs) {
      first_drop = stats_.records_dropped++ == 0;
      if (!first_drop) return;
    } else {
      queue_.push_back(std::move(job));
    }
  }
  if (first_drop) {
    log::warn("records are being dropped: %zu jobs wait for the output (is its reader stalled?)", kMaxQueuedJobs);
    return;
  }
  cv_.notify_one();
}

void Reporter::add_perf_sample(std::vector<uint8_t>&& record) {
  SampleJob job{std::move(record), {}};
  stack::PerfSampleView v;
  if (stack::parse_perf_sample(job.record, cfg_.perf_sample_type, cfg_.regs_mask, v))
    job.python = python_->capture(static_cast<pid_t>(v.pid), static_cast<pid_t>(v.tid), v.time);
  push(std::move(job), true);
}

void Reporter::add_offcpu(const jb_offcpu_event& e) {
  auto copy = std::make_unique<jb_offcpu_event>();
  memcpy(copy.get(), &e, sizeof e);
  // Still off the CPU in the task: its Python frames are where it waits.
  auto py = python_->capture(static_cast<pid_t>(e.hdr.pid), static_cast<pid_t>(e.hdr.tid), 0);
  push(OffCpuJob{std::move(copy), std::move(py)}, true);
}

void Reporter::add_waker(const jb_waker_event& e) { push(WakerJob{e}, true); }

void Reporter::pin(pid_t pid) {
  std::string maps;
  bool first;
  {
    std::lock_guard lk(mu_);
    first = pinned_.insert(pid).second;
  }
  // One bounded read of a /proc file: cheap enough for the ring thread.
  if (first) stack::read_small_file("/proc/" + std::to_string(pid) + "/maps", maps, 8u << 20);
  {
    std::lock_guard lk(mu_);
    if (queue_.size() >= kMaxQueuedJobs) {  // an aid to unwinding, never worth unbounded memory
      stats_.dropped++;
      return;
    }
    queue_.push_front(PinJob{pid, std::move(maps)});  // ahead of the samples already queued
  }
  cv_.notify_one();
}
void Reporter::report(TaskRecord rec, TaskContext ctx) { push(TaskJob{std::move(rec), std::move(ctx)}, false); }
void Reporter::emit(ExitRecord rec) { push(ExitJob{std::move(rec)}, false); }
void Reporter::forget(pid_t pid) {
  {
    std::lock_guard lk(mu_);
    pinned_.erase(pid);
  }
  push(ForgetJob{pid}, false);
}

void Reporter::run() {
  // Unwinding and symbolizing (a cold binary costs tens of milliseconds)
  // must not take the CPU from the application being watched: this thread
  // yields to it. The ring-buffer reader keeps its normal priority.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
  static const char* const kJobNames[] = {"unwinding a perf sample", "unwinding an off-CPU capture",
                                          "a waker's stack", "reporting a task", "an exit record",
                                          "forgetting a process", "reading a process's maps"};
  static_assert(std::size(kJobNames) == std::variant_size_v<Job>);
  for (;;) {
    Job job;
    bool hurry;
    {
      std::unique_lock lk(mu_);
      busy_ = "";
      // Parked records keep the thread alive until their traces are saved
      // (the trace keeper finishes them all before the stop) or time is out.
      auto ready = [&] {
        return !queue_.empty() || trace_done_ || (stopping_ && (impl_->parked.empty() || hurry_));
      };
      if (auto deadline = impl_->parked.next_deadline())
        cv_.wait_until(lk, *deadline, ready);
      else
        cv_.wait(lk, ready);
      trace_done_ = false;
      hurry = hurry_;
    }
    emit_parked(hurry);
    {
      std::unique_lock lk(mu_);
      if (queue_.empty()) {
        if (!stopping_ || !impl_->parked.empty()) continue;
        // stopping, and everything written
        copy_bounds();
        worker_done_ = true;
        done_cv_.notify_all();
        return;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      // Out of time: records still go out, their stacks no longer.
      if (hurry_ && (std::holds_alternative<SampleJob>(job) || std::holds_alternative<OffCpuJob>(job) ||
                     std::holds_alternative<WakerJob>(job) || std::holds_alternative<PinJob>(job))) {
        stats_.dropped++;
        continue;
      }
      busy_ = kJobNames[job.index()];
      copy_bounds();  // read under mu_ by stats()
    }
    // One job's failure (bad_alloc on a hostile ELF, a parser's exception)
    // costs that job, counted, never the run.
    try {
      std::visit(
          [&](auto& j) {
            using T = std::decay_t<decltype(j)>;
            if constexpr (std::is_same_v<T, ExitJob>) {
              if (impl_->parked.holds(j.rec.pid))  // after its parked records
                impl_->parked.park(j.rec.pid, std::move(j.rec), nullptr, nullptr, ParkedRecords::Clock::now());
              else
                out_.emit(j.rec);
            } else if constexpr (std::is_same_v<T, PinJob>) {
              impl_->resolver.prepare(j.pid, host_arch().arch, std::move(j.early_maps));
              python_->check_exec(j.pid);
            } else if constexpr (std::is_same_v<T, ForgetJob>) {
              impl_->resolver.forget(j.pid);
              python_->forget(j.pid);
              std::erase_if(impl_->stacks, [&](auto& kv) { return !kv.second.empty() && kv.second.front().pid == j.pid; });
              std::erase_if(impl_->offcpu, [&](auto& kv) { return !kv.second.empty() && kv.second.front().pid == j.pid; });
              quota_->forget(j.pid);
            } else {
              handle(j);
            }
          },
          job);
    } catch (const std::exception& e) {
      job_failed(e.what());
    } catch (...) {
      job_failed("unknown exception");
    }
  }
}

void Reporter::emit_parked(bool all) {
  for (auto& rec : impl_->parked.take_ready(ParkedRecords::Clock::now(), all)) {
    try {
      if (auto* task = std::get_if<TaskRecord>(&rec))
        write_task(*task);
      else
        out_.emit(std::get<ExitRecord>(rec));
    } catch (const std::exception& e) {
      job_failed(e.what());
    }
  }
}

void Reporter::write_task(const TaskRecord& rec) {
  if (rec.kind != TaskRecord::Kind::Hang && !rec.suppressed.empty()) {
    std::lock_guard lk(mu_);
    stats_.suppressed++;
  }
  out_.emit(rec);
}

void Reporter::job_failed(const char* what) {
  uint64_t n;
  std::string job;
  {
    std::lock_guard lk(mu_);
    n = ++stats_.failed_jobs;
    job = busy_;
  }
  // The first few say what happened; the summary has the count.
  if (n <= 5) log::error("reporter: %s failed: %s (the record or stack is lost; jankbpf goes on)", job.c_str(), what);
}

void Reporter::add_runtime_frames(stack::ResolvedStack& s, const runtime::PyCapture& py, bool python_process,
                                  uint64_t task_end_ns, bool count) {
  runtime::RuntimeFrameStats st;
  runtime::interleave_python(s, py, python_process, task_end_ns, st);
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
  bool py = python_->is_python(in.pid);
  impl_->store(static_cast<pid_t>(v.tid), v.time, std::move(resolved), std::move(j.python), py);
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
  bool py = python_->is_python(in.pid);
  impl_->store(in.tid, e.hdr.time_ns, std::move(resolved), std::move(j.python), py);

  Impl::OffCpu off;
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
  const TaskContext& ctx = j.ctx;
  const bool hang = rec.kind == TaskRecord::Kind::Hang;

  // 1. The stacks this thread collected during the task.
  stack::StackTree tree;
  stack::ModuleTable modules;
  auto it = impl_->stacks.find(rec.tid);
  if (it != impl_->stacks.end()) {
    auto& q = it->second;
    for (const auto& s : q)
      if (s.time_ns >= ctx.begin_ns && s.time_ns <= ctx.end_ns) {
        const stack::ResolvedStack* st = &s.stack;
        stack::ResolvedStack with_python;
        if (s.python_process || s.python.status != runtime::PyCapture::Status::None) {
          with_python = s.stack;
          add_runtime_frames(with_python, s.python, s.python_process, ctx.end_ns, !hang);
          st = &with_python;
        }
        tree.add(*st);
        if (cfg_.keep_samples) rec.sampled.push_back(report::to_sampled(*st, s.time_ns));
      }
    // A finished task's stacks (and those of shorter tasks before it) are
    // no longer needed; a hang keeps them for the task's final report.
    if (!hang)
      while (!q.empty() && q.front().time_ns <= ctx.end_ns) q.pop_front();
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
  }
  // The runnable's name, from the stack: a runtime marker's callback, or
  // the innermost interpreter frame (markers/naming.h).
  name_runnable_from_stack(rec);
  name_runnable_from_runtime(rec);

  // 2. Where it was off the CPU, and who woke it.
  auto ot = impl_->offcpu.find(rec.tid);
  if (ot != impl_->offcpu.end()) {
    for (const auto& o : ot->second) {
      if (o.seq != ctx.seq) continue;
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
      rec.suppressed = std::string(suppressed_name(why));
    } else {
      std::string text = "# jankbpf stack log: pid " + std::to_string(rec.proc.pid) + " tid " +
                         std::to_string(rec.tid) + " (" + log::escape_control(rec.proc.bundle_name) + ") task of " +
                         std::to_string(rec.duration_ms) + " ms, " + std::to_string(tree.samples()) +
                         " samples\n" + tree.render();
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
