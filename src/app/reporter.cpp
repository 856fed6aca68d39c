// The reporter's queue and worker thread (app/reporter.h): jobs in, a
// bounded queue, one thread that runs them at a lower priority, parked
// records released as their traces are saved, a stop within its budget.
// The jobs themselves: reporter_jobs.cpp.
#include "app/reporter.h"

#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <unordered_map>

#include "app/reporter_impl.h"
#include "arch/regs.h"
#include "logs/log_dir.h"
#include "logs/quota.h"
#include "runtime/runtime_procs.h"
#include "stack/maps.h"
#include "stack/perf_sample.h"
#include "stack/resolver.h"
#include "util/budget.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/own_clock.h"

namespace jankbpf {
namespace {

// Samples queued for the worker, and every job queued, records included (a
// record is a few KB: this bounds the queue at some hundreds of MB while
// the output cannot be written).
constexpr size_t kMaxQueuedSamples = 4096;
constexpr size_t kMaxQueuedJobs = 65536;

// Stack jobs (samples, off-CPU captures, wakers) wake the worker in batches:
// they are only needed by the time their task's record is made, which
// wakes it at once. One wakeup per 10 ms sample cost more than the unwind.
constexpr size_t kLazyBatch = 32;
constexpr auto kLazyDelay = std::chrono::milliseconds(50);

}  // namespace

// Samples, off-CPU captures and wakers: droppable (bounded, an aid to the
// record) and lazy (batched); everything else is a record or a pin.
bool Reporter::is_stack_job(const Job& job) {
  return std::holds_alternative<SampleJob>(job) || std::holds_alternative<OffCpuJob>(job) ||
         std::holds_alternative<WakerJob>(job);
}

pid_t Reporter::charged_pid(const Job& job) {
  if (auto* j = std::get_if<SampleJob>(&job)) return j->pid;
  if (auto* j = std::get_if<OffCpuJob>(&job)) return static_cast<pid_t>(j->event->hdr.pid);
  // A waker's stack is symbolized from the waker's files.
  if (auto* j = std::get_if<WakerJob>(&job)) return static_cast<pid_t>(j->event.waker_pid);
  if (auto* j = std::get_if<PinJob>(&job)) return j->pid;
  return 0;
}

uint32_t Reporter::uid_of(const Job& job) {
  pid_t pid = charged_pid(job);
  if (auto* j = std::get_if<TaskJob>(&job)) return j->rec.proc.uid;
  if (auto* j = std::get_if<ExitJob>(&job)) pid = j->rec.pid;
  if (auto* j = std::get_if<ForgetJob>(&job)) pid = j->pid;
  if (pid <= 0) return 0;
  std::lock_guard lk(uid_mu_);
  auto it = uids_.find(pid);
  if (it != uids_.end()) return it->second;
  if (uids_.size() >= 65536) uids_.clear();
  struct stat st {};
  // One stat a process, on its first job. A process gone already shares
  // one uid with every other gone one.
  uint32_t uid = ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 ? st.st_uid : UINT32_MAX;
  return uids_.emplace(pid, uid).first->second;
}

bool Reporter::within_time(Job& job, uint32_t uid, bool others_waiting) {
  const pid_t pid = charged_pid(job);
  if (pid <= 0) return true;
  if (impl_->time_buckets.size() >= 65536) impl_->time_buckets.clear();  // a bucket gone is full again
  auto& b = impl_->time_buckets[uid];
  const auto now = std::chrono::steady_clock::now();
  const int64_t elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(now - b.at).count();
  b.ns = std::min(kReporterBurstMs * 1'000'000, b.ns + elapsed / 1000 * kReporterMsPerSec);
  b.at = now;
  if (b.ns > 0 || !others_waiting) return true;
  if (impl_->pid_budgets.size() >= 65536) impl_->pid_budgets.clear();
  impl_->pid_budgets[pid] |= kBudgetReporterTime;
  if (auto* j = std::get_if<SampleJob>(&job)) records_.give(std::move(j->record));
  std::lock_guard lk(mu_);
  stats_.budgets.reporter_time_skipped++;
  return false;
}

Reporter::Reporter(ReporterConfig cfg, Output& out)
    : impl_(std::make_unique<Impl>()),
      python_(std::make_unique<runtime::RuntimeProcesses>()),
      cfg_(std::move(cfg)),
      out_(out) {
  // Causes: where a lock lay, from the unwinder's maps once the process is gone.
  impl_->identities.set_known_maps(
      [](void* r, pid_t pid) { return static_cast<stack::Resolver*>(r)->known_maps(pid); }, &impl_->resolver);
  // Kernel causes: the owner's kernel stack, with the unwinder's kallsyms.
  impl_->identities.set_kallsyms(
      [](void* r) -> const stack::Kallsyms& { return static_cast<stack::Resolver*>(r)->kallsyms(); }, &impl_->resolver);
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
  stats_.budgets.elf_files_cut = rs.elf_files_cut;
  stats_.budgets.modules_refused = rs.modules_refused;
  stats_.budgets.perf_maps_cut = rs.perf_maps_cut;
  stats_.budgets.elf_bytes_max = rs.elf_bytes_high;
}

void Reporter::push(Job job) {
  const bool droppable = is_stack_job(job);
  const uint32_t uid = uid_of(job);
  uint64_t records_dropped = 0;
  bool wake = false;
  {
    std::lock_guard lk(mu_);
    if (droppable && queue_.size() >= kMaxQueuedSamples) {
      stats_.dropped++;
      return;
    }
    // Records wait here only while the output blocks (a reader that
    // stopped reading): past the bound they are dropped, counted, rather
    // than held until memory runs out.
    const bool record = std::holds_alternative<TaskJob>(job) || std::holds_alternative<ExitJob>(job) ||
                        std::holds_alternative<FrameJob>(job) || std::holds_alternative<BatchJob>(job);
    if (record && queue_.size() >= kMaxQueuedJobs) {
      records_dropped = ++stats_.records_dropped;
    } else {
      queue_.emplace_back(std::move(job), uid);
      queued_by_uid_[uid]++;
      if (droppable) {
        if (queue_.size() == urgent_ + 1) lazy_since_ = std::chrono::steady_clock::now();
        wake = queue_.size() - urgent_ == kLazyBatch;
      } else {
        urgent_++;
        wake = true;
      }
    }
  }
  if (records_dropped == 1)
    log::warn("records are being dropped: %zu jobs wait for the output (is its reader stalled?)", kMaxQueuedJobs);
  if (wake) cv_.notify_one();
}

void Reporter::add_perf_sample(std::span<const uint8_t> record) {
  SampleJob job{records_.take(record.size()), {}};
  memcpy(job.record.data(), record.data(), record.size());
  stack::PerfSampleView v;
  if (stack::parse_perf_sample(job.record, cfg_.perf_sample_type, cfg_.regs_mask, v)) {
    job.pid = static_cast<pid_t>(v.pid);
    job.rt = capture_runtime(static_cast<pid_t>(v.pid), static_cast<pid_t>(v.tid), v.time, v.regs,
                             v.stack.first(std::min<size_t>(v.stack.size(), v.stack_dyn_size)));
    pin_sampled(static_cast<pid_t>(v.pid));
  }
  push(std::move(job));
}

// A process first seen in a sample (a lock's owner or a peer, followed for
// a waiting task; watched processes are pinned when their task turns long):
// its maps now, while it lives, for the unwinder. A peer killed right after
// it replied was otherwise unwound without them.
void Reporter::pin_sampled(pid_t pid) {
  constexpr size_t kMaxPinned = 4096;
  {
    std::lock_guard lk(mu_);
    if (pid <= 0 || pinned_.count(pid) || pinned_.size() >= kMaxPinned) return;
    pinned_.insert(pid);
  }
  std::string maps;
  stack::read_small_file("/proc/" + std::to_string(pid) + "/maps", maps, 8u << 20);
  Job pin_job = PinJob{pid, std::move(maps)};
  const uint32_t uid = uid_of(pin_job);
  {
    std::lock_guard lk(mu_);
    if (queue_.size() >= kMaxQueuedJobs) return;
    queue_.emplace_front(std::move(pin_job), uid);
    queued_by_uid_[uid]++;
    urgent_++;
  }
  cv_.notify_one();
}

runtime::RuntimeCapture Reporter::capture_runtime(pid_t pid, pid_t tid, uint64_t sample_ns,
                                                  std::span<const uint64_t> regs, std::span<const uint8_t> stack) {
  runtime::RuntimeCapture rt;
  rt.python = python_->capture(pid, tid, sample_ns);
  const auto kind = python_->kind(pid);
  if (rt.python.status == runtime::PyCapture::Status::None &&
      (kind == runtime::RuntimeKind::V8 || kind == runtime::RuntimeKind::Java)) {
    auto r = decode_user_regs(host_arch().arch, cfg_.regs_mask, regs);
    if (r && r->has_fp && kind == runtime::RuntimeKind::Java) {
      // HotSpot's interpreter keeps its bytecode pointer in r13 (x86_64) or
      // x22 (arm64): the leaf interpreted frame's current bci.
      const int bcp_dwarf = host_arch().arch == Arch::Arm64 ? 22 : 13;
      runtime::NativeStack ns{r->pc, r->sp, r->fp, stack, r->has_lr ? r->lr : 0,
                              (r->dwarf_valid >> bcp_dwarf) & 1 ? r->dwarf[bcp_dwarf] : 0};
      rt.java = python_->capture_java(pid, tid, sample_ns, ns);
    } else if (r && r->has_fp) {
      rt.js = python_->capture_js(pid, sample_ns, runtime::NativeStack{r->pc, r->sp, r->fp, stack});
    }
  }
  if (rt.python.budget_cut || rt.js.budget_cut) {
    std::lock_guard lk(mu_);
    stats_.budgets.runtime_cache_cuts++;
  }
  return rt;
}

void Reporter::add_offcpu(const jb_offcpu_event& e) {
  // Only the valid part of the user stack is copied, into memory left
  // unzeroed: a shallow thread's few KB, not 17 KB written twice a capture.
  // Nothing reads past ustack_bytes (handle(OffCpuJob), capture_runtime).
  std::unique_ptr<jb_offcpu_event> copy(new jb_offcpu_event);
  const size_t ubytes = std::min<size_t>(e.ustack_bytes, sizeof e.ustack);
  memcpy(copy.get(), &e, offsetof(jb_offcpu_event, ustack) + ubytes);
  // Still off the CPU in the task: its runtime frames are where it waits.
  size_t nregs = std::min<size_t>(e.nr_regs, JB_MAX_USER_REGS);
  auto rt = capture_runtime(static_cast<pid_t>(e.hdr.pid), static_cast<pid_t>(e.hdr.tid), 0,
                            std::span<const uint64_t>(reinterpret_cast<const uint64_t*>(copy->regs), nregs),
                            std::span<const uint8_t>(copy->ustack, ubytes));
  push(OffCpuJob{std::move(copy), std::move(rt)});
}

void Reporter::add_waker(const jb_waker_event& e) { push(WakerJob{e}); }

bool Reporter::pin(pid_t pid) {
  std::string maps;
  bool first;
  {
    std::lock_guard lk(mu_);
    first = pinned_.insert(pid).second;
  }
  // One bounded read of a /proc file: cheap enough for the ring thread.
  if (first) stack::read_small_file("/proc/" + std::to_string(pid) + "/maps", maps, 8u << 20);
  // Before this task's first sample is read: it may run a new program.
  python_->check_exec(pid);
  const bool python = python_->look(pid);
  Job pin_job = PinJob{pid, std::move(maps)};
  const uint32_t uid = uid_of(pin_job);
  {
    std::lock_guard lk(mu_);
    if (queue_.size() >= kMaxQueuedJobs) {  // an aid to unwinding, never worth unbounded memory
      stats_.dropped++;
      return python;
    }
    queue_.emplace_front(std::move(pin_job), uid);  // ahead of the samples already queued
    queued_by_uid_[uid]++;
    urgent_++;
  }
  cv_.notify_one();
  return python;
}
void Reporter::report(TaskRecord rec, TaskContext ctx) { push(TaskJob{std::move(rec), std::move(ctx)}); }
void Reporter::emit(ExitRecord rec) { push(ExitJob{std::move(rec)}); }
void Reporter::report_frame(FrameRecord rec, FrameContext ctx) { push(FrameJob{std::move(rec), std::move(ctx)}); }
void Reporter::emit(FrameBatch batch) { push(BatchJob{std::move(batch)}); }
void Reporter::forget(pid_t pid) {
  {
    std::lock_guard lk(mu_);
    pinned_.erase(pid);
  }
  push(ForgetJob{pid});
}

// Freed memory goes back to the system only past this much: a janky
// process's next task needs the same few MB again (its samples' copies,
// the unwinder's state), and trimming them after every task made each of
// its samples refault its pages: 160-172 us of jankbpf CPU per warm sample
// instead of ~30 (bench section 7). The cold start's tens of MB still go.
constexpr size_t kFreeKeptBytes = 4u << 20;

static void give_back_freed_memory() {
  const struct mallinfo2 mi = mallinfo2();
  const bool trim = mi.fordblks > kFreeKeptBytes;
  if (trim) malloc_trim(0);
  log::debug("allocator: %.1f MB free in its arenas (%.1f MB in use)%s", mi.fordblks / 1048576.0,
             mi.uordblks / 1048576.0, trim ? ", given back" : ", kept for the next task");
}

void Reporter::run() {
  // Unwinding and symbolizing (a cold binary costs tens of milliseconds)
  // must not take the CPU from the application being watched: this thread
  // yields to it. The ring-buffer reader keeps its normal priority.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
  static const char* const kJobNames[] = {"unwinding a perf sample", "unwinding an off-CPU capture",
                                          "a waker's stack", "reporting a task", "an exit record",
                                          "forgetting a process", "reading a process's maps",
                                          "reporting a frame", "a batch of frames"};
  static_assert(std::size(kJobNames) == std::variant_size_v<Job>);
  bool trim_due = false;
  // The own clock (a schedstat read) as the last charged job ended: the
  // next job's start while the worker has done nothing since but take it
  // from the queue. A batch of samples costs one read a job, not two.
  std::chrono::steady_clock::time_point clock_at{};
  bool clock_current = false;
  for (;;) {
    Job job;
    uint32_t uid = 0;
    bool others_waiting = false;
    bool hurry;
    {
      // Idle after some work: what it freed goes back to the system (the
      // allocator keeps freed pages of the thread's arena otherwise).
      if (trim_due) {
        bool idle;
        {
          std::lock_guard g(mu_);
          idle = queue_.empty();
        }
        if (idle) {
          give_back_freed_memory();
          trim_due = false;
          clock_current = false;
        }
      }
      std::unique_lock lk(mu_);
      busy_ = "";
      // Parked records keep the thread alive until their traces are saved
      // (the trace keeper finishes them all before the stop) or time is out.
      // Stack jobs alone wait for a batch, a record, or kLazyDelay.
      auto lazy_due = [&] { return lazy_since_ + kLazyDelay; };
      auto ready = [&] {
        const size_t lazy = queue_.size() - urgent_;
        return urgent_ > 0 || lazy >= kLazyBatch || (lazy > 0 && std::chrono::steady_clock::now() >= lazy_due()) ||
               trace_done_ || (stopping_ && (impl_->parked.empty() || hurry_));
      };
      auto deadline = impl_->parked.next_deadline();
      if (queue_.size() > urgent_ && (!deadline || lazy_due() < *deadline)) deadline = lazy_due();
      if (!ready()) clock_current = false;  // waits: the time until the next job is not its own
      if (deadline)
        cv_.wait_until(lk, *deadline, ready);
      else
        cv_.wait(lk, ready);
      trace_done_ = false;
      hurry = hurry_;
    }
    if (emit_parked(hurry)) clock_current = false;
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
      job = std::move(queue_.front().first);
      uid = queue_.front().second;
      queue_.pop_front();
      if (auto q = queued_by_uid_.find(uid); q != queued_by_uid_.end() && --q->second == 0) queued_by_uid_.erase(q);
      // Another uid's jobs wait behind this one.
      others_waiting = queue_.size() > (queued_by_uid_.count(uid) ? queued_by_uid_[uid] : 0);
      const bool stack_job = is_stack_job(job);
      if (!stack_job) urgent_--;
      // Out of time: records still go out, their stacks no longer.
      if (hurry_ && (stack_job || std::holds_alternative<PinJob>(job))) {
        stats_.dropped++;
        continue;
      }
      busy_ = kJobNames[job.index()];
      evicted_ = impl_->evicted;  // read under mu_ by stats()
    }
    // A stack job of a uid out of reporter time is skipped, at no cost,
    // when another uid waits.
    if (!within_time(job, uid, others_waiting)) continue;
    // Charged: the job's own time, not the host's load.
    const bool charged = charged_pid(job) > 0;
    const auto job_start = charged && !clock_current ? util::own_now() : clock_at;  // unread if not charged
    clock_current = false;
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
            } else if constexpr (std::is_same_v<T, ForgetJob>) {
              impl_->resolver.forget(j.pid);
              impl_->pid_budgets.erase(j.pid);
              {
                std::lock_guard ul(uid_mu_);
                uids_.erase(j.pid);
              }
              python_->forget(j.pid);
              std::erase_if(impl_->stacks, [&](auto& kv) { return !kv.second.empty() && kv.second.front().pid == j.pid; });
              std::erase_if(impl_->offcpu, [&](auto& kv) { return !kv.second.empty() && kv.second.front().pid == j.pid; });
              quota_->forget(j.pid);
            } else {
              handle(j);
              trim_due = true;
            }
          },
          job);
    } catch (const std::exception& e) {
      job_failed(e.what());
    } catch (...) {
      job_failed("unknown exception");
    }
    if (charged) {
      // At most a burst of debt: a uid that had the reporter to itself is
      // not shut out for long once someone else needs it.
      clock_at = util::own_now();
      clock_current = true;
      auto& ns = impl_->time_buckets[uid].ns;
      ns -= std::chrono::duration_cast<std::chrono::nanoseconds>(clock_at - job_start).count();
      ns = std::max(ns, -kReporterBurstMs * 1'000'000);
    }
  }
}

bool Reporter::emit_parked(bool all) {
  auto ready = impl_->parked.take_ready(ParkedRecords::Clock::now(), all);
  for (auto& rec : ready) {
    try {
      if (auto* task = std::get_if<TaskRecord>(&rec))
        write_task(*task);
      else
        out_.emit(std::get<ExitRecord>(rec));
    } catch (const std::exception& e) {
      job_failed(e.what());
    }
  }
  return !ready.empty();
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

}  // namespace jankbpf
