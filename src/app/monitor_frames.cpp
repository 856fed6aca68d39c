// Monitor, the frames of Wayland clients (issue 28): the libwayland-client
// probes attached at start, the kernel's frame events into the tracker,
// the `frames` ring drained on a 500 ms timer while they flow (and woken
// by its first record after a quiet spell), each client's main thread
// sampled by a per-thread clock, janky frames to the reporter with their
// stacks, and every frame to the sinks in batches.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "app/monitor.h"
#include "arch/regs.h"
#include "frame/wayland_lib.h"
#include "proc/container.h"
#include "proc/process_info.h"
#include "util/log.h"

namespace jankbpf {
namespace {

// Twice a second: each tick wakes this thread and the reporter, which costs
// more than the frames it carries.
constexpr int64_t kTickNs = 500'000'000;
// After this long without a frame event the timer stops; the ring's next
// record wakes the loop again.
constexpr uint64_t kQuietNs = 2'000'000'000;

int64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

frame::ClockOffsets clock_offsets() {
  frame::ClockOffsets o;
  const int64_t mono = clock_ns(CLOCK_MONOTONIC);
  o.raw_minus_mono = clock_ns(CLOCK_MONOTONIC_RAW) - mono;
  o.boot_minus_mono = clock_ns(CLOCK_BOOTTIME) - mono;
  return o;
}

bool epoll_add_tag(int epfd, int fd, uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

}  // namespace

bool Monitor::start_frames() {
  if (!opts_.frames || !detector_->frames_loaded()) return true;
  std::string why;
  auto sites = frame::find_wayland_client(&why);
  if (!sites) {
    // Not an error: a machine without libwayland-client has no Wayland
    // client to measure (--check says so).
    log::info("frames: %s", why.c_str());
    return true;
  }
  // Named targets only trap in their own processes (--pid, -- CMD: the
  // probes are theirs); --comm and every process need them everywhere.
  std::vector<pid_t> where = opts_.pids;
  if (launcher_.pid() > 0) where.push_back(launcher_.pid());
  if (where.empty() || !opts_.comm.empty()) where = {-1};
  for (pid_t pid : where)
    if (!detector_->attach_frames(sites->path, sites->request, sites->listener, sites->event, pid, &why)) {
      features_.set("wayland_frames", false, why, "no frame records");
      return true;
    }
  features_.set("wayland_frames", true, "uprobes on " + sites->path);
  frame::TrackerConfig tc;
  tc.fixed_interval_ns = opts_.frame_interval_ms > 0 ? static_cast<uint64_t>(opts_.frame_interval_ms * 1e6) : 0;
  tc.threshold_ns = uint64_t{opts_.threshold_ms} * 1'000'000;
  frames_ = std::make_unique<frame::FrameTracker>(tc);
  frames_timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!frames_timer_ || !epoll_add_tag(epoll_.get(), frames_timer_.get(), kTagFramesTick) ||
      !epoll_add_tag(epoll_.get(), detector_->frames_fd(), kTagFrames)) {
    log::error("cannot watch the frames ring: %s", strerror(errno));
    return false;
  }
  if (sampling_ && detector_->frame_sample_prog_fd() >= 0) {
    frame::FrameSampler::Config sc;
    sc.period_ns = detector_config(opts_).frame_sample_period_ns;
    sc.stack_bytes = opts_.stack_bytes;
    sc.regs_mask = reg_table(host_arch().arch).sample_regs_user;
    sc.bpf_prog_fd = detector_->frame_sample_prog_fd();
    frame_sampler_ = std::make_unique<frame::FrameSampler>(sc);
  }
  log::info("frames: Wayland clients through %s", sites->path.c_str());
  return true;
}

void Monitor::on_frame_event(const jb_frame_event& e) {
  if (!frames_) return;
  frames_last_event_ns_ = e.hdr.time_ns;
  if (e.kind == JB_FR_OUTPUT_MODE && (e.args[0] & 1))
    log::info("pid %u: an output at %dx%d, %.3f Hz", e.hdr.pid, static_cast<int32_t>(e.args[1]),
              static_cast<int32_t>(e.args[2]), static_cast<int32_t>(e.args[3]) / 1000.0);
  else if (e.kind == JB_FR_CLOCK)
    log::info("pid %u: presentation clock %u", e.hdr.pid, e.args[0]);
  frames_->on_event(e, clock_offsets());
  // A main thread that begins frames gets its own sampling clock.
  if (e.kind == JB_FR_BEGIN && frame_sampler_ && !frame_sampler_->watching(static_cast<pid_t>(e.hdr.tid))) {
    std::string why;
    int fd = frame_sampler_->watch(static_cast<pid_t>(e.hdr.tid), &why);
    if (fd < 0 || !epoll_add_tag(epoll_.get(), fd, kTagFrameSample | static_cast<uint32_t>(fd)))
      log::info("pid %u: frames without stacks: %s", e.hdr.pid, why.c_str());
  }
  if (!frames_polled_) {
    // Frames flow: drain on a timer from now; records need wake nobody.
    frames_polled_ = true;
    detector_->set_frames_polled(true);
    itimerspec its{};
    its.it_value.tv_nsec = kTickNs;
    its.it_interval.tv_nsec = kTickNs;
    timerfd_settime(frames_timer_.get(), 0, &its, nullptr);
  }
}

void Monitor::on_frames_epoll(uint64_t tag) {
  switch (tag & (0xffULL << 40)) {
    case kTagFrames:
      detector_->drain_frames();
      break;
    case kTagFramesTick: {
      uint64_t n;
      (void)!read(frames_timer_.get(), &n, sizeof n);
      frames_tick(false);
      break;
    }
    case kTagFrameSample:
      if (frame_sampler_)
        frame_sampler_->drain(static_cast<int>(tag & 0xffffffffu),
                              [&](std::span<const uint8_t> r) { reporter_->add_perf_sample(r); });
      break;
  }
}

// The drain: frame events, frames that are done, the refresh intervals the
// kernel should hold each process to; records of janky frames with the
// stacks sampled in them; all frames to the sinks.
void Monitor::frames_tick(bool final) {
  if (!frames_) return;
  detector_->drain_frames();
  const uint64_t now = monotonic_ns();
  frames_->tick(final ? UINT64_MAX : now);
  for (pid_t pid : frames_->take_new_processes()) {
    FrameProcess p;
    p.label.comm = read_comm(pid);
    p.exe = frame_exes_.open(pid);
    p.label.exe = p.exe.path;
    p.cgroup = read_cgroup(pid);
    p.label.container_id = container_id_from_cgroup(p.cgroup);
    long uid = read_uid(pid);
    p.uid = uid >= 0 ? static_cast<uint32_t>(uid) : 0;
    frame_procs_[pid] = std::move(p);
    // Its maps and runtime (Python frames are read as samples arrive).
    if (frame_sampler_) reporter_->pin(pid);
  }
  for (auto [pid, ns] : frames_->take_interval_updates()) detector_->set_frame_interval(pid, ns);
  if (frame_sampler_)
    frame_sampler_->drain_all([&](std::span<const uint8_t> r) { reporter_->add_perf_sample(r); });

  auto done = frames_->take_finished();
  if (!done.empty()) {
    detector_->drain_captures();  // late frames' off-CPU stacks, before their records
    FrameBatch batch;
    for (const FrameTiming& f : done) {
      auto it = frame_procs_.find(f.pid);
      if (it == frame_procs_.end()) continue;
      if (batch.procs.empty() || batch.procs.back().first != f.pid) batch.procs.emplace_back(f.pid, it->second.label);
      if (!f.janky) continue;
      FrameRecord rec;
      rec.time_ms = clock_.now_ms();
      rec.begin_time_ms = clock_.epoch_ms(f.start_ns);
      rec.end_time_ms = clock_.epoch_ms(f.end_ns);
      rec.proc.pid = f.pid;
      rec.proc.uid = it->second.uid;
      rec.proc.name = it->second.label.comm;
      rec.proc.exe = it->second.label.exe;
      rec.proc.cgroup = it->second.cgroup;
      rec.proc.container_id = it->second.label.container_id;
      rec.thread_name = f.tid == f.pid ? rec.proc.name : read_comm(f.tid);
      rec.frame = f;
      Reporter::FrameContext ctx;
      ctx.begin_ns = f.start_ns;
      ctx.end_ns = f.end_ns;
      ctx.sample_period_ns = frame_sampler_ ? frame_sampler_->period_ns() : 0;
      ctx.exe = it->second.exe;
      reporter_->report_frame(std::move(rec), std::move(ctx));
    }
    batch.frames = std::move(done);
    reporter_->emit(std::move(batch));
  }
  // Processes gone: their samplers closed, their open frames forgotten
  // (their labels stay for the summary).
  for (auto& [pid, p] : frame_procs_) {
    if (p.gone || process_exists(pid)) continue;
    p.gone = true;
    p.exe = ExeFile{};
    frames_->forget(pid);
    if (frame_sampler_) frame_sampler_->forget(pid, [&](std::span<const uint8_t> r) { reporter_->add_perf_sample(r); });
  }
  if (frames_polled_ && !final && now - frames_last_event_ns_ > kQuietNs) {
    frames_polled_ = false;
    detector_->set_frames_polled(false);
    itimerspec off{};
    timerfd_settime(frames_timer_.get(), 0, &off, nullptr);
    detector_->drain_frames();  // one that came as the flag went down
  }
}

void Monitor::frames_summary(SummaryRecord& s) {
  if (!frames_) return;
  for (const auto& v : frames_->surfaces()) {
    SurfaceFrameStats row;
    row.pid = v.key.pid;
    row.surface = v.key.surface;
    auto it = frame_procs_.find(v.key.pid);
    if (it != frame_procs_.end()) {
      row.comm = it->second.label.comm;
      row.exe = it->second.label.exe;
      row.container_id = it->second.label.container_id;
    }
    v.stats->fill(&row);
    row.interval_ms = v.interval_ns / 1e6;
    row.interval_source = v.interval_source;
    s.frames.push_back(std::move(row));
  }
  s.frame_records = reporter_->stats().frame_records;
  s.frame_surfaces_untracked = frames_->untracked();
}

}  // namespace jankbpf
