#include "bpf/detector.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "arch/arch.h"
#include "jank.skel.h"
#include "jankbpf/events.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/tracefs.h"

namespace jankbpf {
namespace {

// libbpf's messages go to the debug log; the last warnings are kept so a
// failed load can say why without -v.
std::string g_libbpf_last;

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  if (level != LIBBPF_DEBUG) {
    g_libbpf_last += buf;
    if (g_libbpf_last.size() > 4096) g_libbpf_last.erase(0, g_libbpf_last.size() - 4096);
  }
  if (log::enabled(log::Level::Debug) || (level == LIBBPF_WARN && log::enabled(log::Level::Info))) {
    std::string line(buf);
    while (!line.empty() && line.back() == '\n') line.pop_back();
    log::debug("libbpf: %s", line.c_str());
  }
  return 0;
}

// The timer watchdog needs tp_btf programs; the scan watchdog raw_tp + perf_event.
void select_programs(jank_bpf* skel, WatchdogMode mode, bool stacks, bool offcpu, bool markers) {
  const bool timer = mode == WatchdogMode::Timer;
  bpf_program* btf_progs[] = {skel->progs.jb_switch_btf, skel->progs.jb_wakeup_btf,
                              skel->progs.jb_wakeup_new_btf, skel->progs.jb_exit_btf,
                              skel->progs.jb_waking_btf, skel->progs.jb_exec_btf};
  bpf_program* raw_progs[] = {skel->progs.jb_switch_raw, skel->progs.jb_wakeup_raw,
                              skel->progs.jb_wakeup_new_raw, skel->progs.jb_exit_raw,
                              skel->progs.jb_scan, skel->progs.jb_exec_raw};
  for (auto* p : btf_progs) bpf_program__set_autoload(p, timer);
  // Shell jobs: the child waits bound tasks only after a setpgid of a child.
  bpf_program__set_autoload(skel->progs.jb_job_setpgid, tracefs::has_event("syscalls", "sys_enter_setpgid"));
  // The waker is only wanted with off-CPU captures.
  bpf_program__set_autoload(skel->progs.jb_waking_btf, timer && offcpu);
  for (auto* p : raw_progs) bpf_program__set_autoload(p, !timer);
  bpf_program__set_autoload(skel->progs.jb_sample, stacks);
  // Markers are attached one probe site at a time (attach_uprobe/usdt).
  for (auto* p : {skel->progs.jb_mark_begin, skel->progs.jb_mark_end, skel->progs.jb_usdt_begin,
                  skel->progs.jb_usdt_end}) {
    bpf_program__set_autoload(p, markers);
    bpf_program__set_autoattach(p, false);
  }

  // Wait hooks: only the syscalls this arch has and this kernel traces.
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel->obj) {
    std::string name = bpf_program__name(prog);
    std::string syscall;
    bool child = false;
    if (name.starts_with("jb_enter_")) syscall = name.substr(9);
    else if (name.starts_with("jb_exit_") && name != "jb_exit_btf" && name != "jb_exit_raw")
      syscall = name.substr(8);
    else if (name.starts_with("jb_cwenter_")) syscall = name.substr(11), child = true;
    else if (name.starts_with("jb_cwexit_")) syscall = name.substr(10), child = true;
    else continue;
    bool wanted = false;
    for (const auto& w : child ? host_arch().child_waits : host_arch().wait_syscalls)
      if (w.name == syscall) wanted = tracefs::has_event("syscalls", "sys_enter_" + syscall);
    bpf_program__set_autoload(prog, wanted);
  }
}

}  // namespace

void Detector::SkelDeleter::operator()(jank_bpf* s) const { jank_bpf__destroy(s); }
void Detector::RingDeleter::operator()(ring_buffer* r) const { ring_buffer__free(r); }
void Detector::LinkDeleter::operator()(bpf_link* l) const { bpf_link__destroy(l); }

// Detaching a syscall tracepoint's perf link waits for grace periods under
// the kernel's event mutex: 50-85 ms each here, so the 14 of them took a
// second one after another. Side by side the waits overlap in part (the
// mutex still serializes the unregistering): about half the time.
// The ring buffer goes first so that nothing polls a map being torn down.
Detector::~Detector() {
  const uint64_t t0 = monotonic_ns();
  rb_.reset();
  std::vector<bpf_link*> links;
  if (skel_ && skel_->skeleton) {
    for (int i = 0; i < skel_->skeleton->prog_cnt; i++) {
      bpf_link** slot = skel_->skeleton->progs[i].link;
      if (slot && *slot) {
        links.push_back(*slot);
        *slot = nullptr;  // the skeleton must not destroy it again
      }
    }
  }
  for (auto& l : extra_links_) links.push_back(l.release());
  extra_links_.clear();
  std::vector<std::thread> workers;
  for (bpf_link* l : links) {
    try {
      workers.emplace_back([l] { bpf_link__destroy(l); });
    } catch (const std::system_error&) {
      bpf_link__destroy(l);  // no thread to spare: detach it here
    }
  }
  for (auto& w : workers) w.join();
  uint64_t t1 = monotonic_ns();
  skel_.reset();
  log::debug("detached %zu links in %.0f ms, freed the BPF objects in %.0f ms", links.size(),
             (t1 - t0) / 1e6, (monotonic_ns() - t1) / 1e6);
}

std::unique_ptr<Detector> Detector::start(const DetectorConfig& cfg, RecordHandler handler,
                                          std::string* error) {
  libbpf_set_print(libbpf_print);
  std::unique_ptr<Detector> d(new Detector());
  d->handler_ = std::move(handler);

  // Feature probe by trying: the timer watchdog where the kernel lets a
  // tp_btf program own a bpf_timer, the scan watchdog otherwise.
  // Per-thread state in task storage where the timer watchdog can find it
  // again (bpf_task_from_pid), in the tid hash otherwise.
  const bool timer_ok = cfg.watchdog != WatchdogMode::Scan &&
                        (d->load(cfg, WatchdogMode::Timer, true, error) ||
                         d->load(cfg, WatchdogMode::Timer, false, error));
  if (!timer_ok) {
    if (cfg.watchdog == WatchdogMode::Timer) return nullptr;
    if (cfg.watchdog == WatchdogMode::Auto)
      log::info("bpf_timer watchdog not available (%s); using the cpu-clock scan", error->c_str());
    if (!d->load(cfg, WatchdogMode::Scan, false, error)) return nullptr;
  }
  if (!d->attach(error)) return nullptr;
  return d;
}

bool Detector::load(const DetectorConfig& cfg, WatchdogMode mode, bool state_in_task,
                    std::string* error) {
  skel_.reset();
  g_libbpf_last.clear();
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
  strncpy(const_cast<char*>(ro->target_comm), cfg.comm.c_str(), JB_COMM_LEN - 1);
  ro->self_tgid = static_cast<uint32_t>(cfg.self_tgid);
  ro->early_ns = cfg.early_ns;
  ro->sample_period_ns = cfg.sample_period_ns;
  ro->sample_window_ns = cfg.sample_window_ns;
  // Off-CPU captures run in the tp_btf sched_switch (they need the task's
  // pt_regs), so the scan watchdog's raw_tp programs go without them.
  offcpu_ = cfg.offcpu && cfg.early_ns && mode == WatchdogMode::Timer;
  ro->offcpu_enabled = offcpu_;
  ro->trace_ns = cfg.trace_ns;
  stacks_ = cfg.early_ns != 0;
  markers_ = cfg.markers;
  ro->announce_tracked = cfg.markers;
  ro->state_in_task = state_in_task;
  // The map that does not hold the state is kept, unused, at one entry.
  bpf_map__set_max_entries(skel_->maps.threads, state_in_task ? 1 : 16384);
  select_programs(skel_.get(), mode, stacks_, offcpu_, markers_);

  if (int err = jank_bpf__load(skel_.get())) {
    std::string why = g_libbpf_last;
    while (!why.empty() && why.back() == '\n') why.pop_back();
    auto nl = why.rfind('\n');
    if (nl != std::string::npos) why = why.substr(nl + 1);
    *error = std::string("loading BPF programs failed: ") + strerror(-err) +
             (why.empty() ? "" : " (" + why + ")");
    skel_.reset();
    return false;
  }
  mode_ = mode;
  log::debug("BPF loaded: %s watchdog, per-thread state in %s", mode == WatchdogMode::Timer ? "timer" : "scan",
             state_in_task ? "task storage" : "a tid hash");
  return true;
}

bool Detector::attach(std::string* error) {
  if (int err = jank_bpf__attach(skel_.get())) {
    *error = std::string("attaching BPF programs failed: ") + strerror(-err);
    return false;
  }
  bpf_program* prog;
  attached_ = 0;
  bpf_object__for_each_program(prog, skel_->obj) attached_ += bpf_program__autoload(prog);
  if (mode_ == WatchdogMode::Scan && !attach_scan_tick(error)) return false;

  rb_.reset(ring_buffer__new(
      bpf_map__fd(skel_->maps.events),
      [](void* ctx, void* data, size_t size) -> int {
        auto* self = static_cast<Detector*>(ctx);
        self->handler_({static_cast<const uint8_t*>(data), size});
        return 0;
      },
      this, nullptr));
  if (!rb_) {
    *error = std::string("cannot set up the ring buffer: ") + strerror(errno);
    return false;
  }
  return true;
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
    extra_links_.emplace_back(link);
    return true;
  }
  *error = std::string("cannot open the cpu-clock event for the scan watchdog: ") + strerror(errno);
  return false;
}

namespace {
std::string last_libbpf_line() {
  std::string why = g_libbpf_last;
  while (!why.empty() && why.back() == '\n') why.pop_back();
  auto nl = why.rfind('\n');
  if (nl != std::string::npos) why = why.substr(nl + 1);
  return why;
}
}  // namespace

bool Detector::attach_uprobe(const std::string& binary, uint64_t offset, bool retprobe, bool begin,
                             uint64_t cookie, std::string* error) {
  if (!markers_) {
    *error = "marker programs not loaded";
    return false;
  }
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = retprobe);
  g_libbpf_last.clear();
  bpf_link* link = bpf_program__attach_uprobe_opts(
      begin ? skel_->progs.jb_mark_begin : skel_->progs.jb_mark_end, -1, binary.c_str(),
      static_cast<size_t>(offset), &opts);
  return keep_marker_link(link, error);
}

// A marker probe's link is kept until exit; a failed attach says why
// (errno, and libbpf's last message).
bool Detector::keep_marker_link(bpf_link* link, std::string* error) {
  if (!link) {
    int err = errno;
    std::string why = last_libbpf_line();
    *error = std::string(strerror(err)) + (why.empty() ? "" : " (" + why + ")");
    return false;
  }
  extra_links_.emplace_back(link);
  marker_links_++;
  return true;
}

bool Detector::attach_usdt(const std::string& binary, const std::string& provider,
                           const std::string& name, bool begin, uint64_t cookie, std::string* error) {
  if (!markers_) {
    *error = "marker programs not loaded";
    return false;
  }
  LIBBPF_OPTS(bpf_usdt_opts, opts, .usdt_cookie = cookie);
  g_libbpf_last.clear();
  bpf_link* link = bpf_program__attach_usdt(begin ? skel_->progs.jb_usdt_begin : skel_->progs.jb_usdt_end,
                                            -1, binary.c_str(), provider.c_str(), name.c_str(), &opts);
  return keep_marker_link(link, error);
}

int Detector::ready_fd() const { return ring_buffer__epoll_fd(rb_.get()); }

int Detector::drain() { return ring_buffer__consume(rb_.get()); }

bool Detector::add_target(pid_t pid) {
  jb_proc p{};
  p.flags = JB_PROCF_TARGET;
  uint32_t key = static_cast<uint32_t>(pid);
  return bpf_map__update_elem(skel_->maps.procs, &key, sizeof key, &p, sizeof p, BPF_ANY) == 0;
}

KernelStats Detector::kernel_stats() const {
  KernelStats s;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return s;
  std::vector<uint64_t> values(ncpu);
  auto sum = [&](uint32_t key) -> uint64_t {
    if (bpf_map__lookup_elem(skel_->maps.stats, &key, sizeof key, values.data(),
                             values.size() * sizeof(uint64_t), 0))
      return 0;
    uint64_t total = 0;
    for (auto v : values) total += v;
    return total;
  };
  s.tasks = sum(JB_STAT_TASKS);
  s.ringbuf_drops = sum(JB_STAT_RB_DROPS);
  s.threads_map_full = sum(JB_STAT_THREADS_FULL);
  s.timer_failures = sum(JB_STAT_TIMER_FAIL);
  s.samples = sum(JB_STAT_SAMPLES);
  s.offcpu = sum(JB_STAT_OFFCPU);
  s.unseen_switches = sum(JB_STAT_UNSEEN_SWITCH);
  return s;
}

std::vector<ProgramStats> Detector::program_stats() const {
  std::vector<ProgramStats> out;
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) {
    int fd = bpf_program__fd(prog);
    if (fd < 0) continue;
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len)) continue;
    out.push_back({bpf_program__name(prog), info.run_time_ns, info.run_cnt});
  }
  return out;
}

int Detector::sample_prog_fd() const {
  return stacks_ ? bpf_program__fd(skel_->progs.jb_sample) : -1;
}

int64_t Detector::long_tasks() const {
  return __atomic_load_n(&skel_->bss->long_tasks, __ATOMIC_RELAXED);
}

const char* Detector::watchdog_name() const {
  return mode_ == WatchdogMode::Timer ? "timer" : "scan";
}

}  // namespace jankbpf
