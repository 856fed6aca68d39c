// The second half of jankbpf's pipeline, on its own thread: stacks are
// unwound and symbolized here as they arrive (never on the thread that
// reads the ring buffer, so a slow ELF cannot make the kernel drop events),
// kept per thread until the task they belong to is reported, turned into
// the seed's stack tree and log file, and every record is written here in
// the order it was handed over.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "app/pending_trace.h"
#include "cause/evidence.h"
#include "config/jank_config.h"
#include "jankbpf/events.h"
#include "model/records.h"
#include "output/output.h"
#include "proc/process_info.h"
#include "runtime/interleave.h"
#include "sampling/record_pool.h"

namespace jankbpf {
namespace runtime {
class RuntimeProcesses;
}
namespace stack {
struct ResolvedStack;
}

class LogDir;
class ReportQuota;

struct ReporterConfig {
  JankConfig jank;
  uint64_t perf_sample_type = 0;
  uint64_t regs_mask = 0;
  std::string log_dir;
  uint64_t log_cap = 10ull << 20;
  bool dev = false;
  bool keep_samples = false;  // every sample into TaskRecord::sampled (--report, --perfetto, --folded)
  // A long task's sampling period: what one on-CPU sample stands for, to
  // weigh its off-CPU captures (0: each stack counts 1).
  uint64_t sample_period_ns = 0;
};

struct ReporterStats {
  uint64_t dropped = 0;       // samples dropped: queue over its bound
  uint64_t stack_logs = 0;
  uint64_t traces = 0;
  uint64_t suppressed = 0;
  uint64_t failed_jobs = 0;   // jobs that threw (bad_alloc, a parser's error): counted, skipped
  uint64_t records_dropped = 0;  // jank, hang and exit records dropped: queue over its bound
  uint64_t evicted_threads = 0;  // threads whose kept stacks were dropped to bound memory
  uint64_t runtime_frames_read = 0, runtime_frames_unreadable = 0;  // Python frames in stacks
  uint64_t frame_records = 0;  // janky frames written
  // The resolver's and the quota's bounds (the rest of CacheEvictions is
  // filled by the monitor).
  uint64_t process_evictions = 0, module_evictions = 0, memo_resets = 0, quota_evictions = 0;
  // Issue 26's budgets (the rate-limited lists are filled by the monitor).
  BudgetCounts budgets;
};

// The reporter's time a uid's stack jobs (samples, off-CPU captures,
// wakers, pins) may take (issue 26: one process's files being copied held
// up everyone's records): a bucket of kReporterBurstMs refilled at
// kReporterMsPerSec a second; a job of a uid in debt is skipped while
// another uid's jobs wait (its stacks lose those samples, its next record
// says "reporter_time"), so another uid's record waits for at most the
// job running when it came, what is left of the burst, and one more job (a
// pin stops opening files after ResolverOptions::Budgets::parse_time; the
// file it began costs one more open: README's Security). With no one else waiting a uid's
// jobs run whatever its bucket says (at most a burst of debt is kept).
inline constexpr int64_t kReporterMsPerSec = 250, kReporterBurstMs = 500;

class Reporter {
 public:
  Reporter(ReporterConfig cfg, Output& out);
  ~Reporter();  // finishes the queue
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Stacks, as they come, from one thread (the ring reader): a Python
  // thread's frames are read here, on arrival, while the thread is still
  // where the sample shows it.
  void add_perf_sample(std::span<const uint8_t> record);
  void add_offcpu(const jb_offcpu_event& e);
  void add_waker(const jb_waker_event& e);

  // Records, written in this order. A task record gets the stacks its
  // thread collected in [begin, end] (a hang keeps them for the final jank),
  // and, with `trace`, is written once the trace is saved (records after it
  // do not wait: they may come first).
  struct TaskContext {
    uint64_t begin_ns = 0, end_ns = 0, seq = 0, proc_start_ns = 0;
    std::shared_ptr<PendingTrace> trace;
    ExeFile exe;  // its build-id is read by the worker
    cause::Evidence causes;       // the kernel's causes of the task (cause/)
    bool causes_enabled = false;  // the kernel side ran with causes
  };
  void report(TaskRecord rec, TaskContext ctx);
  void emit(ExitRecord rec);
  // Frames (issue 28): a janky frame's record gets the stacks its thread
  // collected in [begin, end] (app/reporter_frames.cpp); every frame goes
  // to the sinks in batches.
  struct FrameContext {
    uint64_t begin_ns = 0, end_ns = 0;
    // The frame sampler's period (0: no frame sampler): what one on-CPU
    // sample of the frame stands for, to weigh its off-CPU captures.
    uint64_t sample_period_ns = 0;
    ExeFile exe;
  };
  void report_frame(FrameRecord rec, FrameContext ctx);
  void emit(FrameBatch batch);
  void forget(pid_t pid);
  // A task of this process turned long: read its maps and open its
  // executable files now, ahead of queued work, while it is alive (it may
  // exit right after the jank, before its samples are unwound). The maps
  // are read here, on the caller's thread, the first time: the job may run
  // seconds later on a slow machine, after a short process has exited.
  // Returns whether the process runs Python (its samples are then wanted
  // at once: Monitor asks the kernel to announce each).
  bool pin(pid_t pid);
  // The same, the maps only, for a process first seen in a sample.
  void pin_sampled(pid_t pid);

  // The sample_type the perf events were opened with (before any sample).
  void set_perf_sample_type(uint64_t t) { cfg_.perf_sample_type = t; }

  // Writes everything queued and stops the thread; then stats() is final.
  // With a budget: past 2/3 of it stacks still queued are dropped (records
  // are still written); past all of it, false, with the thread still
  // running (stuck in a job: busy_with() says which) — the caller must then
  // exit without destroying the reporter.
  bool finish(std::chrono::milliseconds budget = std::chrono::milliseconds::max());
  std::string busy_with();
  ReporterStats stats();
  // The log directory and the quotas, shared with the trace keeper (main
  // thread); both are thread-safe, each with its own lock.
  LogDir& logs() { return *logs_; }
  ReportQuota& quota() { return *quota_; }

 private:
  struct SampleJob { RecordBytes record; runtime::RuntimeCapture rt; pid_t pid = 0; };
  struct OffCpuJob { std::unique_ptr<jb_offcpu_event> event; runtime::RuntimeCapture rt; };
  struct WakerJob { jb_waker_event event; };
  struct TaskJob { TaskRecord rec; TaskContext ctx; };
  struct ExitJob { ExitRecord rec; };
  struct ForgetJob { pid_t pid; };
  struct PinJob { pid_t pid; std::string early_maps; };
  struct FrameJob { FrameRecord rec; FrameContext ctx; };
  struct BatchJob { FrameBatch batch; };
  using Job = std::variant<SampleJob, OffCpuJob, WakerJob, TaskJob, ExitJob, ForgetJob, PinJob, FrameJob, BatchJob>;

  static bool is_stack_job(const Job& job);
  // The process a stack job or pin is for (its uid pays for the time), 0
  // for records.
  static pid_t charged_pid(const Job& job);
  // The uid a job's time is charged to (the owner of /proc/PID of its
  // process, cached; a record's own uid), any thread.
  uint32_t uid_of(const Job& job);
  // Whether the job may run now: a stack job of a uid out of reporter time
  // is skipped (counted: false) while another uid's jobs wait -- with no
  // one else waiting it runs (the reporter is not left idle).
  bool within_time(Job& job, uint32_t uid, bool others_waiting);
  void push(Job job);
  void run();
  void handle(SampleJob& j);
  void handle(OffCpuJob& j);
  void handle(WakerJob& j);
  void handle(TaskJob& j);
  void handle(FrameJob& j);
  // How many sampling periods (`period_ns`) an off-CPU capture of `tid`
  // taken at `time_ns` stands for inside [begin_ns, end_ns], at least 1:
  // the time it slept, until its waker woke it, else until the thread's
  // next stack `next_ns` (0: none; nothing samples a sleeping thread), else
  // until `end_ns` (asleep still, as far as the reporter knows). A
  // preemption (wait R) has no waker: its next stack bounds it, else it
  // counts 1.
  uint32_t capture_weight(pid_t tid, uint64_t time_ns, char wait_state, uint64_t next_ns, uint64_t begin_ns,
                          uint64_t end_ns, uint64_t period_ns) const;
  void handle(BatchJob& j) { out_.emit(j.batch); }
  // The ring thread's read of a sample's runtime frames.
  runtime::RuntimeCapture capture_runtime(pid_t pid, pid_t tid, uint64_t sample_ns, std::span<const uint64_t> regs,
                                          std::span<const uint8_t> stack);
  // Places a sample's Python or JavaScript frames in its stack (counted
  // unless `count` is false: a hang's stacks are counted with the task's jank).
  void add_runtime_frames(stack::ResolvedStack& s, const runtime::RuntimeCapture& rt, runtime::RuntimeKind kind,
                          uint64_t task_end_ns, bool count);
  void job_failed(const char* what);
  bool emit_parked(bool all);  // true if any went out
  void write_task(const TaskRecord& rec);

  struct Impl;  // the resolver and the per-thread stores: worker-only state
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<runtime::RuntimeProcesses> python_;  // found by the worker, read by the ring thread
  ReporterConfig cfg_;
  Output& out_;
  std::unique_ptr<LogDir> logs_;
  std::unique_ptr<ReportQuota> quota_;

  RecordPool records_;  // sample copies: taken by the ring thread, given back by the worker
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Job, uint32_t>> queue_;  // each job with its uid
  std::unordered_map<uint32_t, size_t> queued_by_uid_;  // jobs queued, by uid
  std::mutex uid_mu_;
  std::unordered_map<pid_t, uint32_t> uids_;  // under uid_mu_
  size_t urgent_ = 0;  // queued jobs that are not stack jobs (records, pins)
  std::chrono::steady_clock::time_point lazy_since_;  // the oldest stack job queued alone
  std::unordered_set<pid_t> pinned_;  // maps read by pin(), until forget()
  bool stopping_ = false;
  bool hurry_ = false;      // stopping with little time left: stacks are skipped
  bool trace_done_ = false; // a parked record's trace was saved
  bool worker_done_ = false;
  std::condition_variable done_cv_;
  const char* busy_ = "";   // the job the worker is in, for a stuck exit
  uint64_t evicted_ = 0;    // Impl's count, copied under mu_
  // Impl's eviction counts into stats_ (mu_ held), once the worker is done:
  // the resolver's walk every cached module.
  void copy_bounds();
  ReporterStats stats_;
  std::thread worker_;
};

}  // namespace jankbpf
