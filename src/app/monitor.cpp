#include "app/monitor.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "arch/regs.h"
#include "bpf/test_seams.h"
#include "stack/maps.h"
#include "jankbpf/events.h"
#include "util/lazy_pages.h"
#include "util/log.h"
#include "util/budget.h"

namespace jankbpf {
namespace {

// epoll tags: small numbers for the fixed fds, pidfds tagged by their fd.
constexpr uint64_t kTagRing = 1ULL << 40, kTagSignal = 2ULL << 40, kTagDeadline = 3ULL << 40,
                   kTagLease = 4ULL << 40, kTagTraceDeadline = 5ULL << 40,
                   kTagCapture = 6ULL << 40, kTagSampler = 7ULL << 40, kTagOffcpuRing = 8ULL << 40,
                   kTagTraceReady = 10ULL << 40;
constexpr uint64_t kTagMask = 0xffULL << 40;
static_assert((Monitor::kTagMarkerUser & kTagMask) == Monitor::kTagMarkerUser);
static_assert((Monitor::kTagJvmProbe & kTagMask) == Monitor::kTagJvmProbe);

// How long the reporter may take to write what is queued once a stop is
// requested (SIGINT, SIGTERM, --duration): the whole stop stays under 1 s.
// When the run ends by itself (the command or every --pid target exited)
// nobody is waiting on it, and the last task's stacks deserve their time;
// a stuck job still cannot keep it going for ever.
// The reporter works beside the detach (most of a second with syscall
// tracepoints, seconds with trampolines under TCG: README, Stopping): half
// a second from the request, at least 100 ms after the last drain.
constexpr std::chrono::milliseconds kStopBudget{500};
constexpr std::chrono::milliseconds kEndBudget{15000};

// How often at most the kernel's loss counters are looked at (DropNotices).
constexpr int kDropCheckMs = 1000;

bool epoll_add(int epfd, int fd, uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

// What the loop's signalfd reads; blocked from the start of run().
sigset_t loop_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGCHLD);
  return mask;
}

}  // namespace

Monitor::Monitor(Options opts, std::unique_ptr<JsonLinesOutput> out)
    : opts_(std::move(opts)), out_(std::move(out)) {
  sinks_.add(*out_);
  if (const char* d = getenv("JANKBPF_TEST_MARKER_ATTACH_DELAY_MS"))
    marker_attach_delay_ms_ = static_cast<uint32_t>(std::min(strtoul(d, nullptr, 10), 60'000ul));
}

// Every return from run() after begin_traces() passes here: the setup
// thread must not outlive the keeper it writes.
Monitor::~Monitor() {
  if (trace_setup_.joinable()) trace_setup_.join();
  irq_text_.cancel();
}

int Monitor::run() {
  started_ns_ = monotonic_ns();
  // 0. The loop's signals are blocked before any thread starts (the report
  //    sink, the lazy-pages server, libraries'): a thread created with them
  //    unblocked would take SIGCHLD, and the command's exit would be missed.
  const sigset_t mask = loop_signals();
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  // 1. Targets named by pid must exist before anything is loaded.
  if (!check_targets()) return kExitUsage;
  //    The report files must be writable before anything is loaded.
  if (!start_report()) return kExitUsage;
  //    Markers name binaries, functions and probes that must exist too.
  if (std::string why; !markers_.plan(opts_.markers, &why)) {
    log::error("%s", why.c_str());
    return kExitUsage;
  }
  // 2. Signals, the deadline and the pidfds go through one epoll set.
  if (!setup_loop()) return kExitFailure;
  //    The metrics port is taken before anything is loaded; a busy port
  //    is an error on stderr, retried, and detection runs without it.
  if (!start_metrics()) return kExitFailure;
  // 3. The command, if any, is forked now and held until we are attached.
  std::string error;
  if (!opts_.command.empty() && !launcher_.spawn(opts_.command, opts_.output_path.empty(), &error)) {
    log::error("%s", error.c_str());
    return kExitFailure;
  }
  // 4. The reporter thread (stacks, logs, output), then the BPF programs,
  //    the stack sampler and the trace recorder.
  ReporterConfig rc;
  rc.jank = opts_.jank;
  rc.regs_mask = reg_table(host_arch().arch).sample_regs_user;
  rc.log_dir = opts_.log_dir;
  rc.log_cap = opts_.log_cap;
  rc.dev = opts_.dev;
  rc.keep_samples = report_ != nullptr;
  rc.sample_period_ns = detector_config(opts_).sample_period_ns;
  reporter_ = std::make_unique<Reporter>(rc, sinks_);
  //    The trace recorder is set up beside the BPF load and finishes after
  //    it: its tracefs writes (making the instance, sizing the buffer,
  //    setting its clock) wait on RCU grace periods, 30-40 ms that would
  //    otherwise hold up the start. No task can pass the trace bound before
  //    it is ready (a task is seen from its begin, after the attach).
  begin_traces();
  if (detector_config(opts_).causes && !test_seams::no_irq_text()) irq_text_.begin();
  if (!(start_detector() && start_stacks() && start_frames())) {
    irq_text_.cancel();
    await_traces();
    launcher_.abandon();
    reporter_->finish();
    return kExitFailure;
  }
  features_.warn_missing();
  announce_attached();
  irq_text_.attach(detector_.get());
  // 5. Release the command now that its first task will be seen.
  if (launcher_.pid() > 0) {
    detector_->add_target(launcher_.pid());
    live_targets_.insert(launcher_.pid());
    if (!launcher_.release(&error)) {
      log::error("%s", error.c_str());
      int status = 127;
      while (!launcher_.reap(&status)) usleep(1000);
      return status;
    }
  }
  start_jvm_probe();
  // Test seam: a reader starved of CPU for a while (README, Tests).
  if (uint32_t ms = test_seams::reader_pause_ms()) usleep(ms * 1000u);
  // 6. Report until told to stop, then save what is pending, detach, and
  //    summarise once every record before the summary is written.
  loop();
  const uint64_t stop_ns = monotonic_ns();
  stopped_ns_ = stop_ns;  // the run's length ends here, not after the detach
  // A reader that stopped reading must not hold up the exit: from here a
  // line waits for it until the stop budget is spent, then is given up.
  out_->wait_for_reader_until(std::chrono::steady_clock::now() + (asked_to_stop_ ? kStopBudget : kEndBudget));
  // The stop, by phase (README, "Stopping"): a trace still to be saved
  // first (trace-cmd reads the instance while the programs still run), then
  // the detach in the background -- the syscall tracepoints' perf events
  // close one grace period after another -- and beside it the drain, the
  // reporter's work and the ftrace instance's removal; a last drain once
  // every program is gone, so every record they wrote is written.
  detector_->drain_captures();
  detector_->drain();
  drain_samples();
  frames_tick(true);  // the frames still waiting for their present: without it
  await_traces();
  // trace-cmd extract of a full buffer can take seconds under load: after a
  // stop request it gets 300 ms, then the text trace is saved instead.
  if (traces_) traces_->shutdown(asked_to_stop_ ? std::chrono::milliseconds(300) : kEndBudget);
  const uint64_t traces_ns = monotonic_ns();
  detector_->begin_detach();
  std::atomic<double> ftrace_ms{0};
  std::thread ftrace_remover;
  if (traces_) ftrace_remover = std::thread([&] { ftrace_ms = traces_->remove_instance(); });
  detector_->drain_captures();
  detector_->drain();
  drain_samples();
  const DetachTimes detach = detector_->finish_detach();
  detector_->drain_captures();
  detector_->drain();
  drain_samples();
  // The budget counts from the stop request, whatever the steps above took.
  const uint64_t drained_ns = monotonic_ns();
  const auto spent = std::chrono::milliseconds((drained_ns - stop_ns) / 1'000'000);
  const auto budget = std::max(std::chrono::milliseconds(100), (asked_to_stop_ ? kStopBudget : kEndBudget) - spent);
  const bool finished = reporter_->finish(budget);
  if (ftrace_remover.joinable()) ftrace_remover.join();
  const uint64_t done_ns = monotonic_ns();
  log::info("stop: trace %.0f ms, then side by side: detach %.0f ms (%zu links; %zu perf events closed here, the last "
            "gone after %.0f ms; the others after %.0f ms; %zu perf events left for the kernel to close after the exit), "
            "ftrace instance removed in %.0f ms; reporter %.0f ms after that; %.0f ms in all",
            (traces_ns - stop_ns) / 1e6, detach.total_ms, detach.links, detach.perf_tracepoints,
            detach.perf_tracepoints_ms, detach.others_ms, detach.kept, ftrace_ms.load(), (done_ns - drained_ns) / 1e6,
            (done_ns - stop_ns) / 1e6);
  if (!finished) {
    // A job is stuck (a read that never returns, a parser that never ends):
    // a stop request still ends the run. Summarise, detach, and exit
    // without waiting for the thread (nothing may be destroyed under it).
    log::error("the reporter thread is still busy (%s) %lld ms after the run ended: exiting without it",
               reporter_->busy_with().c_str(), static_cast<long long>(budget.count()));
    emit_summary();
    traces_.reset();
    irq_text_.cancel();
    detector_.reset();
    log::status("detached");
    std::_Exit(command_status_ ? *command_status_ : kExitOk);
  }
  emit_summary();
  metrics_server_.reset();
  traces_.reset();  // removes the ftrace instance
  irq_text_.cancel();
  detector_.reset();
  log::status("detached");
  if (command_status_) return *command_status_;
  return kExitOk;
}

bool Monitor::setup_loop() {
  const sigset_t mask = loop_signals();
  signal(SIGPIPE, SIG_IGN);  // a closed stdout shows up as EPIPE instead
  signals_.reset(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!signals_ || !epoll_ || !epoll_add(epoll_.get(), signals_.get(), kTagSignal)) {
    log::error("cannot set up the event loop: %s", strerror(errno));
    return false;
  }
  if (opts_.duration_s) {
    deadline_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    itimerspec its{};
    auto ns = static_cast<int64_t>(*opts_.duration_s * 1e9);
    its.it_value.tv_sec = ns / 1'000'000'000;
    its.it_value.tv_nsec = ns % 1'000'000'000;
    if (!deadline_ || timerfd_settime(deadline_.get(), 0, &its, nullptr) ||
        !epoll_add(epoll_.get(), deadline_.get(), kTagDeadline)) {
      log::error("cannot set up --duration: %s", strerror(errno));
      return false;
    }
  }
  // A pidfd per --pid target: its exit is noticed even if no BPF record
  // comes (it exited before we attached, or the record was lost).
  for (pid_t pid : opts_.pids) {
    int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) {
      if (errno == ESRCH) {
        log::error("--pid %d: no such process", pid);
        return false;
      }
      continue;  // older kernel: the BPF exit record still ends the run
    }
    pidfd_owners_.emplace_back(fd);
    pidfds_[fd] = pid;
    epoll_add(epoll_.get(), fd, static_cast<uint64_t>(fd));
    live_targets_.insert(pid);
  }
  return true;
}

bool Monitor::start_detector() {
  DetectorConfig cfg = detector_config(opts_);
  std::string error;
  detector_ = Detector::start(cfg, [this](std::span<const uint8_t> rec) { on_record(rec); },
                              &features_, &error);
  if (!detector_) {
    log::error("%s", error.c_str());
    return false;
  }
  for (pid_t pid : opts_.pids)
    if (!detector_->add_target(pid)) {
      log::error("--pid %d: no room for it in the procs map: %s", pid, strerror(errno));
      return false;
    }
  if (metrics_)
    metrics_->set_live([d = detector_.get(), r = reporter_.get()] {
      auto ks = d->kernel_stats();
      return MetricsLive{ks.ringbuf_drops, ks.tasks, r->stats().records_dropped, ks.records_rate_limited};
    });
  if (!attach_markers()) return false;
  //    With trampolines, the targets' threads already asleep in a wait: no
  //    trampoline shows that wait's return, so their next task begins at
  //    the switch-in out of it (bpf/adopt.bpf.h).
  if (int n = detector_->adopt_waiting(); n >= 0)
    log::info("%d thread%s asleep in a wait at attach: %s next task begins at the switch-in out of it", n,
              n == 1 ? "" : "s", n == 1 ? "its" : "their");
  if (!epoll_add(epoll_.get(), detector_->ready_fd(), kTagRing) ||
      (detector_->captures_fd() >= 0 && !epoll_add(epoll_.get(), detector_->captures_fd(), kTagOffcpuRing))) {
    log::error("cannot watch the ring buffers: %s", strerror(errno));
    return false;
  }
  return true;
}

bool Monitor::start_stacks() {
  if (detector_->sample_prog_fd() < 0) return true;
  PerfSamplerConfig pc;
  pc.period_ns = uint64_t{opts_.sample_period_ms} * 1'000'000;
  pc.stack_bytes = opts_.stack_bytes;
  pc.regs_mask = reg_table(host_arch().arch).sample_regs_user;
  pc.bpf_prog_fd = detector_->sample_prog_fd();
  pc.ring_pages = ring_pages_for(pc.stack_bytes, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  std::string error;
  if (disabled_by_env("perf_sampling")) error = "disabled by JANKBPF_DISABLE";
  if (!error.empty() || !sampler_.open(pc, &error)) {
    // Janks are still measured; the summary and stderr say what is missing.
    features_.set("perf_sampling", false, error, "janks without on-CPU stacks");
    return true;
  }
  features_.set("perf_sampling", true, "cpu-clock events with user registers and stack");
  std::string lazy_why;
  if (!util::LazyPages::get().available(&lazy_why))
    features_.set("lazy_dwarf", false, lazy_why, "each binary's DWARF copied whole when first needed");
  // The reporter parses samples with the sampler's sample_type.
  reporter_->set_perf_sample_type(sampler_.sample_type());
  size_t i = 0;
  for (int fd : sampler_.fds()) epoll_add(epoll_.get(), fd, kTagSampler | i++);
  lease_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!lease_ || !epoll_add(epoll_.get(), lease_.get(), kTagLease)) {
    log::error("cannot set up the sampling lease: %s", strerror(errno));
    return false;
  }
  sampling_ = true;
  log::info("stacks: %u-byte samples every %u ms from %u ms into a task%s", opts_.stack_bytes,
            opts_.sample_period_ms, opts_.threshold_ms / 3,
            detector_->offcpu_enabled() ? ", off-CPU captures on" : "");
  return true;
}

void Monitor::begin_traces() {
  if (!opts_.jank.trace_enabled()) return;
  // On demand, the recorder holds on past a task's early mark or crossing
  // for as long as the task takes to reach the trace bound from there, and
  // a second more.
  RecorderOptions recorder;
  recorder.on_demand = !opts_.trace_always;
  recorder.hold_ns = (uint64_t{opts_.trace_threshold_ms} + 1000) * 1'000'000;
  traces_ = std::make_unique<TraceKeeper>(*reporter_, CaptureOptions{}, recorder);
  trace_ready_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (trace_ready_) epoll_add(epoll_.get(), trace_ready_.get(), kTagTraceReady);
  const uint32_t delay_ms = test_seams::trace_setup_delay_ms();
  trace_setup_ = std::thread([this, delay_ms] {
    if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    traces_ok_ = traces_->start(&traces_error_);
    if (trace_ready_) (void)!eventfd_write(trace_ready_.get(), 1);
  });
}

void Monitor::await_traces() {
  if (!trace_setup_.joinable()) return;
  trace_setup_.join();
  if (trace_ready_) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, trace_ready_.get(), nullptr);
  trace_ready_.reset();
  finish_traces();
}

// A watched task is long: an on-demand recorder records from now on. While
// the recorder is still being set up (a task long that soon after the
// attach) the wish waits for it in finish_traces, not the loop.
void Monitor::want_trace_recording(pid_t pid, uint64_t proc_start_ns) {
  if (!traces_) return;
  if (trace_setup_.joinable()) {
    trace_wanted_ = true;  // no trace can have spent a quota yet
    return;
  }
  if (traces_ok_) traces_->want_recording(pid, proc_start_ns);
}

void Monitor::finish_traces() {
  if (!traces_) return;
  std::string where;
  bool have = probe::trace_cmd(&where);
  features_.set("trace_cmd", have, where, have ? "" : "traces saved as text");
  features_.warn_missing("trace_cmd");
  if (!traces_ok_) {
    // Janks are still reported; their records say why there is no trace.
    features_.set("ftrace_instance", false, traces_error_, "janks without traces");
    features_.warn_missing("ftrace_instance");
    return;
  }
  epoll_add(epoll_.get(), traces_->deadline_fd(), kTagTraceDeadline);
  if (trace_wanted_) traces_->want_recording();
}

void Monitor::loop() {
  epoll_event events[16];
  while (running_) {
    // No timeout: an idle machine must not wake jankbpf. The kernel's loss
    // counters are looked at when something arrives (a full ring means
    // records were arriving), at most once a second, and in the summary.
    int n = epoll_wait(epoll_.get(), events, 16, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("epoll_wait: %s", strerror(errno));
      return;
    }
    if (monotonic_ns() - drops_checked_ns_ >= kDropCheckMs * 1'000'000ull) {
      drops_checked_ns_ = monotonic_ns();
      drop_notices_.check(detector_->kernel_stats());
    }
    for (int i = 0; i < n; i++) {
      uint64_t tag = events[i].data.u64;
      switch (tag & kTagMask) {
        case kTagRing:
          detector_->drain();
          break;
        case kTagOffcpuRing:
          detector_->drain_captures();
          break;
        case kTagSignal: {
          signalfd_siginfo si;
          while (read(signals_.get(), &si, sizeof si) == sizeof si) {
            if (si.ssi_signo == SIGCHLD) {
              int status;
              if (launcher_.reap(&status)) {
                command_status_ = status;
                detector_->drain();  // its exit record
                stop();
              }
            } else if (si.ssi_signo == SIGHUP && out_->is_file()) {
              // logrotate's postrotate: the next line goes to a new file.
              std::string why;
              if (out_->reopen(&why)) log::info("SIGHUP: reopened the output file");
              else log::warn("SIGHUP: %s; still writing to the old file", why.c_str());
            } else {
              // SIGINT, SIGTERM, and SIGHUP on stdout (the terminal hung up).
              log::info("signal %u: stopping", si.ssi_signo);
              asked_to_stop_ = true;
              stop();
            }
          }
          break;
        }
        case kTagDeadline:
          asked_to_stop_ = true;
          stop();
          break;
        case kTagLease:
          on_lease();
          break;
        case kTagSampler:
          sampler_.drain(tag & ~kTagMask,
                         [&](std::span<const uint8_t> r) { reporter_->add_perf_sample(r); });
          break;
        case kTagTraceReady:
          await_traces();
          break;
        case kTagTraceDeadline:
          traces_->on_deadline();
          if (int fd = traces_->capture_fd(); fd >= 0 && epoll_add(epoll_.get(), fd, kTagCapture))
            capture_fd_ = fd;
          break;
        case Monitor::kTagJvmProbe:
          probe_jvms();
          break;
        case Monitor::kTagFrames:
        case Monitor::kTagFramesTick:
        case Monitor::kTagFrameSample:
          on_frames_epoll(tag);
          break;
        case Monitor::kTagMarkerUser:
          on_marker_user_gone(static_cast<int>(tag & ~kTagMask));
          break;
        case kTagCapture:
          epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, capture_fd_, nullptr);
          capture_fd_ = -1;
          traces_->on_capture_done();
          break;
        default: {  // a --pid target's pidfd
          int fd = static_cast<int>(tag);
          epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
          detector_->drain();  // the BPF exit record comes before the pidfd wakes
          on_target_gone(pidfds_[fd]);
        }
      }
    }
    if (out_->broken()) {
      log::info("output closed: stopping");
      stop();
    }
  }
}

void Monitor::on_target_gone(pid_t pid) {
  if (!live_targets_.erase(pid)) return;
  if (live_targets_.empty() && !opts_.pids.empty()) {
    log::info("every --pid target has exited");
    stop();
  }
}

void Monitor::on_record(std::span<const uint8_t> rec) {
  if (rec.size() < sizeof(jb_header)) {
    malformed_++;
    return;
  }
  jb_header hdr;
  memcpy(&hdr, rec.data(), sizeof hdr);
  switch (hdr.type) {
    case JB_EV_SAMPLED:  // an eager process's sample: its Python frames now
      drain_samples();
      return;
    case JB_EV_UNARMED:  // its only job was to wake this thread: the switch-in arms a watchdog
      return;
    case JB_EV_TASK_END:
    case JB_EV_HANG:
    case JB_EV_CROSSING:
    case JB_EV_EARLY:
    case JB_EV_TRACE: {
      if (rec.size() < sizeof(jb_task_event)) break;
      jb_task_event e;
      memcpy(&e, rec.data(), sizeof e);
      on_task(e);
      return;
    }
    case JB_EV_FRAME: {
      if (rec.size() < sizeof(jb_frame_event)) break;
      jb_frame_event e;
      memcpy(&e, rec.data(), sizeof e);
      on_frame_event(e);
      return;
    }
    case JB_EV_OFFCPU:
      if (rec.size() < sizeof(jb_offcpu_event)) break;
      reporter_->add_offcpu(*reinterpret_cast<const jb_offcpu_event*>(rec.data()));
      return;
    case JB_EV_WAKER: {
      if (rec.size() < sizeof(jb_waker_event)) break;
      jb_waker_event e;
      memcpy(&e, rec.data(), sizeof e);
      reporter_->add_waker(e);
      return;
    }
    case JB_EV_CAUSE: {  // just before its task's record
      if (rec.size() < sizeof(jb_cause_event)) break;
      jb_cause_event e;
      memcpy(&e, rec.data(), sizeof e);
      // What names its slices, while the process is surely still there.
      cause::prefetch(causes_.add_causes(e).live, e, live_ids_);
      return;
    }
    case JB_EV_SUBJECT: {
      if (rec.size() < sizeof(jb_subject_event)) break;
      jb_subject_event e;
      memcpy(&e, rec.data(), sizeof e);
      causes_.add_subject(e);
      return;
    }
    case JB_EV_TRACKED: {
      if (rec.size() < sizeof(jb_tracked_event)) break;
      jb_tracked_event e;
      memcpy(&e, rec.data(), sizeof e);
      on_tracked(static_cast<pid_t>(e.hdr.pid), static_cast<pid_t>(e.hdr.tid), e.proc_start_ns);
      return;
    }
    case JB_EV_EXIT: {
      if (rec.size() < sizeof(jb_exit_event)) break;
      jb_exit_event e;
      memcpy(&e, rec.data(), sizeof e);
      // What the process left on the other ring and in the perf buffers is
      // unwound before it is forgotten (its maps are gone by then).
      detector_->drain_captures();
      drain_samples();
      ExitRecord exit = builder_.exit(e);
      exit.records_rate_limited = rate_limited_since(static_cast<pid_t>(e.hdr.pid), true);
      reporter_->emit(std::move(exit));
      reporter_->forget(static_cast<pid_t>(e.hdr.pid));
      set_eager(static_cast<pid_t>(e.hdr.pid), false);
      exits_++;
      on_target_gone(static_cast<pid_t>(hdr.pid));
      return;
    }
    default:
      break;
  }
  malformed_++;
}

uint64_t Monitor::rate_limited_since(pid_t pid, bool exited) {
  if (!opts_.record_rate && !opts_.record_rate_uid) return 0;
  const uint64_t now = detector_->records_rate_limited(pid, exited);
  if (rate_limited_seen_.size() >= 65536) rate_limited_seen_.clear();  // processes gone unseen: bounded
  uint64_t& seen = rate_limited_seen_[pid];
  const uint64_t since = now > seen ? now - seen : 0;
  seen = now;
  if (exited) rate_limited_seen_.erase(pid);
  return since;
}

void Monitor::on_task(const jb_task_event& e) {
  switch (e.hdr.type) {
    case JB_EV_EARLY:  // stacks wanted from now on
      keep_sampling(true);
      want_trace_recording(static_cast<pid_t>(e.hdr.pid), e.proc_start_ns);
      if (sampling_ || detector_->offcpu_enabled()) {
        const auto pid = static_cast<pid_t>(e.hdr.pid);
        set_eager(pid, reporter_->pin(pid) && sampling_);
      }
      return;
    case JB_EV_CROSSING:
      log::info("pid %u tid %u crossed the threshold", e.hdr.pid, e.hdr.tid);
      want_trace_recording(static_cast<pid_t>(e.hdr.pid), e.proc_start_ns);
      return;
    case JB_EV_TRACE:
      await_traces();  // at once, should the recorder still be starting
      if (traces_)
        traces_->on_trigger(static_cast<pid_t>(e.hdr.pid), static_cast<pid_t>(e.hdr.tid), e.seq,
                            e.proc_start_ns, e.begin_ns);
      return;
    default:
      break;
  }
  // A jank or a hang: the reporter adds stacks and logs, then writes it.
  // Its off-CPU captures came before it, on their own ring.
  detector_->drain_captures();
  drain_samples();
  Reporter::TaskContext ctx;
  ctx.begin_ns = e.begin_ns;
  ctx.end_ns = e.end_ns;
  ctx.seq = e.seq;
  ctx.proc_start_ns = e.proc_start_ns;
  ctx.causes_enabled = detector_->causes_enabled();
  const bool hang = e.hdr.type == JB_EV_HANG;
  // A hang's causes so far are kept for its task's jank, which gets them all.
  if (ctx.causes_enabled)
    ctx.causes = hang ? causes_.peek(static_cast<pid_t>(e.hdr.tid), e.seq)
                      : causes_.take(static_cast<pid_t>(e.hdr.tid), e.seq);
  await_traces();
  if (!hang && traces_) ctx.trace = traces_->take(static_cast<pid_t>(e.hdr.tid), e.seq);
  TaskRecord rec = builder_.task(e, ctx.exe);
  if ((rec.records_rate_limited = rate_limited_since(rec.proc.pid, false))) rec.budgets |= kBudgetRecordRate;
  rec.unsampled_ms = unsampled_ms(e, rec);
  reporter_->report(std::move(rec), std::move(ctx));
  (hang ? hangs_ : janks_)++;
}

}  // namespace jankbpf
