// The Monitor's marker probes: the user's sites at start, the sites of the
// files planned for processes as they are seen, released when the last
// process that needed them is gone (its pidfd: every process, janked or
// not, and no BPF record to lose).
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "app/monitor.h"
#include "util/log.h"

namespace jankbpf {

// Each marker's probe sites, once per site, in every process that runs the
// binary (now or later): the kernel filters by the watched threads. The
// path given is the descriptor the site was parsed from (/proc/self/fd/N).
bool Monitor::attach_marker(const ProbeAttachment& a, std::string* error, uint64_t* link) {
  return a.kind == ProbeSpec::Kind::Usdt
             ? detector_->attach_usdt(a.attach_path(), a.provider, a.name, a.begin, a.cookie, error, link)
             : detector_->attach_uprobe(a.attach_path(), a.offset, a.kind == ProbeSpec::Kind::Uretprobe,
                                        a.begin, a.cookie, error, link);
}

bool Monitor::attach_markers() {
  for (const auto& a : markers_.attachments()) {
    std::string error;
    if (!attach_marker(a, &error)) {
      log::error("cannot attach the marker %s: %s", a.describe().c_str(), error.c_str());
      return false;
    }
    log::info("marker: %s", a.describe().c_str());
  }
  markers_.drop_files();
  return true;
}

// A process is watched from now (its first wait or marker, or its first
// since an exec): the marked binaries it maps that no probe covers yet --
// its own copy in a container, a file replaced on disk, a program it
// exec'd -- get probes of their own, system-wide like the first ones.
void Monitor::on_tracked(pid_t pid, pid_t tid, uint64_t proc_start_ns) {
  if (markers_.empty()) return;
  if (tracked_.size() > 100'000) tracked_.clear();
  // Once per process; but an exec keeps the pid and the start time, and
  // it is the main thread that is tracked afresh then: look again.
  if (tid != pid && tracked_.count({pid, proc_start_ns})) return;
  // The pidfd before the maps: the maps read are this process's, whose
  // exit the pidfd then reports (a pid reused in between is read instead).
  Fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  const int pidfd_errno = pidfd ? 0 : errno;
  std::vector<std::string> notes;
  ProcessPlan plan = markers_.plan_for_process(pid, &notes);
  tracked_.insert({pid, proc_start_ns});
  for (const auto& n : notes) log::info("%s", n.c_str());
  if (markers_.files().take_cap_notice())
    log::warn("marker files capped (at most %zu per process, %zu in all): more copies of marked binaries "
              "get no probes (counted in marker_files_capped)",
              MarkerFiles::kPerProcess, MarkerFiles::kTotal);
  if (!plan.attach.empty() && marker_attach_delay_ms_) {
    log::info("test: attaching %zu marker site(s) in %u ms", plan.attach.size(), marker_attach_delay_ms_);
    std::this_thread::sleep_for(std::chrono::milliseconds(marker_attach_delay_ms_));
  }
  for (const auto& a : plan.attach) {
    std::string error;
    uint64_t link = 0;
    if (!attach_marker(a, &error, &link))
      log::warn("cannot attach the marker %s: %s", a.describe().c_str(), error.c_str());
    else
      markers_.add_link(a, link);
  }
  plan.attach.clear();  // closes the descriptors
  if (!plan.release.empty()) detector_->release_marker_links(plan.release);
  if (plan.watch_exit && pidfd) {
    watch_marker_user(pid, std::move(pidfd));
  } else if (plan.watch_exit && pidfd_errno == ESRCH) {
    detector_->release_marker_links(markers_.process_gone(pid));  // gone already
  } else if (plan.watch_exit) {
    // No pidfd (ENOSYS, EMFILE): its files stay attached, within the caps,
    // rather than be detached from a process still running.
    log::info("pid %d: cannot watch its exit (%s): its marker files stay attached", pid,
              strerror(pidfd_errno));
  }
}

void Monitor::watch_marker_user(pid_t pid, Fd pidfd) {
  for (const auto& [fd, user] : marker_users_)
    if (user.first == pid) return;  // watched already (tracked again after an exec)
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTagMarkerUser | static_cast<uint32_t>(pidfd.get());
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, pidfd.get(), &ev) != 0) {
    log::warn("cannot watch pid %d's exit (%s): its marker files are released now", pid, strerror(errno));
    detector_->release_marker_links(markers_.process_gone(pid));
    return;
  }
  int fd = pidfd.get();
  marker_users_[fd] = {pid, std::move(pidfd)};
}

void Monitor::on_marker_user_gone(int pidfd) {
  auto it = marker_users_.find(pidfd);
  if (it == marker_users_.end()) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, pidfd, nullptr);
  pid_t pid = it->second.first;
  marker_users_.erase(it);
  size_t n = detector_->release_marker_links(markers_.process_gone(pid));
  if (n) log::info("pid %d exited: released %zu marker site(s) only it needed", pid, n);
}

}  // namespace jankbpf
