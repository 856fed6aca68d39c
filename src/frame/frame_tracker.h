// From the kernel's frame events (bpf/frames.bpf.h) to frames: which
// callback began which surface's frame, which commit ended it, what the
// compositor said of its presentation; each frame's expected and actual
// timelines, its jank type and skipped frames (README, Frames), and each
// surface's statistics. Pure logic on the events it is given, so the unit
// tests drive it with made-up ones.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "frame/frame_stats.h"
#include "jankbpf/events.h"
#include "model/frames.h"

namespace jankbpf::frame {

struct TrackerConfig {
  uint64_t fixed_interval_ns = 0;         // --frame-interval (0: the compositor's)
  uint64_t default_interval_ns = 16'666'667;
  uint64_t threshold_ns = 150'000'000;    // a frame inside a task this long links to its jank
  uint64_t present_timeout_ns = 1'000'000'000;  // a feedback that never comes
};

// Converts a presentation clock's time to CLOCK_MONOTONIC (the tracker
// asks; the monitor answers from clock_gettime pairs).
struct ClockOffsets {
  int64_t raw_minus_mono = 0;   // CLOCK_MONOTONIC_RAW - CLOCK_MONOTONIC
  int64_t boot_minus_mono = 0;  // CLOCK_BOOTTIME - CLOCK_MONOTONIC
};

class FrameTracker {
 public:
  explicit FrameTracker(TrackerConfig cfg) : cfg_(cfg) {}

  void on_event(const jb_frame_event& e, const ClockOffsets& clocks);
  // Frames whose present never came in time are finished without it.
  void tick(uint64_t now_ns);
  void forget(pid_t pid);

  // Frames finished since the last call, in order (janky or not).
  std::vector<FrameTiming> take_finished();
  // Refresh intervals learned since the last call: (pid, ns) for the kernel.
  std::vector<std::pair<pid_t, uint64_t>> take_interval_updates();
  // Processes seen (their first frame event) since the last call.
  std::vector<pid_t> take_new_processes();

  struct SurfaceKey {
    pid_t pid;
    uint64_t display;
    uint32_t surface;
    auto operator<=>(const SurfaceKey&) const = default;
  };
  // Per surface: its statistics, interval and where it came from.
  struct SurfaceView {
    SurfaceKey key;
    const FrameStats* stats;
    uint64_t interval_ns;
    const char* interval_source;
  };
  std::vector<SurfaceView> surfaces() const;
  uint64_t abandoned() const { return abandoned_; }
  // Surfaces followed at once (each holds its statistics for the summary);
  // events of further surfaces are counted here and ignored.
  static constexpr size_t kMaxSurfaces = 1024;
  uint64_t untracked() const { return untracked_; }

 private:
  struct Snapshot {  // the thread at an event
    uint64_t time_ns = 0, exec_ns = 0, delay_ns = 0, task_seq = 0, task_begin_ns = 0;
    uint64_t state_ns[JB_ST_NR] = {};
    bool in_task = false;
  };
  struct Open {
    Snapshot begin;
    pid_t tid = 0;
    uint32_t done_ms = 0;
    uint64_t delivery_ns = 0;
    bool other_queue = false;
  };
  struct Pending {  // committed, waiting for its feedback
    FrameTiming f;
    uint32_t feedback = 0;
    uint64_t deadline_ns = 0;  // give up waiting then
  };
  struct Surface {
    std::optional<Open> open;
    uint32_t next_feedback = 0;  // for the next commit
    uint64_t last_commit_ns = 0, last_present_ns = 0;
    uint64_t frames = 0;
    uint64_t refresh_ns = 0;     // from its presentation feedback
    uint64_t interval_ns = 0;    // its last frame's, and where it came from
    const char* interval_source = "default";
    bool last_janky = false;
    std::deque<Pending> pending;
    std::deque<uint64_t> latency_ns;       // start -> present of recent on-time frames
    FrameStats stats;
  };
  struct Process {
    uint64_t output_interval_ns = 0;
    uint32_t clock_id = UINT32_MAX;  // presentation clock (unknown until told)
    uint64_t pushed_interval_ns = 0;
  };

  static Snapshot snapshot(const jb_frame_event& e);
  Surface* surface(const jb_frame_event& e);  // nullptr past kMaxSurfaces
  std::pair<uint64_t, const char*> interval(const SurfaceKey& k, const Surface& s) const;
  void on_commit(const jb_frame_event& e);
  void on_presented(const jb_frame_event& e, const ClockOffsets& clocks, bool discarded);
  void finish(Surface& s, FrameTiming f, bool verdict_with_present);
  void note_interval(pid_t pid);

  TrackerConfig cfg_;
  std::map<SurfaceKey, Surface> surfaces_;
  std::map<pid_t, Process> procs_;
  std::vector<FrameTiming> finished_;
  std::vector<std::pair<pid_t, uint64_t>> interval_updates_;
  std::vector<pid_t> new_procs_;
  uint64_t abandoned_ = 0, untracked_ = 0;
};

}  // namespace jankbpf::frame
