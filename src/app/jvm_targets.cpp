#include "app/jvm_targets.h"

#include <dirent.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "app/monitor.h"
#include "stack/maps.h"
#include "util/log.h"

namespace jankbpf {

bool maps_libjvm(pid_t pid) {
  std::string text;
  if (!stack::read_small_file("/proc/" + std::to_string(pid) + "/maps", text, 16u << 20)) return false;
  for (size_t at = text.find("/libjvm.so"); at != std::string::npos; at = text.find("/libjvm.so", at + 1)) {
    std::string_view rest(text.data() + at + 10, text.size() - at - 10);
    if (rest.empty() || rest.front() == '\n' || rest.starts_with(" (deleted)")) return true;
  }
  return false;
}

std::vector<pid_t> JvmTargets::look() {
  std::vector<pid_t> candidates = pids_;
  if (!comm_.empty()) {  // --comm: the processes of that name now
    if (DIR* d = opendir("/proc")) {
      size_t seen = 0;
      while (dirent* e = readdir(d)) {
        char* end = nullptr;
        long pid = std::strtol(e->d_name, &end, 10);
        if (pid <= 0 || *end || ++seen > 1u << 20) continue;
        std::string comm;
        if (!stack::read_small_file("/proc/" + std::string(e->d_name) + "/comm", comm, 64)) continue;
        while (!comm.empty() && comm.back() == '\n') comm.pop_back();
        if (comm == comm_) candidates.push_back(static_cast<pid_t>(pid));
      }
      closedir(d);
    }
  }
  std::vector<pid_t> out;
  for (pid_t p : candidates) {
    if (found_.count(p) || not_jvm_.count(p)) continue;
    maps_reads_++;
    if (maps_libjvm(p)) {
      found_.insert(p);
      out.push_back(p);
    } else if (!once_not_.insert(p).second) {
      once_not_.erase(p);
      not_jvm_.insert(p);
    }
  }
  return out;
}

uint64_t JvmTargets::next_delay_ms() {
  // 0.1, 0.2, ... 12.8 s: some 25 s from the start in all.
  constexpr size_t kSteps = 8;
  if (step_ >= kSteps) return 0;
  if (comm_.empty() &&
      std::all_of(pids_.begin(), pids_.end(), [&](pid_t p) { return found_.count(p) || not_jvm_.count(p); }))
    return 0;
  return 100ull << step_++;
}

void Monitor::probe_jvms() {
  if (!jvms_) return;
  if (jvm_timer_) {
    uint64_t ticks;
    if (read(jvm_timer_.get(), &ticks, sizeof ticks) < 0) {}
  }
  bool marked = false;
  for (pid_t pid : jvms_->look()) {
    if (detector_->mark_loop_threads(pid)) {
      marked = true;
      log::info("pid %d: a JVM: its threads that wait in epoll (NIO selectors) are watched as event loops", pid);
    } else {
      log::warn("pid %d: a JVM, but its loop threads cannot be marked (the procs map is full?)", pid);
    }
  }
  // Its selectors idle in epoll now: with trampolines, their waits' returns
  // are never seen (bpf/adopt.bpf.h), so look for them as at the attach.
  if (marked)
    if (int n = detector_->adopt_waiting(); n > 0)
      log::info("%d JVM loop thread%s asleep in a wait: %s next task begins at the switch-in out of it", n,
                n == 1 ? "" : "s", n == 1 ? "its" : "their");
  uint64_t ms = jvms_->next_delay_ms();
  if (!ms) {
    if (jvm_timer_) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, jvm_timer_.get(), nullptr);
    jvm_timer_ = Fd();
    jvms_.reset();
    return;
  }
  if (!jvm_timer_) {
    jvm_timer_ = Fd(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTagJvmProbe;
    if (!jvm_timer_ || epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, jvm_timer_.get(), &ev) != 0) {
      jvm_timer_ = Fd();
      jvms_.reset();
      return;
    }
  }
  itimerspec its{};
  its.it_value.tv_sec = static_cast<time_t>(ms / 1000);
  its.it_value.tv_nsec = static_cast<long>(ms % 1000) * 1'000'000;
  timerfd_settime(jvm_timer_.get(), 0, &its, nullptr);
}

void Monitor::start_jvm_probe() {
  if (opts_.threads == ThreadScope::All || (opts_.pids.empty() && opts_.comm.empty() && launcher_.pid() <= 0))
    return;
  std::vector<pid_t> pids(opts_.pids.begin(), opts_.pids.end());
  if (launcher_.pid() > 0) pids.push_back(launcher_.pid());
  jvms_ = std::make_unique<JvmTargets>(std::move(pids), opts_.comm);
  probe_jvms();
}

}  // namespace jankbpf
