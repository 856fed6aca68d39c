#include "bpf/detector.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "arch/arch.h"
#include "bpf/hooks.h"
#include "bpf/libbpf_log.h"
#include "bpf/perf_keeper.h"
#include "bpf/program_select.h"
#include "bpf/test_seams.h"
#include "cause/syscalls.h"
#include "bpf/kernel_windows.h"
#include "jank.skel.h"
#include "jankbpf/events.h"
#include "jankbpf/hooks.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/tracefs.h"

namespace jankbpf {
namespace {

// Words of the tid bitmap (bpf/maps.bpf.h, tid_bits): pid_max bits, read
// from the kernel (4,194,304 at most: 512 KiB); a tid past it is looked up
// in the hash as before, so a wrong or changed value costs speed only.
uint32_t tid_bit_words() {
  constexpr uint64_t kPidMaxLimit = 4u << 20;  // PID_MAX_LIMIT on 64-bit
  uint64_t pid_max = 32768;
  if (FILE* f = fopen("/proc/sys/kernel/pid_max", "re")) {
    unsigned long long v = 0;
    if (fscanf(f, "%llu", &v) == 1 && v > 0) pid_max = std::min<uint64_t>(v, kPidMaxLimit);
    fclose(f);
  }
  return static_cast<uint32_t>((pid_max + 63) / 64);
}

}  // namespace

// Perf events kept for the kernel to close after the exit: the waits' ~40
// tracepoints, the frames' and markers' uprobes. 32 KB of kernel memory; a
// probe past it closes the slow way.
constexpr uint32_t kPerfKeeperSlots = 4096;

void Detector::SkelDeleter::operator()(jank_bpf* s) const { jank_bpf__destroy(s); }
void Detector::LinkDeleter::operator()(bpf_link* l) const { bpf_link__destroy(l); }

// Detaching a syscall tracepoint's perf link waits for grace periods under
// the kernel's event mutex when its close is the event's last: 35-50 ms
// each here, so the 19 of them took most of a second one after another,
// and side by side too (the mutex serializes them); uprobes close the same
// way. So each such event is kept in a map that the kernel releases after
// the exit (bpf/perf_keeper.h), and the link's close only detaches the
// program; events the keeper refused (USDT probes, whose perf events
// libbpf keeps to itself) still close here. A raw tracepoint's link goes
// in about a millisecond; a trampoline's rewrites kernel text (5.5-7.2 s
// for 58 of them in the 6.1 lane under TCG, not measured natively: README,
// Stopping). So the stop starts them first and does the rest of its work
// meanwhile (src/app/monitor.cpp).
//
// Side by side, a worker per link: the waits outside the mutex overlap.
// No worker exits before every link is gone: a detach patches kernel text
// (the tracepoints' static keys), sched_process_exit's call site in
// do_exit among them, and a thread of ours exiting through that very site
// while another CPU patched it was the lockup seen on 6.1 under qemu (RIP
// stuck at do_exit+0x346, the tracepoint's NOP; TCG kept running the stale
// code). Workers wait for each other, then exit.
struct Detector::Detaching {
  struct Link {
    bpf_link* link;
    bool perf_tracepoint;
  };
  std::vector<Link> links;
  std::vector<uint64_t> gone_ns;  // when each link was gone
  uint64_t begin_ns = 0;
  std::atomic<size_t> next{0};
  size_t busy = 0;
  std::mutex mu;
  std::condition_variable all_done;

  void work() {
    for (size_t i; (i = next.fetch_add(1)) < links.size();) {
      bpf_link__destroy(links[i].link);
      gone_ns[i] = monotonic_ns();
    }
    std::unique_lock lock(mu);
    if (--busy == 0) all_done.notify_all();
    all_done.wait(lock, [&] { return busy == 0; });
  }
};

void Detector::begin_detach() {
  if (detaching_ || detached_) return;
  detaching_ = std::make_unique<Detaching>();
  Detaching& d = *detaching_;
  d.begin_ns = monotonic_ns();
  // Perf tracepoints first: theirs is the long wait.
  if (skel_ && skel_->skeleton) {
    for (int i = 0; i < skel_->skeleton->prog_cnt; i++) {
      bpf_link** slot = skel_->skeleton->progs[i].link;
      if (slot && *slot) {
        const bool tp = bpf_program__type(*skel_->skeleton->progs[i].prog) == BPF_PROG_TYPE_TRACEPOINT;
        d.links.push_back({*slot, tp});
        *slot = nullptr;  // the skeleton must not destroy it again
      }
    }
  }
  for (auto& l : extra_links_) d.links.push_back({l.link.release(), l.slow});
  extra_links_.clear();
  if (scan_link_) d.links.push_back({scan_link_.release(), false});
  for (auto* l : marker_links_.take_all()) d.links.push_back({l, false});
  std::stable_partition(d.links.begin(), d.links.end(), [](const Detaching::Link& l) { return l.perf_tracepoint; });
  d.gone_ns.assign(d.links.size(), 0);
  const size_t nworkers = d.links.size();
  d.busy = nworkers;
  for (size_t i = 0; i < nworkers; i++) {
    try {
      detach_workers_.emplace_back([&d] { d.work(); });
    } catch (const std::system_error&) {
      break;  // no thread to spare: finish_detach does the rest
    }
  }
  // Workers that could not be made are not waited for.
  std::lock_guard lock(d.mu);
  d.busy -= nworkers - detach_workers_.size();
  if (d.busy == 0) d.all_done.notify_all();
}

DetachTimes Detector::finish_detach() {
  DetachTimes t;
  if (detached_) return t;
  begin_detach();
  Detaching& d = *detaching_;
  // Links no worker took (none could be made) go here, one by one.
  for (size_t i; (i = d.next.fetch_add(1)) < d.links.size();) {
    bpf_link__destroy(d.links[i].link);
    d.gone_ns[i] = monotonic_ns();
  }
  for (auto& w : detach_workers_) w.join();
  detach_workers_.clear();
  detached_ = true;
  t.links = d.links.size();
  for (size_t i = 0; i < d.links.size(); i++) {
    const double ms = (d.gone_ns[i] - d.begin_ns) / 1e6;
    if (d.links[i].perf_tracepoint) {
      t.perf_tracepoints++;
      t.perf_tracepoints_ms = std::max(t.perf_tracepoints_ms, ms);
    } else {
      t.others_ms = std::max(t.others_ms, ms);
    }
  }
  t.total_ms = (monotonic_ns() - d.begin_ns) / 1e6;
  t.kept = perf_keeper_ ? perf_keeper_->kept() : 0;
  log::debug("detached %zu links in %.0f ms (%zu syscall tracepoints, the last gone after %.0f ms; the others after %.0f ms)",
             t.links, t.total_ms, t.perf_tracepoints, t.perf_tracepoints_ms, t.others_ms);
  return t;
}

// The ring buffers go first so that nothing polls a map being torn down.
Detector::~Detector() {
  rb_.reset();
  captures_rb_.reset();
  frames_rb_.reset();
  finish_detach();
  skel_.reset();
}

std::unique_ptr<Detector> Detector::start(const DetectorConfig& cfg, RecordHandler handler,
                                          FeatureSet* features, std::string* error) {
  capture_libbpf_log();
  std::unique_ptr<Detector> d(new Detector());
  d->handler_ = std::move(handler);
  const uint64_t t0 = monotonic_ns();
  // The kernel's function names only (libbpf parses all of its BTF for CO-RE).
  const KernelFuncs kernel = KernelFuncs::load();
  const uint64_t t1 = monotonic_ns();
  const bool trampolines = probe_trampolines(cfg, kernel, features);
  if (!trampolines && cfg.hooks == HookKind::Trampoline) {
    *error = forced_trampolines_error(*features);
    return nullptr;
  }
  d->probe_tick_rate(features);
  const uint64_t t2 = monotonic_ns();
  if (!d->load_best(cfg, trampolines, kernel, features, error)) return nullptr;
  const uint64_t t3 = monotonic_ns();
  if (d->attach(error)) {
    d->attach_io_hooks(features);
    log::info("start: kernel BTF %.1f ms, trampoline and tick-rate probes %.1f ms, load %.1f ms, attach %.1f ms", (t1 - t0) / 1e6,
               (t2 - t1) / 1e6, (t3 - t2) / 1e6, (monotonic_ns() - t3) / 1e6);
    return d;
  }
  if (!d->trampolines_ || cfg.hooks == HookKind::Trampoline) return nullptr;
  // The probe attached one, yet these did not: say so, take the tracepoints.
  features->set("trampolines", false, *error, "syscall tracepoints");
  if (!d->load_best(cfg, false, kernel, features, error) || !d->attach(error)) return nullptr;
  d->attach_io_hooks(features);
  return d;
}

bool Detector::probe(const DetectorConfig& cfg, FeatureSet* features, std::string* error) {
  capture_libbpf_log();
  Detector d;
  const KernelFuncs kernel = KernelFuncs::load();
  d.probe_tick_rate(features);
  const bool trampolines = probe_trampolines(cfg, kernel, features);
  if (!trampolines && cfg.hooks == HookKind::Trampoline) {
    *error = forced_trampolines_error(*features);
    return false;
  }
  if (!d.load_best(cfg, trampolines, kernel, features, error)) return false;
  d.attach_io_hooks(features);  // attached and let go: a probe
  return true;
}

// --hooks trampoline where the probe found none: what is missing and what
// to ask for instead, rather than the load's bare EPERM.
std::string Detector::forced_trampolines_error(const FeatureSet& features) {
  const Feature* f = features.find("trampolines");
  return "--hooks trampoline: this kernel cannot attach BPF trampolines (fentry/fexit)" +
         (f && !f->detail.empty() ? " (" + f->detail + ")" : std::string()) +
         "; --hooks tracepoint hooks the waits with syscall tracepoints, and --hooks auto (the default) "
         "takes the trampolines where the kernel has them";
}

// Whether to hook the waits with trampolines: by attaching one to the
// arch's ppoll entry point (every arch has ppoll) and detaching it, unless
// told otherwise. (Argument-less syscalls such as getppid have no BTF
// entry for their wrapper.)
bool Detector::probe_trampolines(const DetectorConfig& cfg, const KernelFuncs& kernel, FeatureSet* features) {
  if (cfg.hooks == HookKind::Tracepoint || cfg.hooks == HookKind::RawTracepoint) return false;
  std::string detail;
  bool ok = !disabled_by_env("trampolines");
  if (!ok) detail = "disabled by JANKBPF_DISABLE";
  else ok = probe::trampoline(kernel, syscall_functions(host_arch(), "ppoll")[0], &detail);
  features->set("trampolines", ok, detail, ok ? "" : "syscall tracepoints");
  return ok;
}

// The tick rate lets a short task end without a clock read; unknown, every
// end reads it (correct, ~50 ns dearer on a VM).
void Detector::probe_tick_rate(FeatureSet* features) {
  std::string detail;
  tick_hz_ = probe::tick_rate(&detail);
  features->set("tick_rate", tick_hz_ != 0, detail, tick_hz_ ? "" : "a clock read at every task's end");
}

// Feature probes by loading, best first; every step that fails is recorded
// with what replaces it:
//   timer watchdog (tp_btf + bpf_timer) > scan watchdog (raw_tp + a 5 ms
//     cpu-clock tick walking the threads);
//   per-thread state in task storage, where the timer callback can find the
//     task again (bpf_task_from_pid, 6.2+) > a tid hash;
//   off-CPU captures (bpf_task_pt_regs + a user stack copy in sched_switch)
//     > none.
bool Detector::load_best(const DetectorConfig& cfg, bool trampolines, const KernelFuncs& kernel,
                         FeatureSet* features, std::string* error) {
  std::string why;
  const bool want_offcpu = cfg.offcpu && cfg.early_ns && !disabled_by_env("offcpu_capture");
  bool kfunc = kernel.has("bpf_task_from_pid") && !disabled_by_env("bpf_task_from_pid");
  features->set("bpf_task_from_pid", kfunc,
                kfunc ? "in the kernel's BTF"
                      : disabled_by_env("bpf_task_from_pid") ? "disabled by JANKBPF_DISABLE"
                                                              : "not in the kernel's BTF (6.2+)",
                kfunc ? "" : "per-thread state in a tid hash");
  if (cfg.offcpu && cfg.early_ns && !want_offcpu)
    features->set("offcpu_capture", false, "disabled by JANKBPF_DISABLE", "no stacks of sleeping threads");

  // A wait's return that no hook shows (trampolines; the test seam hides it
  // with tracepoints) needs the attach-time task walk.
  const bool want_adopt = (trampolines || test_seams::hide_returns()) && !disabled_by_env("task_iter");
  const bool want_causes = cfg.causes && !disabled_by_env("causes");
  if (cfg.causes && !want_causes)
    features->set("causes", false, "disabled by JANKBPF_DISABLE", "no `cause` or `why` in records");
  // Causes ride on every plan; only when no plan loads with them are they
  // given up (a kernel without bpf_task_pt_regs, say), plan by plan again.
  std::vector<Plan> plans;
  for (bool causes : {true, false}) {
    if (causes && !want_causes) continue;
    for (WatchdogMode mode : {WatchdogMode::Timer, WatchdogMode::Scan}) {
      if (cfg.watchdog != WatchdogMode::Auto && cfg.watchdog != mode) continue;
      for (bool offcpu : {true, false}) {
        if (offcpu && !want_offcpu) continue;
        for (bool adopt : {true, false}) {
          if (adopt && !want_adopt) continue;
          if (mode == WatchdogMode::Timer && kfunc)
            plans.push_back({mode, true, offcpu, kfunc, trampolines, adopt, causes});
          plans.push_back({mode, false, offcpu, kfunc, trampolines, adopt, causes});
        }
      }
    }
  }
  std::string timer_why, offcpu_why, task_why, adopt_why, causes_why;
  // Frames' programs are extras: a kernel that refuses them still runs the
  // rest. Each plan is tried with them, then (only if that failed) without.
  DetectorConfig no_frames = cfg;
  no_frames.frames = false;
  for (const Plan& p : plans) {
    bool loaded = load(cfg, p, kernel, &why);
    if (!loaded && cfg.frames) {
      const std::string frames_why = why;
      loaded = load(no_frames, p, kernel, &why);
      if (loaded)
        features->set("wayland_frames", false, "its BPF programs do not load here: " + frames_why,
                      "no frame records");
    }
    if (loaded) {
      if (want_causes)
        features->set("causes", p.causes,
                      p.causes ? "slices of non-running time, wakers, CPU thieves, owners and peers" : causes_why,
                      p.causes ? "" : "no `cause` or `why` in records");
      if (want_causes && p.causes) report_kernel_windows(kernel_windows_, features);
      const bool timer = p.mode == WatchdogMode::Timer;
      if (trampolines || test_seams::hide_returns())
        features->set("task_iter", p.adopt,
                      p.adopt ? "threads asleep in a wait at attach begin their next task at the switch-in out of it"
                              : disabled_by_env("task_iter") ? "disabled by JANKBPF_DISABLE" : adopt_why,
                      p.adopt ? "" : "tasks begun at hooked wait returns only (the first task of a thread idle in its wait at attach is not seen)");
      if (cfg.watchdog != WatchdogMode::Scan)
        features->set("bpf_timer", timer, timer ? "tp_btf programs own bpf_timers" : timer_why,
                      timer ? "" : "the scan watchdog (a 5 ms cpu-clock tick)");
      if (timer && kfunc)
        features->set("task_storage", p.state_in_task,
                      p.state_in_task ? "per-thread state on the task_struct" : task_why,
                      p.state_in_task ? "" : "a tid hash");
      if (want_offcpu)
        features->set("offcpu_capture", p.offcpu,
                      p.offcpu ? "user stacks captured at switch-out" : offcpu_why,
                      p.offcpu ? "" : "no stacks of sleeping threads");
      return true;
    }
    if (p.mode == WatchdogMode::Timer && timer_why.empty()) timer_why = why;
    if (p.state_in_task && task_why.empty()) task_why = why;
    if (p.offcpu && offcpu_why.empty()) offcpu_why = why;
    if (p.adopt && adopt_why.empty()) adopt_why = why;
    if (p.causes && causes_why.empty()) causes_why = why;
    log::debug("BPF load (%s watchdog, state in %s, off-CPU %s, %s%s, causes %s) failed: %s",
               p.mode == WatchdogMode::Timer ? "timer" : "scan", p.state_in_task ? "task storage" : "a hash",
               p.offcpu ? "on" : "off", p.trampolines ? "trampolines" : "tracepoints",
               p.adopt ? ", task iterator" : "", p.causes ? "on" : "off", why.c_str());
  }
  *error = why;
  return false;
}

bool Detector::load(const DetectorConfig& cfg, const Plan& plan, const KernelFuncs& kernel, std::string* error) {
  skel_.reset();
  clear_libbpf_log();
  skel_.reset(jank_bpf__open());
  if (!skel_) {
    *error = std::string("cannot open the BPF object: ") + strerror(errno);
    return false;
  }
  auto* ro = skel_->rodata;
  ro->threshold_ns = cfg.threshold_ns;
  ro->hang_ns = cfg.hang_ns;
  ro->ignore_startup_ns = cfg.ignore_startup_ns;
  ro->all_threads = cfg.all_threads;
  ro->filter_pids = cfg.filter_pids;
  ro->filter_comm = !cfg.comm.empty();
  ro->loop_threads_possible = cfg.loop_threads;
  loop_threads_ = cfg.loop_threads;
  strncpy(const_cast<char*>(ro->target_comm), cfg.comm.c_str(), JB_COMM_LEN - 1);
  ro->self_tgid = static_cast<uint32_t>(cfg.self_tgid);
  ro->early_ns = cfg.early_ns;
  ro->sample_period_ns = cfg.sample_period_ns;
  ro->sample_window_ns = cfg.sample_window_ns;
  offcpu_ = plan.offcpu;
  ro->offcpu_enabled = offcpu_;
  ro->offcpu_rate = cfg.offcpu_rate;
  // A uid's captures at once: a quarter of the captures ring, so that one
  // uid's processes all sleeping together cannot fill what every uid shares.
  ro->offcpu_burst_uid = static_cast<uint32_t>(
      std::max<uint64_t>(1, bpf_map__max_entries(skel_->maps.captures) / sizeof(jb_offcpu_event) / 4));
  ro->record_rate = cfg.record_rate;
  ro->record_burst = cfg.record_rate;  // a second's worth
  ro->record_rate_uid = cfg.record_rate_uid;
  ro->record_burst_uid = static_cast<uint32_t>(std::min<uint64_t>(uint64_t{cfg.record_rate_uid} * 10, UINT32_MAX));
  ro->trace_ns = cfg.trace_ns;
  stacks_ = cfg.early_ns != 0;
  markers_ = cfg.markers;
  frames_ = cfg.frames;
  ro->announce_tracked = cfg.markers;
  ro->state_in_task = plan.state_in_task;
  ro->use_task_from_pid = plan.task_from_pid;
  ro->scan_watchdog = plan.mode == WatchdogMode::Scan;
  ro->tick_hz = tick_hz_;
  raw_syscalls_ = raw_syscall_waits(plan.trampolines, plan.mode, cfg.hooks);
  if (cfg.hooks == HookKind::RawTracepoint && !raw_syscalls_ && !plan.trampolines)
    log::warn("--hooks raw-tracepoint: needs x86_64 and the timer watchdog (tp_btf): the waits are hooked by "
              "syscall tracepoints instead");
  for (const TpWait& w : tracepoint_waits()) {
    ro->wait_of_nr[w.nr] = static_cast<uint8_t>(wait_id(w.name) + 1);
    ro->raw_child_of_nr[w.nr] = w.child;
  }
  if (raw_syscalls_) ro->setpgid_nr = static_cast<int32_t>(host_syscall_nr("setpgid"));
  if (plan.adopt) {
    const WaitNumbers nrs = wait_numbers();
    memcpy(const_cast<uint8_t*>(ro->adopt_wait_of_nr), nrs.native, sizeof nrs.native);
    memcpy(const_cast<uint8_t*>(ro->adopt_wait_of_nr32), nrs.compat, sizeof nrs.compat);
    ro->restart_nr = static_cast<uint32_t>(host_syscall_nr("restart_syscall"));
    ro->restart_nr32 = host_arch().arch == Arch::X86_64 ? 0 : 0xffffffffu;  // i386's is 0
    ro->test_hide_adopted_return = !plan.trampolines;  // only the test seam gets here so
  }
  ro->test_hide_switches_to = test_seams::hide_switches_to();
  ro->test_hide_switches_from = test_seams::hide_switches_from();
  causes_ = plan.causes;
  ro->causes_enabled = causes_;
  for (const auto& [nr, cls] : cause::syscall_classes())
    if (nr >= 0 && nr < JB_MAX_SYSCALL_NR) ro->cause_class_of_nr[nr] = cls;
  // The maps that do not hold the state are kept, unused, at one entry;
  // the tid stash holds ~17 KB an entry, preallocated: room for 256
  // threads asleep inside a task at once.
  // A test seam may shrink the maps that fill with the machine's threads.
  const uint32_t cap = test_seams::map_entries() ? test_seams::map_entries() : 16384;
  bpf_map__set_max_entries(skel_->maps.threads, plan.state_in_task ? 1 : cap);
  bpf_map__set_max_entries(skel_->maps.tid_bits, plan.state_in_task ? 1 : tid_bit_words());
  bpf_map__set_max_entries(skel_->maps.timers, cap);
  bpf_map__set_max_entries(skel_->maps.procs, cap);
  bpf_map__set_max_entries(skel_->maps.in_task, plan.mode == WatchdogMode::Scan ? 1024 : 1);
  bpf_map__set_max_entries(skel_->maps.offcpu_stash_tid, plan.offcpu && !plan.state_in_task ? 256 : 1);
  // One token bucket per process capturing now (LRU: an old one just goes).
  bpf_map__set_max_entries(skel_->maps.offcpu_bucket, plan.offcpu && cfg.offcpu_rate ? 4096 : 1);
  bpf_map__set_max_entries(skel_->maps.offcpu_uid_bucket, plan.offcpu && cfg.offcpu_rate ? 1024 : 1);
  const bool record_limits = cfg.record_rate || cfg.record_rate_uid;
  bpf_map__set_max_entries(skel_->maps.record_bucket, record_limits ? 8192 : 1);
  bpf_map__set_max_entries(skel_->maps.uid_bucket, record_limits ? 1024 : 1);
  // Causes: per thread in a task by tid where the state is in the hash
  // (~1.2 KB each, preallocated), and one CPU watch per possible CPU.
  const int ncpus = libbpf_num_possible_cpus();
  bpf_map__set_max_entries(skel_->maps.cause_tid, plan.causes && !plan.state_in_task ? 512 : 1);
  bpf_map__set_max_entries(skel_->maps.cpu_watch, plan.causes && ncpus > 0 ? static_cast<uint32_t>(ncpus) : 1);
  bpf_map__set_max_entries(skel_->maps.subjects, plan.causes && cfg.early_ns ? 256 : 1);
  if (test_seams::one_ring() && !share_one_ring(error)) return false;
  select_programs(skel_.get(), plan.mode, stacks_, offcpu_, markers_, plan.trampolines, raw_syscalls_, plan.adopt,
                  kernel);
  kernel_windows_ = select_kernel_windows(skel_.get(), plan.mode == WatchdogMode::Timer, plan.causes, cfg.kernel_locks);
  configure_frames(skel_.get(), cfg);
  configure_io(skel_.get(), plan.causes);

  if (int err = jank_bpf__load(skel_.get())) {
    std::string why = last_libbpf_line();
    *error = std::string("loading BPF programs failed: ") + strerror(-err) +
             (why.empty() ? "" : " (" + why + ")");
    skel_.reset();
    return false;
  }
  mode_ = plan.mode;
  state_in_task_ = plan.state_in_task;
  trampolines_ = plan.trampolines;
  adopt_ = plan.adopt;
  log::debug("BPF loaded: %s watchdog, per-thread state in %s, off-CPU captures %s, waits by %s, causes %s",
             plan.mode == WatchdogMode::Timer ? "timer" : "scan",
             plan.state_in_task ? "task storage" : "a tid hash", plan.offcpu ? "on" : "off",
             plan.trampolines ? "trampolines" : raw_syscalls_ ? "raw syscall tracepoints" : "syscall tracepoints", plan.causes ? "on" : "off");
  return true;
}

bool Detector::attach(std::string* error) {
  std::string why;
  perf_keeper_ = PerfKeeper::create(kPerfKeeperSlots, &why);
  if (!perf_keeper_) log::debug("%s: perf events close at the stop, one grace period each", why.c_str());
  marker_links_.set_keeper(perf_keeper_.get());
  bpf_program* setpgid = skel_->progs.jb_job_setpgid;
  bpf_program__set_autoattach(setpgid, false);  // a perf event of our own, kept (below)
  if (int err = jank_bpf__attach(skel_.get())) {
    *error = std::string("attaching BPF programs failed: ") + strerror(-err);
    return false;
  }
  if (bpf_program__autoload(setpgid) && !attach_tracepoint(setpgid, "syscalls", "sys_enter_setpgid", error))
    return false;
  if (!trampolines_ && !raw_syscalls_ && !attach_wait_tracepoints(error)) return false;
  bpf_program* prog;
  attached_ = 0;
  bpf_object__for_each_program(prog, skel_->obj) attached_ += bpf_program__autoload(prog);
  if (mode_ == WatchdogMode::Scan && !attach_scan_tick(error)) return false;

  auto handler = [this](std::span<const uint8_t> rec) { handler_(rec); };
  rb_ = RingReader::open(bpf_map__fd(skel_->maps.events), handler, error);
  if (rb_ && !test_seams::one_ring()) captures_rb_ = RingReader::open(bpf_map__fd(skel_->maps.captures), handler, error);
  if (rb_ && frames_) frames_rb_ = RingReader::open(bpf_map__fd(skel_->maps.frames), handler, error);
  if (!rb_ || (!captures_rb_ && !test_seams::one_ring()) || (frames_ && !frames_rb_)) {
    *error = "cannot set up the ring buffers: " + *error;
    return false;
  }
  return true;
}

// The four shared tracepoint programs, on each wait's entry and exit.
bool Detector::attach_wait_tracepoints(std::string* error) {
  for (const TpWait& w : tracepoint_waits()) {
    auto& p = skel_->progs;
    for (bool enter : {true, false}) {
      bpf_program* prog = w.child ? (enter ? p.jb_tp_cwait_enter : p.jb_tp_cwait_exit)
                                  : (enter ? p.jb_tp_wait_enter : p.jb_tp_wait_exit);
      if (!attach_tracepoint(prog, "syscalls", (enter ? "sys_enter_" : "sys_exit_") + w.name, error)) return false;
    }
  }
  return true;
}

bool Detector::attach_tracepoint(bpf_program* prog, const std::string& category, const std::string& name,
                                 std::string* error) {
  std::string why;
  std::optional<uint32_t> slot;
  const int pfd = open_tracepoint_event(category, name, &why);
  bpf_link* link = pfd < 0 ? nullptr : attach_kept(prog, pfd, 0, &slot, &why);
  if (!link) {
    *error = "attaching to " + category + ":" + name + " failed: " + why;
    return false;
  }
  keep_extra(link, !slot);
  return true;
}

bpf_link* Detector::attach_kept(bpf_program* prog, int pfd, uint64_t cookie, std::optional<uint32_t>* slot,
                                std::string* error) {
  if (perf_keeper_) *slot = perf_keeper_->keep(pfd);
  LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = cookie);
  clear_libbpf_log();
  bpf_link* link = bpf_program__attach_perf_event_opts(prog, pfd, &opts);
  if (!link) {
    const int err = errno;
    const std::string line = last_libbpf_line();
    *error = std::string(strerror(err)) + (line.empty() ? "" : " (" + line + ")");
    if (*slot) perf_keeper_->release(**slot);
    *slot = std::nullopt;
    close(pfd);
  }
  return link;
}

void Detector::keep_extra(bpf_link* link, bool slow) {
  extra_links_.push_back({std::unique_ptr<bpf_link, LinkDeleter>(link), slow});
}

// Test seam: the events and captures maps made one 4 MB ring, as before the
// captures had a ring of their own.
bool Detector::share_one_ring(std::string* error) {
  int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "jb_one_ring", 0, 0, 4 << 20, nullptr);
  if (fd < 0) {
    *error = std::string("cannot create the shared ring: ") + strerror(errno);
    return false;
  }
  int err = bpf_map__reuse_fd(skel_->maps.events, fd);
  if (!err) err = bpf_map__reuse_fd(skel_->maps.captures, fd);
  close(fd);  // reuse_fd holds its own copies
  if (err) *error = std::string("cannot share one ring: ") + strerror(-err);
  return !err;
}

// The scan watchdog: one cpu-clock event on the first online CPU, 5 ms
// period, so a crossing is seen within 5 ms wherever the thread is.
bool Detector::attach_scan_tick(std::string* error) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.sample_period = 5'000'000;  // ns of cpu-clock
  for (int cpu = 0; cpu < 4096; cpu++) {
    int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      if (errno == ENODEV || errno == EINVAL) continue;  // offline or absent CPU
      break;
    }
    bpf_link* link = bpf_program__attach_perf_event(skel_->progs.jb_scan, fd);
    if (!link) {
      close(fd);
      break;
    }
    scan_link_.reset(link);
    return true;
  }
  *error = std::string("cannot open the cpu-clock event for the scan watchdog: ") + strerror(errno);
  return false;
}

int Detector::ready_fd() const { return rb_->fd(); }

int Detector::drain() { return rb_->consume(); }

int Detector::captures_fd() const { return captures_rb_ ? captures_rb_->fd() : -1; }

int Detector::drain_captures() { return captures_rb_ ? captures_rb_->consume() : 0; }

bool Detector::add_target(pid_t pid) {
  jb_proc p{};
  p.flags = JB_PROCF_TARGET;
  uint32_t key = static_cast<uint32_t>(pid);
  return bpf_map__update_elem(skel_->maps.procs, &key, sizeof key, &p, sizeof p, BPF_ANY) == 0;
}

int Detector::adopt_waiting() {
  if (!adopt_) return -1;
  bpf_link* link = bpf_program__attach_iter(skel_->progs.jb_adopt, nullptr);
  if (!link) {
    log::warn("cannot walk the threads asleep in a wait (%s): their first task after the attach is not seen",
              strerror(errno));
    return -1;
  }
  // Reading the iterator runs the program over every task; it writes nothing.
  const uint32_t before = __atomic_load_n(&skel_->bss->adopted_nr, __ATOMIC_RELAXED);
  int fd = bpf_iter_create(bpf_link__fd(link));
  if (fd >= 0) {
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
  } else {
    log::warn("cannot walk the threads asleep in a wait (%s): their first task after the attach is not seen",
              strerror(errno));
  }
  bpf_link__destroy(link);
  return fd >= 0 ? static_cast<int>(__atomic_load_n(&skel_->bss->adopted_nr, __ATOMIC_RELAXED) - before) : -1;
}

bool Detector::mark_loop_threads(pid_t pid) {
  if (!loop_threads_) return false;
  uint32_t key = static_cast<uint32_t>(pid);
  jb_proc p{};
  if (bpf_map__lookup_elem(skel_->maps.procs, &key, sizeof key, &p, sizeof p, 0) != 0) p = {};
  // Found by userspace among the targets (--comm: before the kernel side
  // saw one of its threads).
  p.flags |= JB_PROCF_LOOP_THREADS | JB_PROCF_TARGET;
  if (bpf_map__update_elem(skel_->maps.procs, &key, sizeof key, &p, sizeof p, BPF_ANY) != 0) return false;
  __atomic_store_n(&skel_->bss->loop_thread_procs, 1u, __ATOMIC_RELAXED);
  return true;
}

bool Detector::set_eager(pid_t pid, bool on) {
  uint32_t key = static_cast<uint32_t>(pid);
  uint8_t one = 1;
  if (!on) return bpf_map__delete_elem(skel_->maps.eager_pids, &key, sizeof key, 0) == 0;
  return bpf_map__update_elem(skel_->maps.eager_pids, &key, sizeof key, &one, sizeof one, BPF_ANY) == 0;
}

KernelStats Detector::kernel_stats() const { return read_kernel_stats(bpf_map__fd(skel_->maps.stats)); }

std::vector<ProgramStats> Detector::program_stats() const {
  std::vector<ProgramStats> out;
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) {
    int fd = bpf_program__fd(prog);
    if (fd < 0) continue;
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len)) continue;
    out.push_back({bpf_program__name(prog), info.run_time_ns, info.run_cnt, info.recursion_misses});
  }
  return out;
}

int Detector::sample_prog_fd() const {
  return stacks_ ? bpf_program__fd(skel_->progs.jb_sample) : -1;
}

bool Detector::set_irq_text(const std::vector<std::pair<uint64_t, uint32_t>>& chunks, std::string* error,
                            const std::atomic<bool>* stop) {
  if (!causes_) return true;
  uint32_t n = 0;
  for (const auto& [chunk, mask] : chunks) {
    if (stop && stop->load(std::memory_order_relaxed)) {
      *error = "irq_text: stopped";
      return false;  // irq_text_nr stays 0: the BPF side never reads a part-filled map
    }
    if (bpf_map__update_elem(skel_->maps.irq_text, &chunk, sizeof chunk, &mask, sizeof mask, BPF_ANY)) {
      *error = std::string("irq_text: ") + strerror(errno);
      break;
    }
    n++;
  }
  // Last: the BPF side looks at the map only once this is set.
  __atomic_store_n(&skel_->bss->irq_text_nr, n, __ATOMIC_RELEASE);
  return n == chunks.size();
}

int64_t Detector::long_tasks() const {
  return __atomic_load_n(&skel_->bss->long_tasks, __ATOMIC_RELAXED);
}

const char* Detector::watchdog_name() const {
  return mode_ == WatchdogMode::Timer ? "timer" : "scan";
}

}  // namespace jankbpf
