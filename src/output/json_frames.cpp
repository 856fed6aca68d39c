// The `frame` record (a janky frame of a Wayland client) and the summary's
// per-surface frame statistics, as JSON (README, Frames).
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>

#include "output/output.h"
#include "util/clock.h"

namespace jankbpf {
namespace {

using Json = nlohmann::ordered_json;

double ms3(double ms) { return std::round(ms * 1000.0) / 1000.0; }
double ns_ms(uint64_t ns) { return ms3(static_cast<double>(ns) / 1e6); }

std::string surface_name(uint32_t id) { return "wl_surface@" + std::to_string(id); }

}  // namespace

std::string to_json_line(const FrameRecord& r) {
  const FrameTiming& f = r.frame;
  Json j;
  j["type"] = "frame";
  j["time"] = r.time_ms;
  j["pid"] = r.proc.pid;
  j["tid"] = f.tid;
  j["uid"] = r.proc.uid;
  j["bundle_name"] = r.proc.name;
  j["bundle_version"] = r.proc.build_id;
  j["exe"] = r.proc.exe;
  j["thread_name"] = r.thread_name;
  j["surface"] = surface_name(f.surface);
  j["frame_number"] = f.number;
  j["begin_time"] = r.begin_time_ms;
  j["end_time"] = r.end_time_ms;
  j["duration_ms"] = ms3(f.duration_ms());
  j["interval_ms"] = ns_ms(f.interval_ns);
  j["interval_source"] = f.interval_source;
  j["pacing"] = f.pacing;
  Json expected{{"start_monotonic_ns", f.expected_start_ns}, {"deadline_monotonic_ns", f.deadline_ns}};
  if (f.expected_present_ns) expected["present_monotonic_ns"] = f.expected_present_ns;
  j["expected"] = expected;
  Json actual{{"start_monotonic_ns", f.start_ns}, {"end_monotonic_ns", f.end_ns}};
  if (f.present_ns) actual["present_monotonic_ns"] = f.present_ns;
  j["actual"] = actual;
  j["start_delay_ms"] = ns_ms(f.start_ns - f.expected_start_ns);
  j["over_deadline_ms"] = ns_ms(f.end_ns > f.deadline_ns ? f.end_ns - f.deadline_ns : 0);
  j["jank_type"] = frame_jank_name(f.jank);
  j["skipped_frames"] = f.skipped_frames;
  j["state_ms"] = Json{{"running", ms3(f.running_ms)},
                       {"runnable", ms3(f.runnable_ms)},
                       {"sleeping", ms3(f.sleeping_ms)},
                       {"blocked_io", ms3(f.blocked_io_ms)}};
  if (f.task_seq) j["task_seq"] = f.task_seq;
  if (!r.why.empty()) j["why"] = r.why;
  j["cgroup"] = r.proc.cgroup;
  if (!r.proc.container_id.empty()) j["container_id"] = r.proc.container_id;
  if (!r.runnable_name.empty()) j["runnable_name"] = r.runnable_name;
  j["heaviest_stack"] = r.heaviest_stack;
  j["samples"] = r.samples;
  Json stack = Json::array();
  for (const auto& fr : r.stack) {
    char hex[32];
    snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(fr.offset));
    Json jf{{"module_index", fr.module_index}, {"offset", hex}, {"symbol", fr.symbol}};
    if (!fr.file.empty()) jf["file"] = fr.line ? fr.file + ":" + std::to_string(fr.line) : fr.file;
    if (fr.kernel) jf["kernel"] = true;
    if (fr.jit) jf["jit"] = true;
    if (fr.inlined) jf["inlined"] = true;
    if (!fr.runtime.empty()) jf["runtime"] = fr.runtime;
    stack.push_back(std::move(jf));
  }
  j["stack"] = stack;
  Json modules = Json::array();
  for (const auto& [path, id] : r.modules) modules.push_back(Json::array({path, id}));
  j["modules"] = modules;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

void add_frame_summary(Json& j, const SummaryRecord& r) {
  Json rows = Json::array();
  for (const auto& s : r.frames) {
    Json row{{"pid", s.pid}, {"bundle_name", s.comm}, {"exe", s.exe}};
    if (!s.container_id.empty()) row["container_id"] = s.container_id;
    row["surface"] = surface_name(s.surface);
    row["frames"] = s.frames;
    row["janky_frames"] = s.janky;
    row["jank_rate"] = s.frames ? std::round(1e4 * s.janky / s.frames) / 1e4 : 0.0;
    row["slow_frames"] = s.slow;
    row["frozen_frames"] = s.frozen;
    row["abandoned"] = s.abandoned;
    Json types;
    for (size_t i = 1; i < std::size(s.by_jank); i++)
      types[frame_jank_name(static_cast<FrameJank>(i))] = s.by_jank[i];
    row["jank_types"] = types;
    row["frame_time_ms"] = Json{{"p50", ms3(s.p50_ms)}, {"p90", ms3(s.p90_ms)}, {"p99", ms3(s.p99_ms)},
                                {"max", ms3(s.max_ms)}};
    Json le = Json::array();
    for (double b : kFrameBucketsMs) le.push_back(b);
    row["histogram"] = Json{{"le_ms", le}, {"counts", s.buckets}};
    row["interval_ms"] = ms3(s.interval_ms);
    row["interval_source"] = s.interval_source;
    rows.push_back(std::move(row));
  }
  j["frames"] = rows;
  j["frame_records"] = r.frame_records;
  j["frame_samples"] = r.kernel.frame_samples;
  j["frame_events_lost"] = r.kernel.frame_events_lost;
  if (r.frame_surfaces_untracked) j["frame_surfaces_untracked"] = r.frame_surfaces_untracked;
}

}  // namespace jankbpf
