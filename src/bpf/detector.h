// The kernel side as one object: opens the BPF skeleton, configures it,
// chooses the watchdog by feature probe, loads, attaches, and hands ring
// buffer records to a callback. Destroying it detaches everything.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <span>
#include <string>
#include <vector>

#include "bpf/features.h"
#include "bpf/kernel_funcs.h"
#include "bpf/kernel_stats.h"
#include "bpf/kernel_windows.h"
#include "bpf/marker_links.h"
#include "bpf/modes.h"
#include "bpf/perf_keeper.h"
#include "bpf/ring_reader.h"
#include "util/fd.h"

struct jank_bpf;
struct btf;
struct bpf_link;
struct bpf_program;

namespace jankbpf {

struct DetectorConfig {
  uint64_t threshold_ns = 0;
  uint64_t hang_ns = 0;
  uint64_t ignore_startup_ns = 0;
  bool all_threads = false;
  bool filter_pids = false;  // watch only pids added with add_target()
  std::string comm;          // watch only processes with this name
  // Named targets may be JVMs whose loop threads get watched
  // (mark_loop_threads); without it the kernel side is pruned of the check.
  bool loop_threads = false;
  pid_t self_tgid = 0;
  WatchdogMode watchdog = WatchdogMode::Auto;
  HookKind hooks = HookKind::Auto;
  // Stacks: sampled from early_ns into a task (0: none), one per
  // sample_period_ns, until sample_window_ns into it.
  uint64_t early_ns = 0;
  uint64_t sample_period_ns = 10'000'000;
  uint64_t sample_window_ns = 0;
  bool offcpu = false;  // off-CPU captures (sched_switch stashes, the watchdog sends)
  uint32_t offcpu_rate = 100;  // off-CPU captures a second per process (0: no limit)
  // Long tasks reported a second per process and per uid (0: no limit).
  uint32_t record_rate = 0, record_rate_uid = 0;
  uint64_t trace_ns = 0;  // trace bound (0: no JB_EV_TRACE records)
  bool markers = false;   // load the marker programs (attach_uprobe/attach_usdt)
  // Wayland frames (issue 28): load the libwayland-client programs and the
  // per-thread frame sampler (attach_frames).
  bool frames = false;
  uint64_t frame_interval_ns = 16'666'667;  // until a process's own is known
  uint64_t frame_sample_period_ns = 4'000'000;
  bool causes = true;     // why tasks were not running (bpf/causes.bpf.h)
  bool kernel_locks = true;  // causes' kernel_lock window (off: --no-kernel-locks)
};

// bpf_stats of one program (zero unless kernel.bpf_stats_enabled is set).
// What detaching took (Detector::finish_detach), for the stop's phases.
struct DetachTimes {
  size_t links = 0;
  size_t perf_tracepoints = 0;  // perf events closed here: each one's close waits on grace periods
  double perf_tracepoints_ms = 0;  // from begin_detach to the last of those gone
  double others_ms = 0;            // the rest (raw tracepoints, trampolines, kept perf events' links)
  size_t kept = 0;                 // perf events the kernel closes after the exit (bpf/perf_keeper.h)
  double total_ms = 0;
};

// bpf_stats of one program (zero unless kernel.bpf_stats_enabled is set).
struct ProgramStats {
  std::string name;
  uint64_t run_time_ns = 0;
  uint64_t run_cnt = 0;
  // Runs the kernel skipped: the program was already running on that CPU
  // (bpf_prog_info.recursion_misses; always counted, stats or not).
  uint64_t recursion_misses = 0;
};

using RecordHandler = std::function<void(std::span<const uint8_t> record)>;

class Detector {
 public:
  // Loads and attaches; on failure returns nullptr and says why in *error.
  // What was tried goes into *features (watchdog, state, off-CPU capture).
  static std::unique_ptr<Detector> start(const DetectorConfig& cfg, RecordHandler handler,
                                         FeatureSet* features, std::string* error);
  // Loads without attaching, to fill *features (`--check`).
  static bool probe(const DetectorConfig& cfg, FeatureSet* features, std::string* error);
  ~Detector();
  Detector(const Detector&) = delete;
  Detector& operator=(const Detector&) = delete;

  // Two rings, read apart so small records never wait behind captures:
  // fds that become readable when records are waiting (for epoll), and
  // drains that hand every waiting record to the handler (how many, or
  // -errno). captures_fd() is -1 when the captures share the events ring
  // (test_seams::one_ring). A jank's captures precede it on their ring:
  // drain_captures() before handling it.
  int ready_fd() const;
  int captures_fd() const;
  int drain();
  int drain_captures();
  // Watch this process (with filter_pids), or just report its exit.
  bool add_target(pid_t pid);
  // With trampolines, once after the targets are known: finds the watched
  // threads asleep inside a wait, whose return no trampoline will show, so
  // their next task begins at the switch-in out of it (bpf/adopt.bpf.h).
  // How many this walk found, or -1 when not needed (tracepoints) or not
  // possible (no task iterator: said in the features). Again after a JVM
  // is marked: its loop threads become watched while asleep in epoll.
  int adopt_waiting();
  // Each on-CPU sample of this process is announced at once (JB_EV_SAMPLED)
  // instead of waiting in the perf ring: its Python frames must be read
  // while they still describe the sample. False when the map is full.
  bool set_eager(pid_t pid, bool on);
  // A JVM among the targets: its threads that wait in epoll (NIO selectors)
  // bound tasks like main threads do (cfg.loop_threads). False when the
  // procs map is full or the option is off.
  bool mark_loop_threads(pid_t pid);
  // Markers (cfg.markers): a begin or end program at a function's entry
  // (or return) at file offset `offset` of `binary`, or at a USDT probe,
  // in every process (pid -1). `cookie` is the marker's id and flags.
  // *link: the link's id, for release_marker_links().
  bool attach_uprobe(const std::string& binary, uint64_t offset, bool retprobe, bool begin,
                     uint64_t cookie, std::string* error, uint64_t* link = nullptr);
  bool attach_usdt(const std::string& binary, const std::string& provider, const std::string& name,
                   bool begin, uint64_t cookie, std::string* error, uint64_t* link = nullptr);
  size_t release_marker_links(const std::vector<uint64_t>& ids) { return marker_links_.release(ids); }
  const MarkerLinks& marker_links() const { return marker_links_; }

  // Frames (cfg.frames, bpf/frames.bpf.h): the three uprobes on a
  // libwayland-client file, system-wide; the `frames` ring (its fd, drain);
  // a process's refresh interval; whether userspace drains the ring on a
  // timer (records then wake nobody); the per-thread sampler's filter.
  bool attach_frames(const std::string& library, uint64_t request, uint64_t listener, uint64_t event,
                     pid_t pid, std::string* error);  // pid -1: every process
  int frames_fd() const;
  int drain_frames();
  bool set_frame_interval(pid_t pid, uint64_t ns);
  void set_frames_polled(bool on);
  int frame_sample_prog_fd() const;
  bool frames_loaded() const { return frames_; }
  // Stopping: every link goes from now, in the background, a worker per
  // link; the rings, maps and programs stay readable. A syscall
  // tracepoint's perf event waits on RCU grace periods as it closes, under
  // the kernel's event mutex (one after another: ~40 ms each), so the rest
  // of the stop runs meanwhile. No marker probe attaches from now on.
  void begin_detach();
  // Waits for every link to be gone (begin_detach first, if not yet);
  // what the programs wrote until then is in the rings.
  DetachTimes finish_detach();

  KernelStats kernel_stats() const;
  // Records not sent for --record-rate(-uid), by process (`forget`: its
  // bucket goes, the process exited) and, all of them, by process or uid.
  uint64_t records_rate_limited(pid_t pid, bool forget);
  std::vector<std::pair<uint32_t, uint64_t>> records_rate_limited_all(bool by_uid) const;
  std::vector<ProgramStats> program_stats() const;
  const char* watchdog_name() const;
  // How the waits are hooked: "trampoline", "tracepoint" or "raw_tracepoint".
  const char* hooks_name() const {
    return trampolines_ ? "trampoline" : raw_syscalls_ ? "raw_tracepoint" : "tracepoint";
  }
  // Where per-thread state lives: "task_storage" or "hash".
  const char* state_storage() const { return state_in_task_ ? "task_storage" : "hash"; }
  // The perf_event program that filters on-CPU samples (-1 without stacks).
  int sample_prog_fd() const;
  // Watched threads now inside a task past early_ns (from the mmapped .bss).
  int64_t long_tasks() const;
  bool offcpu_enabled() const { return offcpu_; }
  bool causes_enabled() const { return causes_; }
  // Causes: the kernel text of interrupt and timer code, as (pc >> 8,
  // granule mask) chunks (cause/irq_text.h); wakers whose stacks pass
  // through it are interrupts from then on. Any thread.
  // Stops early (false) once *stop is set.
  bool set_irq_text(const std::vector<std::pair<uint64_t, uint32_t>>& chunks, std::string* error,
                    const std::atomic<bool>* stop = nullptr);
  int programs_attached() const { return attached_; }

 private:
  Detector() = default;
  // One way to load the programs (see load_best for the order tried).
  struct Plan {
    WatchdogMode mode;
    bool state_in_task, offcpu, task_from_pid, trampolines, adopt, causes;
  };
  bool load(const DetectorConfig& cfg, const Plan& plan, const KernelFuncs& kernel, std::string* error);
  bool load_best(const DetectorConfig& cfg, bool trampolines, const KernelFuncs& kernel, FeatureSet* features,
                 std::string* error);
  static bool probe_trampolines(const DetectorConfig& cfg, const KernelFuncs& kernel, FeatureSet* features);
  static std::string forced_trampolines_error(const FeatureSet& features);
  void probe_tick_rate(FeatureSet* features);
  bool attach(std::string* error);
  bool attach_scan_tick(std::string* error);
  bool attach_wait_tracepoints(std::string* error);
  bool attach_tracepoint(bpf_program* prog, const std::string& category, const std::string& name, std::string* error);
  void attach_io_hooks(FeatureSet* features);  // detector_io.cpp
  bool keep_marker_link(bpf_link* link, std::optional<uint32_t> slot, std::string* error, uint64_t* id);
  // Attaches `prog` to the perf event `pfd` (taken over: closed on
  // failure), first keeping the event for the kernel to close after the
  // exit where it can (*slot: where). Null with *error set on failure.
  bpf_link* attach_kept(bpf_program* prog, int pfd, uint64_t cookie, std::optional<uint32_t>* slot,
                        std::string* error);
  // A perf link kept in extra_links_: `slow` when its event closes here.
  void keep_extra(bpf_link* link, bool slow);
  bool share_one_ring(std::string* error);

  struct SkelDeleter { void operator()(jank_bpf* s) const; };
  struct LinkDeleter { void operator()(bpf_link* l) const; };

  // Order matters: links and the ring buffer go before the skeleton.
  std::unique_ptr<jank_bpf, SkelDeleter> skel_;
  std::vector<KernelWindow> kernel_windows_;  // causes' kernel windows found at load
  std::unique_ptr<RingReader> rb_, captures_rb_, frames_rb_;
  struct ExtraLink {
    std::unique_ptr<bpf_link, LinkDeleter> link;
    bool slow;  // a perf event closed here, on grace periods
  };
  std::vector<ExtraLink> extra_links_;  // the wait tracepoints, the frames' uprobes, the I/O hooks
  std::unique_ptr<PerfKeeper> perf_keeper_;  // null: events close the slow way
  std::unique_ptr<bpf_link, LinkDeleter> scan_link_;                 // the scan watchdog's tick
  // begin_detach's workers and what they share.
  std::vector<std::thread> detach_workers_;
  struct Detaching;
  std::unique_ptr<Detaching> detaching_;
  bool detached_ = false;
  MarkerLinks marker_links_;
  RecordHandler handler_;
  WatchdogMode mode_ = WatchdogMode::Auto;
  int attached_ = 0;
  uint32_t tick_hz_ = 0;  // CONFIG_HZ, 0: unknown (every task's end reads the clock)
  bool stacks_ = false, offcpu_ = false, markers_ = false, state_in_task_ = false,
       trampolines_ = false, raw_syscalls_ = false, adopt_ = false, loop_threads_ = false, frames_ = false, causes_ = false;
};

}  // namespace jankbpf
