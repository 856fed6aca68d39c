#include "report/perfetto_frames.h"

#include "report/protobuf.h"

namespace jankbpf::report {
namespace {

// Field numbers from Perfetto's FrameTimelineEvent
// (protos/third_party/android/frameworks/native/tracing/frameworks_native_trace_packet.proto).
constexpr uint32_t kPacketTimestamp = 8, kPacketSequence = 10, kFrameTimelineEvent = 76;
constexpr uint32_t kExpectedSurfaceFrameStart = 3, kActualSurfaceFrameStart = 4, kFrameEnd = 5;
namespace sf {  // SurfaceFrameStart fields
constexpr uint32_t kCookie = 1, kToken = 2, kDisplayFrameToken = 3, kPid = 4, kLayerName = 5, kPresentType = 6,
                   kOnTimeFinish = 7, kGpuComposition = 8, kJankType = 9, kPredictionType = 10, kIsBuffer = 11,
                   kJankSeverityType = 12, kPresentDelayMillis = 13;
}
// Enum values.
constexpr int32_t kJankNone = 1, kJankAppDeadlineMissed = 64, kJankBufferStuffing = 128, kJankUnknown = 256,
                  kJankDropped = 1024, kJankSfCpuDeadlineMissed = 16;
constexpr uint64_t kPresentOnTime = 1, kPresentLate = 2, kPresentDropped = 4, kPresentUnknown = 5;
constexpr uint64_t kPredictionValid = 1;
constexpr uint64_t kSeverityNone = 1, kSeverityPartial = 2, kSeverityFull = 3;

void add_packet(ProtoWriter& trace, uint64_t ts, uint32_t sequence, uint32_t which, const ProtoWriter& body) {
  ProtoWriter ev;
  ev.message(which, body);
  ProtoWriter pk;
  pk.varint(kPacketTimestamp, ts);
  pk.varint(kPacketSequence, sequence);
  pk.message(kFrameTimelineEvent, ev);
  trace.message(1, pk);  // Trace.packet
}

void frame_end(ProtoWriter& trace, uint64_t ts, uint32_t sequence, int64_t cookie) {
  ProtoWriter e;
  e.sint(1, cookie);
  add_packet(trace, ts, sequence, kFrameEnd, e);
}

}  // namespace

int32_t perfetto_jank_bits(const FrameTiming& f) {
  switch (f.jank) {
    case FrameJank::None: return kJankNone;
    case FrameJank::AppDeadlineMissed: return kJankAppDeadlineMissed;
    case FrameJank::BufferStuffing: return kJankBufferStuffing;
    // The compositor is Android's SurfaceFlinger: it missed its own deadline.
    case FrameJank::CompositorLate: return kJankSfCpuDeadlineMissed;
    case FrameJank::Dropped: return kJankDropped;
    case FrameJank::Unknown: return kJankUnknown;
  }
  return kJankUnknown;
}

std::string frame_timeline_packets(const Run& run, uint32_t sequence) {
  ProtoWriter trace;
  int64_t token = 0;
  for (const FrameTiming& f : run.frames) {
    if (!f.start_ns || !f.end_ns || !f.expected_start_ns) continue;
    token++;
    const int64_t expected_cookie = 2 * token, actual_cookie = 2 * token + 1;
    auto it = run.frame_procs.find(f.pid);
    const std::string layer = "wl_surface@" + std::to_string(f.surface) +
                              (it != run.frame_procs.end() ? " (" + it->second + ")" : std::string());
    auto common = [&](ProtoWriter& w, int64_t cookie) {
      w.sint(sf::kCookie, cookie);
      w.sint(sf::kToken, token);
      w.sint(sf::kDisplayFrameToken, token);  // no compositor frames in this trace
      w.sint(sf::kPid, f.pid);
      w.string(sf::kLayerName, layer);
    };
    ProtoWriter expected;
    common(expected, expected_cookie);
    add_packet(trace, f.expected_start_ns, sequence, kExpectedSurfaceFrameStart, expected);
    frame_end(trace, f.deadline_ns, sequence, expected_cookie);

    ProtoWriter actual;
    common(actual, actual_cookie);
    const bool late_present = f.jank == FrameJank::BufferStuffing || f.jank == FrameJank::CompositorLate ||
                              (f.present_ns && f.expected_present_ns && f.present_ns > f.expected_present_ns + f.interval_ns / 2);
    actual.varint(sf::kPresentType, f.dropped ? kPresentDropped
                                    : !f.present_ns ? (f.janky ? kPresentLate : kPresentUnknown)
                                    : late_present || f.jank == FrameJank::AppDeadlineMissed ? kPresentLate
                                                                                             : kPresentOnTime);
    actual.boolean(sf::kOnTimeFinish, f.end_ns <= f.deadline_ns);
    actual.boolean(sf::kGpuComposition, false);
    actual.sint(sf::kJankType, perfetto_jank_bits(f));
    actual.varint(sf::kPredictionType, kPredictionValid);
    actual.boolean(sf::kIsBuffer, true);
    actual.varint(sf::kJankSeverityType, !f.janky ? kSeverityNone : f.skipped_frames > 1 ? kSeverityFull : kSeverityPartial);
    if (f.present_ns && f.expected_present_ns)
      actual.flt(sf::kPresentDelayMillis,
                 static_cast<float>((static_cast<int64_t>(f.present_ns) - static_cast<int64_t>(f.expected_present_ns)) / 1e6));
    add_packet(trace, f.start_ns, sequence, kActualSurfaceFrameStart, actual);
    frame_end(trace, f.end_ns, sequence, actual_cookie);
  }
  return trace.take();
}

}  // namespace jankbpf::report
