// `jankbpf report` reads `frame` records back (report/jsonl_reader.h): a
// janky frame's timelines and verdict, so the pictures made after the fact
// show the janky frames of a fleet's records (their stacks are in no log:
// the record's heaviest path only).
#include <nlohmann/json.hpp>

#include "report/json_field.h"
#include "report/jsonl_reader.h"

namespace jankbpf::report {
namespace {

using Json = nlohmann::json;

// Range-checked as the reader's own fields are (report/json_field.h): a
// frame's pid of 1e76 was converted as is, which is undefined.
template <typename T>
T get(const Json& j, const char* key, T fallback) {
  return json_field<T>(j, key, fallback);
}

FrameJank jank_of(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(FrameJank::Unknown); i++)
    if (s == frame_jank_name(static_cast<FrameJank>(i))) return static_cast<FrameJank>(i);
  return FrameJank::Unknown;
}

}  // namespace

bool frame_from_json(const nlohmann::json& j, FrameRecord* rec) {
  if (!j.is_object() || get<std::string>(j, "type", "") != "frame") return false;
  FrameRecord r;
  FrameTiming& f = r.frame;
  r.time_ms = get<int64_t>(j, "time", 0);
  r.begin_time_ms = get<int64_t>(j, "begin_time", 0);
  r.end_time_ms = get<int64_t>(j, "end_time", 0);
  r.proc.pid = f.pid = get<pid_t>(j, "pid", 0);
  f.tid = get<pid_t>(j, "tid", 0);
  r.proc.name = get<std::string>(j, "bundle_name", "");
  r.proc.exe = get<std::string>(j, "exe", "");
  r.thread_name = get<std::string>(j, "thread_name", "");
  const std::string surface = get<std::string>(j, "surface", "");
  if (surface.starts_with("wl_surface@")) f.surface = static_cast<uint32_t>(strtoul(surface.c_str() + 11, nullptr, 10));
  f.number = get<uint64_t>(j, "frame_number", 0);
  f.interval_ns = static_cast<uint64_t>(get<double>(j, "interval_ms", 0) * 1e6);
  const Json none = Json::object();
  const Json& ex = j.contains("expected") && j["expected"].is_object() ? j["expected"] : none;
  const Json& ac = j.contains("actual") && j["actual"].is_object() ? j["actual"] : none;
  f.expected_start_ns = get<uint64_t>(ex, "start_monotonic_ns", 0);
  f.deadline_ns = get<uint64_t>(ex, "deadline_monotonic_ns", 0);
  f.expected_present_ns = get<uint64_t>(ex, "present_monotonic_ns", 0);
  f.start_ns = get<uint64_t>(ac, "start_monotonic_ns", 0);
  f.end_ns = get<uint64_t>(ac, "end_monotonic_ns", 0);
  f.present_ns = get<uint64_t>(ac, "present_monotonic_ns", 0);
  if (!f.start_ns || f.end_ns < f.start_ns || f.expected_start_ns > f.start_ns) return false;
  f.jank = jank_of(get<std::string>(j, "jank_type", ""));
  f.janky = f.jank != FrameJank::None;
  f.dropped = f.jank == FrameJank::Dropped;
  f.skipped_frames = get<uint32_t>(j, "skipped_frames", 0);
  f.task_seq = get<uint64_t>(j, "task_seq", 0);
  if (auto s = j.find("state_ms"); s != j.end() && s->is_object()) {
    f.running_ms = get<double>(*s, "running", 0);
    f.runnable_ms = get<double>(*s, "runnable", 0);
    f.sleeping_ms = get<double>(*s, "sleeping", 0);
    f.blocked_io_ms = get<double>(*s, "blocked_io", 0);
  }
  r.runnable_name = get<std::string>(j, "runnable_name", "");
  // The why of its long task (frame/frame_causes.h): one line, a few at most.
  if (auto w = j.find("why"); w != j.end() && w->is_array())
    for (const auto& line : *w)
      if (line.is_string() && r.why.size() < 4) r.why.push_back(line.get<std::string>());
  r.heaviest_stack = get<std::string>(j, "heaviest_stack", "");
  *rec = std::move(r);
  return true;
}

}  // namespace jankbpf::report
