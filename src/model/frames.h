// Frames of Wayland clients (issue 28), as plain data: one frame's
// timelines and verdict, the `frame` record of a janky one, and the
// per-surface statistics of the summary. Built in src/frame/, rendered by
// the sinks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace jankbpf {

struct ProcessIdentity;
struct StateBreakdown;

// The seed's FrameTimeline jank types, as they map to a Wayland client
// (README, Frames).
enum class FrameJank {
  None,
  AppDeadlineMissed,  // committed after its deadline: the app's own work was late
  BufferStuffing,     // on time, shown late because the frame before it was late
  CompositorLate,     // on time, shown a refresh or more later than the surface's usual
  Dropped,            // the compositor discarded it (never shown)
  Unknown,            // janky, cause not known (never committed before its surface went)
};
const char* frame_jank_name(FrameJank j);  // "none", "app_deadline_missed", ...

// One frame of one surface, CLOCK_MONOTONIC nanoseconds (0: unknown).
struct FrameTiming {
  pid_t pid = 0, tid = 0;
  uint32_t surface = 0;        // the wl_surface's protocol id
  uint64_t number = 0;         // frames of this surface so far, from 1
  // Expected timeline: when the frame could start (its callback reached
  // the client), its deadline (start + one refresh), and when it would be
  // shown (start + the surface's usual latency to present).
  uint64_t expected_start_ns = 0, deadline_ns = 0, expected_present_ns = 0;
  // Actual timeline: callback dispatched, surface committed, presented.
  uint64_t start_ns = 0, end_ns = 0, present_ns = 0;
  uint64_t interval_ns = 0;
  const char* interval_source = "default";  // "flag", "presentation", "output", "default"
  const char* pacing = "callback";          // "callback", or "swap" (EGL/Vulkan throttled)
  FrameJank jank = FrameJank::None;
  uint32_t skipped_frames = 0;  // refreshes the frame cost beyond its own (Choreographer's count)
  bool janky = false;
  bool dropped = false;         // the compositor discarded it
  // The main thread over the frame (ms): exact within one task; across
  // tasks the off-CPU time outside the committing task counts as sleeping.
  double running_ms = 0, runnable_ms = 0, sleeping_ms = 0, blocked_io_ms = 0;
  uint64_t task_seq = 0;        // the long task (jank record) the frame is part of, 0: none
  double duration_ms() const { return end_ns > start_ns ? (end_ns - start_ns) / 1e6 : 0; }
};

// What a record's sinks need of a stack sample (same shape as a task's).
struct SampledStack;
struct StackFrame;

// Histogram bounds of frame times, ms (upper, inclusive); the last bucket
// is +Inf.
inline constexpr double kFrameBucketsMs[] = {4, 8, 12, 16, 16.7, 20, 25, 33.4, 50, 100, 250, 700, 1000};

// Per process and surface, over the run.
struct SurfaceFrameStats {
  pid_t pid = 0;
  std::string comm, exe, container_id;
  uint32_t surface = 0;
  uint64_t frames = 0, janky = 0, slow = 0, frozen = 0, abandoned = 0;
  uint64_t by_jank[6] = {};  // per FrameJank
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0, sum_ms = 0;
  std::vector<uint64_t> buckets;  // per kFrameBucketsMs bound, then +Inf; not cumulative
  double interval_ms = 0;
  std::string interval_source;
};

}  // namespace jankbpf
