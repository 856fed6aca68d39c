#include "app/monitor.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "jankbpf/events.h"
#include "proc/process_info.h"
#include "util/log.h"

namespace jankbpf {
namespace {

// epoll tags: small numbers for the fixed fds, pidfds tagged by their fd.
constexpr uint64_t kTagRing = 1ULL << 40, kTagSignal = 2ULL << 40, kTagDeadline = 3ULL << 40;

bool epoll_add(int epfd, int fd, uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

}  // namespace

Monitor::Monitor(Options opts, std::unique_ptr<JsonLinesOutput> out)
    : opts_(std::move(opts)), out_(std::move(out)) {}

int Monitor::run() {
  started_ns_ = monotonic_ns();
  // 1. Targets named by pid must exist before anything is loaded.
  if (!check_targets()) return kExitUsage;
  // 2. Signals, the deadline and the pidfds go through one epoll set.
  if (!setup_loop()) return kExitFailure;
  // 3. The command, if any, is forked now and held until we are attached.
  std::string error;
  if (!opts_.command.empty() && !launcher_.spawn(opts_.command, &error)) {
    log::error("%s", error.c_str());
    return kExitFailure;
  }
  // 4. Load and attach the BPF programs.
  if (!start_detector()) {
    launcher_.abandon();
    return kExitFailure;
  }
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
  // 6. Report until told to stop, then detach and summarise.
  loop();
  detector_->drain();
  emit_summary();
  detector_.reset();
  log::status("detached");
  if (command_status_) return *command_status_;
  return kExitOk;
}

bool Monitor::check_targets() {
  for (pid_t pid : opts_.pids) {
    if (!process_exists(pid)) {
      log::error("--pid %d: no such process", pid);
      return false;
    }
  }
  return true;
}

bool Monitor::setup_loop() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
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
  DetectorConfig cfg;
  cfg.threshold_ns = uint64_t{opts_.threshold_ms} * 1'000'000;
  cfg.hang_ns = uint64_t{opts_.hang_ms} * 1'000'000;
  cfg.ignore_startup_ns = uint64_t{opts_.ignore_startup_s} * 1'000'000'000;
  cfg.all_threads = opts_.threads == ThreadScope::All;
  cfg.filter_pids = !opts_.pids.empty() || !opts_.command.empty();
  cfg.comm = opts_.comm;
  cfg.self_tgid = getpid();
  cfg.watchdog = opts_.watchdog;

  std::string error;
  detector_ = Detector::start(cfg, [this](std::span<const uint8_t> rec) { on_record(rec); }, &error);
  if (!detector_) {
    log::error("%s", error.c_str());
    return false;
  }
  for (pid_t pid : opts_.pids) detector_->add_target(pid);
  if (!epoll_add(epoll_.get(), detector_->ready_fd(), kTagRing)) {
    log::error("cannot watch the ring buffer: %s", strerror(errno));
    return false;
  }
  const char* scope = opts_.threads == ThreadScope::All ? "all threads" : "main threads";
  std::string what = !opts_.pids.empty()    ? std::to_string(opts_.pids.size()) + " process(es)"
                     : !opts_.comm.empty()  ? "processes named '" + opts_.comm + "'"
                     : !opts_.command.empty() ? "the command"
                                              : "every process";
  log::status("attached: %d BPF programs, watchdog=%s; watching %s of %s, threshold %u ms",
              detector_->programs_attached(), detector_->watchdog_name(), scope, what.c_str(),
              opts_.threshold_ms);
  return true;
}

void Monitor::loop() {
  epoll_event events[16];
  while (running_) {
    int n = epoll_wait(epoll_.get(), events, 16, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("epoll_wait: %s", strerror(errno));
      return;
    }
    for (int i = 0; i < n; i++) {
      uint64_t tag = events[i].data.u64;
      if (tag == kTagRing) {
        detector_->drain();
      } else if (tag == kTagSignal) {
        signalfd_siginfo si;
        while (read(signals_.get(), &si, sizeof si) == sizeof si) {
          if (si.ssi_signo == SIGCHLD) {
            int status;
            if (launcher_.reap(&status)) {
              command_status_ = status;
              detector_->drain();  // its exit record
              stop();
            }
          } else {
            log::info("signal %u: stopping", si.ssi_signo);
            stop();
          }
        }
      } else if (tag == kTagDeadline) {
        stop();
      } else {
        int fd = static_cast<int>(tag);
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
        detector_->drain();  // the BPF exit record comes before the pidfd wakes
        on_target_gone(pidfds_[fd]);
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
    case JB_EV_TASK_END:
    case JB_EV_HANG: {
      if (rec.size() < sizeof(jb_task_event)) break;
      jb_task_event e;
      memcpy(&e, rec.data(), sizeof e);
      out_->emit(builder_.task(e));
      (hdr.type == JB_EV_HANG ? hangs_ : janks_)++;
      return;
    }
    case JB_EV_CROSSING: {
      if (rec.size() < sizeof(jb_task_event)) break;
      log::info("pid %u tid %u crossed the threshold", hdr.pid, hdr.tid);
      return;
    }
    case JB_EV_EXIT: {
      if (rec.size() < sizeof(jb_exit_event)) break;
      jb_exit_event e;
      memcpy(&e, rec.data(), sizeof e);
      out_->emit(builder_.exit(e));
      exits_++;
      on_target_gone(static_cast<pid_t>(hdr.pid));
      return;
    }
    default:
      break;
  }
  malformed_++;
}

void Monitor::emit_summary() {
  SummaryRecord s;
  s.time_ms = clock_.now_ms();
  s.elapsed_s = static_cast<double>(monotonic_ns() - started_ns_) / 1e9;
  auto ks = detector_->kernel_stats();
  s.tasks_checked = ks.tasks;
  s.janks = janks_;
  s.hangs = hangs_;
  s.exits = exits_;
  s.lost_events = ks.ringbuf_drops;
  s.threads_untracked = ks.threads_map_full;
  s.timer_failures = ks.timer_failures;
  s.watchdog = detector_->watchdog_name();
  for (auto& p : detector_->program_stats()) s.bpf.push_back({p.name, p.run_cnt, p.run_time_ns});
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  s.cpu_user_s = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec / 1e6;
  s.cpu_sys_s = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec / 1e6;
  s.max_rss_kb = ru.ru_maxrss;
  out_->emit(s);
  if (ks.ringbuf_drops) log::warn("%llu events lost (ring buffer full)", (unsigned long long)ks.ringbuf_drops);
  if (malformed_) log::warn("%llu malformed records ignored", (unsigned long long)malformed_);
  if (out_->write_errors()) log::warn("%llu records could not be written", (unsigned long long)out_->write_errors());
}

}  // namespace jankbpf
