#include "frame/frame_tracker.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

namespace jankbpf {

const char* frame_jank_name(FrameJank j) {
  switch (j) {
    case FrameJank::None: return "none";
    case FrameJank::AppDeadlineMissed: return "app_deadline_missed";
    case FrameJank::BufferStuffing: return "buffer_stuffing";
    case FrameJank::CompositorLate: return "compositor_late";
    case FrameJank::Dropped: return "dropped";
    case FrameJank::Unknown: return "unknown";
  }
  return "unknown";
}

}  // namespace jankbpf

namespace jankbpf::frame {
namespace {

constexpr size_t kLatencySamples = 32;  // on-time latencies kept per surface
constexpr size_t kMinSamples = 8;       // before they are believed

uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

template <typename T>
T quantile(std::deque<T> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

}  // namespace

FrameTracker::Snapshot FrameTracker::snapshot(const jb_frame_event& e) {
  Snapshot s;
  s.time_ns = e.hdr.time_ns;
  s.exec_ns = e.exec_ns;
  s.delay_ns = e.delay_ns;
  s.in_task = e.flags & JB_FRF_IN_TASK;
  if (s.in_task) {
    s.task_seq = e.task_seq;
    s.task_begin_ns = e.task_begin_ns;
    for (int i = 0; i < JB_ST_NR; i++) s.state_ns[i] = e.state_ns[i];
  }
  return s;
}

FrameTracker::Surface* FrameTracker::surface(const jb_frame_event& e) {
  const pid_t pid = static_cast<pid_t>(e.hdr.pid);
  if (procs_.try_emplace(pid).second) new_procs_.push_back(pid);
  const SurfaceKey key{pid, e.display, e.surface};
  auto it = surfaces_.find(key);
  if (it != surfaces_.end()) return &it->second;
  if (surfaces_.size() >= kMaxSurfaces) {  // counted, not tracked
    untracked_++;
    return nullptr;
  }
  return &surfaces_[key];
}

std::pair<uint64_t, const char*> FrameTracker::interval(const SurfaceKey& k, const Surface& s) const {
  if (cfg_.fixed_interval_ns) return {cfg_.fixed_interval_ns, "flag"};
  if (s.refresh_ns) return {s.refresh_ns, "presentation"};
  auto p = procs_.find(k.pid);
  if (p != procs_.end() && p->second.output_interval_ns) return {p->second.output_interval_ns, "output"};
  return {cfg_.default_interval_ns, "default"};
}

void FrameTracker::note_interval(pid_t pid) {
  if (cfg_.fixed_interval_ns) return;  // the kernel has the flag's already
  auto p = procs_.find(pid);
  if (p == procs_.end()) return;
  uint64_t best = p->second.output_interval_ns;
  for (const auto& [k, s] : surfaces_)
    if (k.pid == pid && s.refresh_ns) best = s.refresh_ns;
  if (best && best != p->second.pushed_interval_ns) {
    p->second.pushed_interval_ns = best;
    interval_updates_.emplace_back(pid, best);
  }
}

void FrameTracker::on_event(const jb_frame_event& e, const ClockOffsets& clocks) {
  const pid_t pid = static_cast<pid_t>(e.hdr.pid);
  switch (e.kind) {
    case JB_FR_BEGIN: {
      Surface* sp = surface(e);
      if (!sp) return;
      Surface& s = *sp;
      if (s.open) {  // a callback that led to no commit: the app had nothing to draw
        abandoned_++;
        s.stats.abandoned();
      }
      Open o;
      o.begin = snapshot(e);
      o.tid = static_cast<pid_t>(e.hdr.tid);
      o.done_ms = e.args[0];
      o.delivery_ns = e.delivery_ns;
      o.other_queue = e.flags & JB_FRF_OTHER_QUEUE;
      s.open = o;
      return;
    }
    case JB_FR_COMMIT:
      on_commit(e);
      return;
    case JB_FR_FEEDBACK:
      if (Surface* sp = surface(e)) sp->next_feedback = e.object;
      return;
    case JB_FR_PRESENTED:
    case JB_FR_DISCARDED:
      on_presented(e, clocks, e.kind == JB_FR_DISCARDED);
      return;
    case JB_FR_OUTPUT_MODE: {
      procs_.try_emplace(pid).second ? new_procs_.push_back(pid) : void();
      const int32_t refresh_mhz = static_cast<int32_t>(e.args[3]);
      if ((e.args[0] & 1) && refresh_mhz > 0) {  // WL_OUTPUT_MODE_CURRENT
        procs_[pid].output_interval_ns = static_cast<uint64_t>(1e12 / refresh_mhz);
        note_interval(pid);
      }
      return;
    }
    case JB_FR_CLOCK:
      procs_.try_emplace(pid).second ? new_procs_.push_back(pid) : void();
      procs_[pid].clock_id = e.args[0];
      return;
    case JB_FR_DESTROY: {
      auto it = surfaces_.find(SurfaceKey{pid, e.display, e.surface});
      if (it == surfaces_.end()) return;
      Surface& s = it->second;
      s.open.reset();
      while (!s.pending.empty()) {
        FrameTiming f = s.pending.front().f;
        s.pending.pop_front();
        finish(s, f, false);
      }
      return;
    }
    default:
      return;
  }
}

void FrameTracker::on_commit(const jb_frame_event& e) {
  Surface* sp = surface(e);
  if (!sp) return;
  Surface& s = *sp;
  const SurfaceKey key{static_cast<pid_t>(e.hdr.pid), e.display, e.surface};
  const uint64_t prev_commit = s.last_commit_ns;
  s.last_commit_ns = e.hdr.time_ns;
  const uint32_t feedback = s.next_feedback;
  s.next_feedback = 0;
  if (!s.open) return;  // a commit no frame callback paced: not a frame
  const Open o = *s.open;
  s.open.reset();
  const Snapshot c = snapshot(e);
  const auto [iv, iv_source] = interval(key, s);
  s.interval_ns = iv;
  s.interval_source = iv_source;

  const uint64_t wall = sub0(c.time_ns, o.begin.time_ns);
  const uint64_t ran = sub0(c.exec_ns, o.begin.exec_ns);
  const uint64_t queued = std::min(sub0(c.delay_ns, o.begin.delay_ns), sub0(wall, ran));
  const bool same_task = o.begin.in_task && c.in_task && o.begin.task_seq == c.task_seq;
  uint64_t blocked = c.in_task ? c.state_ns[JB_ST_BLOCKED] : 0;
  if (!same_task) {
    // The thread went back to its event loop after the callback. Off the
    // CPU for a refresh or more outside the committing task, it was idle:
    // the callback led to no frame, and this commit is not its end.
    const uint64_t commit_off = c.in_task ? c.state_ns[JB_ST_SLEEPING] + c.state_ns[JB_ST_BLOCKED] : 0;
    if (sub0(sub0(wall, ran + queued), commit_off) >= iv) {
      abandoned_++;
      s.stats.abandoned();
      return;
    }
  }

  FrameTiming f;
  f.pid = key.pid;
  f.tid = static_cast<pid_t>(e.hdr.tid);
  f.surface = key.surface;
  f.number = ++s.frames;
  f.start_ns = o.begin.time_ns;
  // EGL or Vulkan throttling on a queue of their own: the callback is
  // dispatched inside the swap, right before its commit; the app's frame
  // ran from its previous commit.
  if (o.other_queue && prev_commit && c.time_ns - prev_commit < 20 * iv) {
    f.start_ns = prev_commit;
    f.pacing = "swap";
  }
  f.end_ns = c.time_ns;
  f.interval_ns = iv;
  f.interval_source = iv_source;
  // When the callback reached the client: the wakeup from the event-loop
  // wait whose task dispatched it (that task's begin less its delivery, the
  // time it queued for a CPU). A callback read while the thread was busy
  // was there at that wait's return. A delay under half a refresh is the
  // loop's own dispatching, not a late start.
  f.expected_start_ns = f.start_ns;
  if (f.pacing == std::string_view("callback") && o.begin.in_task && o.begin.task_begin_ns <= f.start_ns) {
    const uint64_t arrival = sub0(o.begin.task_begin_ns, o.delivery_ns);
    if (f.start_ns - arrival > iv / 2 && f.start_ns - arrival < 100 * iv) f.expected_start_ns = arrival;
  }
  f.deadline_ns = f.expected_start_ns + iv;

  if (same_task) {
    f.running_ms = sub0(c.state_ns[JB_ST_RUNNING], o.begin.state_ns[JB_ST_RUNNING]) / 1e6;
    f.runnable_ms = sub0(c.state_ns[JB_ST_RUNNABLE], o.begin.state_ns[JB_ST_RUNNABLE]) / 1e6;
    f.sleeping_ms = sub0(c.state_ns[JB_ST_SLEEPING], o.begin.state_ns[JB_ST_SLEEPING]) / 1e6;
    f.blocked_io_ms = sub0(c.state_ns[JB_ST_BLOCKED], o.begin.state_ns[JB_ST_BLOCKED]) / 1e6;
  } else {
    blocked = std::min(blocked, sub0(wall, ran + queued));
    f.running_ms = ran / 1e6;
    f.runnable_ms = queued / 1e6;
    f.blocked_io_ms = blocked / 1e6;
    f.sleeping_ms = sub0(wall, ran + queued + blocked) / 1e6;
  }
  if (c.in_task && c.time_ns - c.task_begin_ns >= cfg_.threshold_ns) f.task_seq = c.task_seq;

  if (f.end_ns > f.deadline_ns) {
    f.jank = FrameJank::AppDeadlineMissed;
    // Choreographer's count: the refreshes its work spanned beyond its own.
    const uint64_t spent = f.end_ns - f.expected_start_ns;
    f.skipped_frames = static_cast<uint32_t>((spent + iv - 1) / iv - 1);
  }
  if (feedback) {
    s.pending.push_back(Pending{f, feedback, c.time_ns + cfg_.present_timeout_ns});
    return;
  }
  finish(s, f, false);
}

void FrameTracker::on_presented(const jb_frame_event& e, const ClockOffsets& clocks, bool discarded) {
  auto it = surfaces_.find(SurfaceKey{static_cast<pid_t>(e.hdr.pid), e.display, e.surface});
  if (it == surfaces_.end()) return;
  Surface& s = it->second;
  if (!discarded && e.args[3] && e.args[3] < 1'000'000'000u && s.refresh_ns != e.args[3]) {
    s.refresh_ns = e.args[3];
    note_interval(static_cast<pid_t>(e.hdr.pid));
  }
  auto p = std::find_if(s.pending.begin(), s.pending.end(), [&](const Pending& x) { return x.feedback == e.object; });
  if (p == s.pending.end()) return;
  FrameTiming f = p->f;
  s.pending.erase(p);
  if (discarded) {
    f.dropped = true;
    finish(s, f, true);
    return;
  }
  const uint64_t t = ((uint64_t{e.args[0]} << 32) | e.args[1]) * 1'000'000'000ULL + e.args[2];
  auto to_mono = [&](uint32_t clock) -> std::optional<uint64_t> {
    switch (clock) {
      case CLOCK_MONOTONIC:
      case CLOCK_MONOTONIC_COARSE: return t;
      case CLOCK_MONOTONIC_RAW: return static_cast<uint64_t>(static_cast<int64_t>(t) - clocks.raw_minus_mono);
      case CLOCK_BOOTTIME: return static_cast<uint64_t>(static_cast<int64_t>(t) - clocks.boot_minus_mono);
      default: return std::nullopt;
    }
  };
  auto plausible = [&](uint64_t v) { return v + 1'000'000 >= f.end_ns && v < f.end_ns + 10'000'000'000ULL; };
  const uint32_t clock = procs_[f.pid].clock_id;
  std::optional<uint64_t> present = to_mono(clock);
  if (clock == UINT32_MAX) {  // clock_id came before we attached: the one that fits
    present.reset();
    for (uint32_t c : {CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME})
      if (auto v = to_mono(c); v && plausible(*v)) {
        present = v;
        break;
      }
  }
  if (present && plausible(*present)) f.present_ns = std::max(*present, f.end_ns);
  finish(s, f, true);
}

void FrameTracker::finish(Surface& s, FrameTiming f, bool with_present) {
  const uint64_t iv = f.interval_ns;
  if (with_present && f.present_ns && s.latency_ns.size() >= kMinSamples)
    f.expected_present_ns = f.expected_start_ns + quantile(s.latency_ns, 0.5);
  if (f.jank == FrameJank::None) {
    if (f.dropped) {
      f.jank = FrameJank::Dropped;
    } else if (f.present_ns && f.expected_present_ns && f.present_ns >= f.expected_present_ns + iv) {
      // On time, shown a whole refresh or more later than this surface's
      // usual: queued behind the janky frame before it, or the compositor's.
      const uint64_t late = f.present_ns - f.expected_present_ns;
      f.skipped_frames = std::max<uint32_t>(1, static_cast<uint32_t>((late + iv / 2) / iv));
      f.jank = s.last_janky ? FrameJank::BufferStuffing : FrameJank::CompositorLate;
    } else if (f.present_ns) {
      s.latency_ns.push_back(f.present_ns - f.expected_start_ns);
      if (s.latency_ns.size() > kLatencySamples) s.latency_ns.pop_front();
    }
  }
  f.janky = f.jank != FrameJank::None;
  if (f.present_ns) s.last_present_ns = f.present_ns;
  s.last_janky = f.janky;
  s.stats.add(f);
  finished_.push_back(f);
}

void FrameTracker::tick(uint64_t now_ns) {
  for (auto& [k, s] : surfaces_)
    while (!s.pending.empty() && s.pending.front().deadline_ns <= now_ns) {
      FrameTiming f = s.pending.front().f;
      s.pending.pop_front();
      finish(s, f, false);
    }
}

void FrameTracker::forget(pid_t pid) {
  for (auto it = surfaces_.begin(); it != surfaces_.end();) {
    if (it->first.pid != pid) {
      ++it;
      continue;
    }
    Surface& s = it->second;
    while (!s.pending.empty()) {
      FrameTiming f = s.pending.front().f;
      s.pending.pop_front();
      finish(s, f, false);
    }
    s.open.reset();
    // A surface that had frames stays for the summary; one that had none goes.
    it = s.stats.frames() ? std::next(it) : surfaces_.erase(it);
  }
  procs_.erase(pid);
}

std::vector<FrameTiming> FrameTracker::take_finished() { return std::exchange(finished_, {}); }
std::vector<std::pair<pid_t, uint64_t>> FrameTracker::take_interval_updates() {
  return std::exchange(interval_updates_, {});
}
std::vector<pid_t> FrameTracker::take_new_processes() { return std::exchange(new_procs_, {}); }

std::vector<FrameTracker::SurfaceView> FrameTracker::surfaces() const {
  std::vector<SurfaceView> out;
  for (const auto& [k, s] : surfaces_) {
    if (!s.stats.frames()) continue;
    out.push_back({k, &s.stats, s.interval_ns, s.interval_source});
  }
  return out;
}

}  // namespace jankbpf::frame
