// The records jankbpf emits, as plain data. Building them (from kernel
// events and /proc) and rendering them (JSON lines) are separate steps.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include "model/frames.h"
#include "model/kernel_counters.h"
#include "model/marker_info.h"
#include "model/suppressed.h"

namespace jankbpf {

// Where the thread spent a task, in milliseconds; the parts add up to the
// task's duration.
struct StateBreakdown {
  double running_ms = 0;
  double runnable_ms = 0;
  double sleeping_ms = 0;
  double blocked_io_ms = 0;
};

// Who the process is: filled from /proc when the record is made.
struct ProcessIdentity {
  pid_t pid = 0;
  uint32_t uid = 0;
  std::string name;            // process name (group leader comm); the records' bundle_name
  std::string build_id;        // GNU build-id of the executable, hex; the records' bundle_version
  std::string exe;             // path of the executable
  std::string cgroup;          // cgroup v2 path
  std::string container_id;    // the container the cgroup path names, "" if none
};

// One frame of the heaviest stack, Firefox-style: a module index into
// `modules` and an offset, plus the names where they could be found.
struct StackFrame {
  int module_index = -1;  // -1: not in a known module
  uint64_t offset = 0;    // in the module (ELF vaddr), or the pc when no module
  std::string symbol;
  std::string file;
  uint32_t line = 0;
  bool kernel = false, jit = false, inlined = false;
  std::string runtime;  // "python" for an interpreter's frame ("" native)
};

struct WakerInfo {
  pid_t pid = 0, tid = 0;
  std::string comm;
  // Woken from an interrupt (a timer, a device): pid, tid and comm are the
  // task it came in on, and there is no waker's user stack.
  bool in_interrupt = false;
  std::vector<std::string> kernel_stack;  // symbolized, leaf first
  std::vector<std::string> user_stack;    // frame-pointer walk, leaf first: "sym+0xoff (module)"
};

// Where the thread was while it was off the CPU in the task.
struct OffCpuInfo {
  std::string state;                      // "sleeping" / "blocked_io"
  double duration_ms = 0;                 // switch-out to wakeup (0: not woken yet)
  uint64_t off_ns = 0, woken_ns = 0;      // CLOCK_MONOTONIC (0: unknown); for timelines, not in JSON
  std::vector<std::string> kernel_stack;  // symbolized, leaf first
  bool has_waker = false;
  WakerInfo waker;
};

// One sampled stack of a task, for the report renderers (HTML, Perfetto,
// folded): every sample, not just the heaviest path. Not in the JSON line;
// after the fact `jankbpf report` rebuilds it from the stack log.
struct SampledFrame {
  std::string name;    // symbol, else "module+0xOFF"; kernel frames end in "_[k]"
  std::string module;  // file name of the module ("" unknown)
};
struct SampledStack {
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC (0: unknown, rebuilt from a log)
  char wait_state = 0;   // 0: on-CPU; 'S', 'D', 'R': an off-CPU capture in that state
  uint32_t count = 1;
  std::vector<SampledFrame> frames;  // root first
};

// Why a task was not running (src/cause/, README "Why"): its non-running
// time split into slices, each one kind, in the priority order of
// cause::kKinds, summing to running's complement in `state`.
//
// A thread the task waited for (a lock's owner, a peer) and what it did
// meanwhile, as far as it was followed.
struct CauseThread {
  pid_t pid = 0, tid = 0;
  std::string comm;
  bool claim = false;     // named by the waiting process's own memory (glibc's __owner): unverified
  bool verified = false;  // the kernel saw it wake the waiting thread
  // Followed while the task waited (a subject): its state split then, and
  // its samples' heaviest stack.
  bool followed = false;
  double followed_ms = 0;
  StateBreakdown state;
  uint32_t samples = 0;
  std::string function;            // the innermost named frame of its heaviest stack
  std::string file;                // "lock.c:41" where known
  std::vector<std::string> stack;  // its heaviest path, leaf first, a few frames
  // What it waited for itself during the wait (one level on), if it did.
  std::string waited_kind;         // "lock" or "peer"
  std::string waited_syscall;
  uint64_t waited_address = 0;
  std::vector<CauseThread> next;   // 0 or 1: the thread it waited for
};

// A task that ran on the CPU the thread queued on.
struct CpuTaskInfo {
  pid_t pid = 0, tid = 0;
  std::string comm;
  double ms = 0;
};

struct CauseSlice {
  std::string kind;    // cause::kKinds
  double ms = 0;
  uint32_t count = 0;  // stretches of time merged in it (0: a kind's remainder past the slots)
  std::string syscall; // the one it slept in ("" none)
  std::string state;   // "sleeping" / "blocked_io" for the asleep kinds
  // lock: the futex word's address, where it lies, its owner (a claim) and
  // the thread that woke the waiter (verified by the kernel).
  bool has_address = false;
  uint64_t address = 0;
  std::string address_where;  // "lock_app+0x4040", "[heap]", "[anon]"
  std::optional<CauseThread> owner;
  // lock, peer: who woke it; peer: the peer.
  std::optional<CauseThread> waker;
  bool in_interrupt = false;  // woken from an interrupt (never blamed)
  bool waker_unknown = false; // woken before the interrupt text was read (never blamed)
  bool by_kernel = false;     // woken by a kernel thread (never blamed)
  int fd = -1;                // the syscall's file descriptor, where it has one
  std::string fd_path;        // what /proc/PID/fd/N said when the record was made
  // runnable
  uint32_t preempted = 0;
  std::vector<CpuTaskInfo> cpu_tasks;  // top 3 by time
  double cpu_others_ms = 0;
  // throttled
  std::string cgroup;       // the task group's cgroup path, in its hierarchy
  std::string cgroup_fs;    // "cgroup2" or "cgroup (cpu)"
  std::string quota;        // "20000/100000" (v1 cfs_quota_us/cfs_period_us, v2 cpu.max)
  // sleep: the user frame that asked; other: its kernel stack.
  std::string frame;
  std::vector<std::string> kernel_stack;
  bool unattributed = false;  // other: time no evidence covered (unseen switches)
  // fault: the file mapped at the faulting addresses (path, else
  // MAJ:MIN:INODE) and their offset range, where the kernel gives the
  // addresses (x86's page_fault_user); `frame` the code that touched it.
  uint32_t faults = 0;  // distinct faulting addresses seen (0: unknown here)
  std::string file;
  bool has_offsets = false;
  uint64_t offset_lo = 0, offset_hi = 0;  // [lo, hi): pages touched
  // io: the device (of the requests the thread issued, else of the fd's
  // file), and those requests: count, bytes, device latency.
  std::string device;       // "254:0"
  std::string device_name;  // "vda" (/sys/dev/block/M:m/uevent)
  uint32_t requests = 0;
  uint64_t bytes = 0;
  uint32_t requests_done = 0;  // completed while followed: their latency is known
  double device_ms = 0, device_max_ms = 0;
  // reclaim, compaction, kernel_lock (cause/kernel_causes.h): the wall time
  // of such windows in the task, on and off the CPU, and how many (-1: not known)
  double window_ms = -1;
  uint32_t windows = 0;
  // kernel_lock: the lock (address, its name, class and mode), its owner
  // (the lock's own record: `owner`), the owner's kernel stack
  std::string lock_name;   // "mmap_lock", a kernel symbol, "" unknown
  std::string lock_class;  // "rwsem", "mutex", "spinlock", ...
  std::string lock_mode;   // "read", "write", ""
  bool owner_reader_hint = false;  // a reader-owned rwsem: the owner is the last reader, a hint
  std::vector<std::string> owner_kernel_stack;
  std::string owner_stack_missing;  // why there is none
  // reclaim: a memory cgroup's (memcg) or direct (global) reclaim; the memcg's path
  bool memcg_reclaim = false;
};

// A task that reached the threshold: "jank" when it ended, "hang" while it
// is still stuck after the hang threshold.
// What bounded a task: a wait's return to the next wait or marker, a
// marker's span, or a marker's end to the next wait or marker.
enum class Boundary { Syscall, Marker, AfterMarker };
// "syscall", "marker", "after_marker": the records' names for them.
inline const char* boundary_name(Boundary b) {
  return b == Boundary::Marker ? "marker" : b == Boundary::AfterMarker ? "after_marker" : "syscall";
}

// A JVM's own pause that held the thread in the task (issue 29): it was
// stopped at a safepoint -- a GC or another VM operation -- not running
// its code. From its off-CPU stacks and the JVM's state when they were read.
struct JvmPause {
  std::string kind;       // "gc" or "safepoint"
  std::string operation;  // the VM operation ("G1CollectFull"), "" unknown
  double ms = 0;          // off-CPU time of the task spent so
};

struct TaskRecord {
  enum class Kind { Jank, Hang } kind = Kind::Jank;
  int64_t time_ms = 0;  // when the record was made, ms since the epoch
  ProcessIdentity proc;
  pid_t tid = 0;
  std::string thread_name;
  int64_t begin_time_ms = 0;  // ms since the epoch
  int64_t end_time_ms = 0;    // jank only
  uint64_t begin_mono_ns = 0; // CLOCK_MONOTONIC, to line up with traces
  double duration_ms = 0;     // µs precision; for a hang, so far
  uint32_t threshold_ms = 0;
  StateBreakdown state;
  // From the wakeup that ended the wait to the wait's return: how long the
  // thread waited for a CPU before the task could start (not part of it).
  double delivery_ms = 0;
  std::string wait_syscall;
  Boundary boundary = Boundary::Syscall;
  std::string runnable_name;         // marker tasks: what ran
  std::optional<MarkerInfo> marker;  // marker tasks: which marker
  uint64_t task_seq = 0;      // per-thread task number
  bool seen_running = false;  // the crossing was detected while it ran
  bool unrecovered = false;   // ended by the thread's exit, not by a wait
  // Began at the switch-in out of a wait the thread was asleep in when
  // jankbpf attached, whose return no trampoline shows (bpf/adopt.bpf.h).
  bool begin_at_switch_in = false;
  // Logs: stack tree file, trace. Paths of the files written for this task.
  std::vector<std::string> external_log;
  bool log_over_limit = false;
  std::string log_error;   // why a log could not be written (I/O), "" if fine
  std::vector<Suppressed> suppressed;  // why no new log (none: logs were written or tried)
  std::string trace_note;  // e.g. saved as text because trace-cmd is missing
  // Stacks.
  std::string heaviest_stack;  // heaviest path (by time), leaf first
  uint32_t samples = 0;        // stacks in the tree (on- and off-CPU)
  double unsampled_ms = 0;     // running time in its sampling window with the clocks off (app/monitor_sampling.cpp)
  std::vector<StackFrame> stack;  // the heaviest path, structured, leaf first
  // The heaviest path of the on-CPU samples alone (not rendered): where
  // `why` says the running time went. Unset: `stack` stands for it.
  std::optional<std::vector<StackFrame>> on_cpu_stack;
  std::vector<std::pair<std::string, std::string>> modules;  // [path, build_id]
  std::vector<OffCpuInfo> off_cpu;
  std::optional<JvmPause> jvm_pause;  // a HotSpot process stopped by its JVM
  std::vector<SampledStack> sampled;  // every sample in the task (renderers only)
  // Issue 26: budgets (util/budget.h bits) that cost this record names,
  // lines or frames, or cost its process records ("budget_exceeded"), and
  // how many of its process's records --record-rate(-uid) did not send
  // since its previous one.
  uint32_t budgets = 0;
  uint64_t records_rate_limited = 0;
  // Why (src/cause/): largest first. `why` is one line naming what to act on.
  std::vector<CauseSlice> cause;
  std::string why;
  bool causes_known = false;  // the kernel side gave causes (off: no `cause`)
};

// A janky frame of a Wayland client (model/frames.h): its timelines and
// verdict, and the stacks of its main thread sampled past its deadline.
struct FrameRecord {
  int64_t time_ms = 0;
  int64_t begin_time_ms = 0, end_time_ms = 0;  // the actual start and end, epoch ms
  ProcessIdentity proc;
  std::string thread_name;
  FrameTiming frame;
  // The causes work (issue 27) names why, where it applies; empty until it
  // does (src/frame/frame_causes.h is the hook).
  std::vector<std::string> why;
  std::string runnable_name;   // the innermost Python/JS function of the heaviest path
  std::string heaviest_stack;
  uint32_t samples = 0;
  std::vector<StackFrame> stack;
  std::vector<std::pair<std::string, std::string>> modules;
  std::vector<SampledStack> sampled;  // renderers only
};

// Every frame measured since the last batch (janky or not), for the sinks
// that count or draw all frames (metrics, report); with who each process is.
struct FrameBatch {
  struct Process {
    std::string comm, exe, container_id;
  };
  std::vector<FrameTiming> frames;
  std::vector<std::pair<pid_t, Process>> procs;  // one per pid in `frames`
};

struct ExitRecord {
  int64_t time_ms = 0;
  pid_t pid = 0;
  std::string name;     // process name (comm); the record's bundle_name
  int exit_code = 0;    // exit status, or 128 + signal
  bool target = false;  // named on the command line (--pid, --comm, -- CMD)
  uint64_t records_rate_limited = 0;  // its records --record-rate(-uid) did not send, since its last record
};

// Issue 26: what the budgets cost, for the summary.
struct RateLimited {
  uint32_t id = 0;       // pid or uid
  std::string name;      // process name, for a pid ("" if gone)
  uint64_t count = 0;    // records not sent
};
struct BudgetCounts {
  uint64_t elf_files_cut = 0;        // ELF files with sections left out (bytes or time budget)
  uint64_t modules_refused = 0;      // ELF files not opened: a process's or everyone's module count
  uint64_t perf_maps_cut = 0;        // perf maps with entries left out
  uint64_t runtime_cache_cuts = 0;   // Python/JavaScript reads cut by their budgets
  uint64_t reporter_time_skipped = 0;  // stack jobs skipped: their uid over its reporter time
  uint64_t elf_bytes_max = 0;        // most ELF bytes held at once
  std::vector<RateLimited> rate_limited_processes, rate_limited_uids;  // the most limited first (20)
};

struct ProgramCost {
  std::string name;
  uint64_t run_cnt = 0;
  uint64_t run_time_ns = 0;
  uint64_t recursion_misses = 0;
};

// Entries userspace tables dropped to stay bounded (issue 10): none is an
// error, each costs some work again or a little precision.
struct CacheEvictions {
  uint64_t processes = 0;       // unwinding sessions (maps, Dwfl, perf map) past 64, least recent
  uint64_t modules = 0;         // ELF modules (symbols, DWARF, CFI) past 1,024, unused ones
  uint64_t symbol_memos = 0;    // a module's 200,000-address memo started over
  uint64_t stack_threads = 0;   // threads' unreported stacks past 4,096 threads (= stacks_evicted)
  uint64_t quota_processes = 0; // quota and duplicate entries past 4,096 processes, inside a window
  uint64_t pending_traces = 0;  // traces whose task record never came, past 1,024
};

struct SummaryRecord {
  int64_t time_ms = 0;
  double elapsed_s = 0;
  KernelCounters kernel;  // as the BPF side counted them (tasks checked, losses, samples)
  uint64_t janks = 0;
  uint64_t hangs = 0;
  uint64_t exits = 0;
  std::string watchdog;
  std::string state_storage;                  // per-thread state: "task_storage" or "hash"
  std::string hooks;                          // waits hooked by "trampoline" or "tracepoint"
  std::vector<std::string> features_missing;  // kernel features a fallback replaced (see --check)
  std::vector<ProgramCost> bpf;  // per-program cost (with kernel.bpf_stats_enabled)
  uint64_t samples_lost = 0;     // perf ring overflows
  uint64_t unsampled_tasks = 0;  // janks and hangs with unsampled_ms
  uint64_t samples_dropped = 0;  // dropped by jankbpf (queue over its bound)
  uint64_t stack_logs = 0;       // stack files written
  uint64_t traces = 0;           // trace files written
  uint64_t suppressed = 0;       // janks reported without new logs (quotas)
  uint64_t failed_jobs = 0;      // reporter jobs that threw and were skipped
  uint64_t records_dropped = 0;  // records dropped: 65,536 jobs waited for a blocked output
  uint64_t stacks_evicted = 0;   // threads whose unreported stacks were dropped (memory bound)
  CacheEvictions evictions;      // what each bounded table dropped to stay bounded
  uint64_t marker_sites = 0;     // probe sites markers were attached at (0: no --marker)
  uint64_t marker_sites_released = 0;  // of those, detached when the processes needing them exited
  uint64_t marker_files_capped = 0;    // marked files left without probes: over the caps
  uint64_t marker_files_refused = 0;   // marked files not attached: not the file mapped
  // Python frames placed in stacks, and places one could not be read.
  uint64_t runtime_frames_read = 0, runtime_frames_unreadable = 0;
  // Wayland frames (issue 28): per process and surface; frame records written.
  std::vector<SurfaceFrameStats> frames;
  uint64_t frame_records = 0;
  uint64_t frame_surfaces_untracked = 0;  // surfaces past the tracker's 1,024
  BudgetCounts budgets;
  double cpu_user_s = 0;
  double cpu_sys_s = 0;
  long max_rss_kb = 0;
};

}  // namespace jankbpf
