#include "report/html.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <unordered_map>

#include "cause/largest.h"
#include "report/cause_view.h"
#include "report_assets.h"  // generated from src/report/assets at build time

namespace jankbpf::report {
namespace {

using Json = nlohmann::json;

void replace_once(std::string& s, std::string_view what, std::string_view with) {
  auto at = s.find(what);
  if (at != std::string::npos) s.replace(at, what.size(), with);
}

Json task_json(const TaskEntry& e, bool has_jank) {
  const TaskRecord& r = e.rec;
  Json t;
  t["kind"] = r.kind == TaskRecord::Kind::Hang ? "hang" : "jank";
  if (has_jank) t["has_jank"] = true;
  t["pid"] = r.proc.pid;
  t["tid"] = r.tid;
  t["proc"] = r.proc.name;
  t["thread"] = r.thread_name;
  t["exe"] = r.proc.exe;
  t["begin"] = r.begin_time_ms;
  t["mono"] = r.begin_mono_ns;
  t["dur"] = r.duration_ms;
  t["thr"] = r.threshold_ms;
  t["state"] = {r.state.running_ms, r.state.runnable_ms, r.state.sleeping_ms, r.state.blocked_io_ms};
  t["delivery"] = r.delivery_ms;
  t["wait"] = r.wait_syscall;
  t["boundary"] = boundary_name(r.boundary);
  t["runnable"] = r.runnable_name;
  t["seq"] = r.task_seq;
  t["logs"] = r.external_log;
  t["suppressed"] = suppressed_text(r.suppressed);
  // Samples merged per stack: the page needs counts, not times.
  std::unordered_map<uint32_t, uint64_t> n;
  std::vector<uint32_t> order;
  uint64_t total = 0;
  for (const auto& s : e.samples) {
    if (!n.count(s.stack)) order.push_back(s.stack);
    n[s.stack] += s.count;
    total += s.count;
  }
  Json samples = Json::array();
  for (uint32_t s : order) samples.push_back({s, n[s]});
  t["samples"] = std::move(samples);
  t["nsamples"] = total ? total : r.samples;
  Json off = Json::array();
  for (const auto& o : r.off_cpu) {
    Json jo{{"state", o.state}, {"dur", o.duration_ms}, {"kstack", o.kernel_stack}};
    if (o.has_waker)
      jo["waker"] = {{"pid", o.waker.pid}, {"tid", o.waker.tid}, {"comm", o.waker.comm},
                     {"irq", o.waker.in_interrupt},
                     {"kstack", o.waker.kernel_stack}, {"ustack", o.waker.user_stack}};
    off.push_back(std::move(jo));
  }
  t["off"] = std::move(off);
  // Why (README "Why"): the line, its slices with their identities, and
  // the kind of the largest cause (the process's causes table counts it).
  if (r.causes_known) {
    t["why"] = r.why;
    Json cause = Json::array();
    for (const auto& c : r.cause) cause.push_back({{"kind", c.kind}, {"ms", c.ms}, {"id", cause_identity(c)}});
    t["cause"] = std::move(cause);
    t["largest"] = std::string(cause::largest_kind(r));
  }
  return t;
}

// Frames (issue 28): per surface every frame kept as [start (ms from the
// first frame), duration, ms from start to deadline, janky frame's index or
// -1]; the janky frames with their details and samples.
void add_frames(Json& d, const Run& run) {
  if (run.frames.empty() && run.janky_frames.empty()) return;
  std::map<std::tuple<pid_t, uint32_t, uint64_t>, int64_t> janky_index;  // (pid, surface, number)
  Json jf = Json::array();
  for (size_t i = 0; i < run.janky_frames.size(); i++) {
    const auto& e = run.janky_frames[i];
    const FrameTiming& f = e.rec.frame;
    janky_index[{f.pid, f.surface, f.number}] = static_cast<int64_t>(i);
    Json j;
    j["pid"] = f.pid;
    j["tid"] = f.tid;
    j["proc"] = e.rec.proc.name;
    j["surface"] = f.surface;
    j["n"] = f.number;
    j["begin"] = e.rec.begin_time_ms;
    j["dur"] = f.duration_ms();
    j["interval"] = f.interval_ns / 1e6;
    j["jank"] = frame_jank_name(f.jank);
    j["skipped"] = f.skipped_frames;
    j["delay"] = (f.start_ns - f.expected_start_ns) / 1e6;
    j["over"] = f.end_ns > f.deadline_ns ? (f.end_ns - f.deadline_ns) / 1e6 : 0.0;
    j["present"] = f.present_ns ? (static_cast<double>(f.present_ns) - static_cast<double>(f.start_ns)) / 1e6 : -1.0;
    j["state"] = {f.running_ms, f.runnable_ms, f.sleeping_ms, f.blocked_io_ms};
    j["task_seq"] = f.task_seq;
    j["runnable"] = e.rec.runnable_name;
    j["why"] = e.rec.why;
    std::map<uint32_t, uint64_t> n;
    for (const auto& smp : e.samples) n[smp.stack] += smp.count;
    Json samples = Json::array();
    for (auto [st, c] : n) samples.push_back({st, c});
    j["samples"] = std::move(samples);
    jf.push_back(std::move(j));
  }
  d["jframes"] = std::move(jf);
  uint64_t t0 = 0;
  for (const auto& f : run.frames)
    if (f.start_ns && (!t0 || f.start_ns < t0)) t0 = f.start_ns;
  std::map<std::pair<pid_t, uint32_t>, Json> surfaces;
  for (const auto& f : run.frames) {
    auto [it, fresh] = surfaces.try_emplace({f.pid, f.surface});
    Json& sj = it->second;
    if (fresh) {
      auto p = run.frame_procs.find(f.pid);
      sj = Json{{"pid", f.pid}, {"proc", p != run.frame_procs.end() ? p->second : std::string("?")},
                {"surface", f.surface}, {"interval", f.interval_ns / 1e6}, {"frames", Json::array()}};
    }
    auto ji = janky_index.find({f.pid, f.surface, f.number});
    sj["frames"].push_back({std::round((f.start_ns - t0) / 1e5) / 10, std::round(f.duration_ms() * 100) / 100,
                            std::round((f.deadline_ns - f.start_ns) / 1e5) / 10,
                            ji != janky_index.end() ? ji->second : int64_t{-1}});
  }
  Json list = Json::array();
  for (auto& [k, sj] : surfaces) list.push_back(std::move(sj));
  d["fsurfaces"] = std::move(list);
  d["frames_dropped"] = run.frames_dropped;
}

}  // namespace

std::string script_safe_json(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  for (char c : json) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_html(const Run& run, bool final, int64_t generated_ms) {
  Json d;
  d["generated"] = generated_ms;
  d["final"] = final;
  d["dropped"] = run.tasks_dropped;
  if (run.summary)
    d["summary"] = {{"elapsed_s", run.summary->elapsed_s}, {"tasks_checked", run.summary->kernel.tasks}};
  Json frames = Json::array();
  for (const auto& f : run.table.frames()) frames.push_back({f.name, f.module});
  d["frames"] = std::move(frames);
  Json stacks = Json::array();
  for (const auto& s : run.table.stacks()) {
    Json a = Json::array();
    if (s.wait_state) a.push_back(std::string(1, s.wait_state));
    else a.push_back(0);
    for (uint32_t f : s.frames) a.push_back(f);
    stacks.push_back(std::move(a));
  }
  d["stacks"] = std::move(stacks);
  // Which hangs have their task's final jank in the run.
  std::set<std::tuple<pid_t, uint64_t, uint64_t>> janks;
  for (const auto& t : run.tasks)
    if (t.rec.kind == TaskRecord::Kind::Jank) janks.insert({t.rec.tid, t.rec.task_seq, t.rec.begin_mono_ns});
  Json tasks = Json::array();
  for (const auto& t : run.tasks)
    tasks.push_back(task_json(t, t.rec.kind == TaskRecord::Kind::Hang &&
                                     janks.count({t.rec.tid, t.rec.task_seq, t.rec.begin_mono_ns})));
  d["tasks"] = std::move(tasks);
  add_frames(d, run);
  // ensure_ascii: every non-ASCII character (U+2028 included) as \uXXXX;
  // invalid UTF-8 in process names replaced, never thrown.
  std::string data = script_safe_json(d.dump(-1, ' ', true, Json::error_handler_t::replace));

  std::string page(assets::kReportHtml);
  replace_once(page, "/*JB:CSS*/", assets::kReportCss);
  replace_once(page, "/*JB:JS*/", assets::kReportJs);
  replace_once(page, "/*JB:DATA*/", data);  // last: the data may contain the other markers' text
  return page;
}

}  // namespace jankbpf::report
