// Frames in the Perfetto trace as Perfetto's own FrameTimeline data source
// writes Android's (FrameTimelineEvent, TracePacket field 76): per frame an
// expected and an actual SurfaceFrame slice, begun by
// ExpectedSurfaceFrameStart / ActualSurfaceFrameStart and ended by FrameEnd
// with the same cookie, so the Perfetto UI shows its "Expected Timeline"
// and "Actual Timeline" tracks with the jank types.
#pragma once

#include <cstdint>
#include <string>

#include "report/run.h"

namespace jankbpf::report {

// Perfetto's JankType bits for a frame's verdict (FrameTimelineEvent.JankType).
int32_t perfetto_jank_bits(const FrameTiming& f);

// Every frame of the run as FrameTimelineEvent packets, each a Trace.packet
// field (append to the trace's bytes), on packet sequence `sequence`.
std::string frame_timeline_packets(const Run& run, uint32_t sequence);

}  // namespace jankbpf::report
