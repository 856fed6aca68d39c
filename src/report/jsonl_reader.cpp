#include "report/jsonl_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "cause/kinds.h"
#include "report/input_file.h"
#include "report/json_field.h"
#include "report/sampled.h"

namespace jankbpf::report {
namespace {

using Json = nlohmann::json;

// What one JSON line may make the reader hold or do, far above what
// jankbpf writes: a record is a few KiB, nests 4 deep, names a stack log
// and a trace.
constexpr size_t kMaxLine = 4u << 20;
constexpr size_t kMaxNesting = 16;
constexpr size_t kMaxArray = 256;        // strings in a stack, off-CPU periods
constexpr size_t kMaxExternalLogs = 8;   // files one record may name
constexpr uint64_t kMaxStackLog = 64u << 20;

template <typename T>
T get(const Json& j, const char* key, T fallback) {
  return json_field<T>(j, key, fallback);
}

std::vector<std::string> strings(const Json& j, const char* key, size_t max = kMaxArray) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (out.size() >= max) break;
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// Nesting of a JSON text, counted before parsing it (records nest 4 deep).
size_t nesting(std::string_view s) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth) {
      depth--;
    }
  }
  return deepest;
}

// One line of at most kMaxLine bytes (the rest of a longer one is skipped,
// *too_long set). False at the end of the input.
bool read_line(std::istream& in, std::string& line, bool* too_long) {
  line.clear();
  *too_long = false;
  std::streambuf* sb = in.rdbuf();
  if (!sb) return false;
  bool any = false;
  for (;;) {
    int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) return any;
    any = true;
    if (c == '\n') return true;
    if (line.size() < kMaxLine) line.push_back(static_cast<char>(c));
    else *too_long = true;
  }
}

bool is_file(const std::string& p) {
  struct stat st{};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The log where it was written, else by its name in one of the given dirs.
std::string find_log(const std::string& recorded, const ReadOptions& opts) {
  if (is_file(recorded)) return recorded;
  auto slash = recorded.rfind('/');
  std::string name = slash == std::string::npos ? recorded : recorded.substr(slash + 1);
  for (const auto& d : opts.log_dirs)
    if (is_file(d + "/" + name)) return d + "/" + name;
  return "";
}

// A thread a cause names, and one level on at most (a record's chain is
// one level deep; deeper nesting is not followed).
CauseThread cause_thread_from(const Json& j, bool next_level) {
  CauseThread t;
  t.pid = get<pid_t>(j, "pid", 0);
  t.tid = get<pid_t>(j, "tid", 0);
  t.comm = get<std::string>(j, "comm", "");
  t.claim = get<bool>(j, "claim", false);
  t.verified = get<bool>(j, "verified", false);
  t.followed = j.contains("followed_ms");
  t.followed_ms = get<double>(j, "followed_ms", 0);
  if (auto s = j.find("state_ms"); s != j.end() && s->is_object()) {
    t.state.running_ms = get<double>(*s, "running", 0);
    t.state.runnable_ms = get<double>(*s, "runnable", 0);
    t.state.sleeping_ms = get<double>(*s, "sleeping", 0);
    t.state.blocked_io_ms = get<double>(*s, "blocked_io", 0);
  }
  t.samples = get<uint32_t>(j, "samples", 0);
  t.function = get<std::string>(j, "function", "");
  t.file = get<std::string>(j, "file", "");
  t.stack = strings(j, "stack", 16);
  if (auto w = j.find("waited"); w != j.end() && w->is_object()) {
    t.waited_kind = get<std::string>(*w, "kind", "");
    t.waited_syscall = get<std::string>(*w, "syscall", "");
    t.waited_address = std::strtoull(get<std::string>(*w, "address", "0").c_str(), nullptr, 16);
    if (auto n = w->find("thread"); next_level && n != w->end() && n->is_object())
      t.next.push_back(cause_thread_from(*n, false));
  }
  return t;
}

// The `cause` slices (README "Why"), for the report's renderings; a slice
// of a kind jankbpf does not write is left out.
void causes_from(const Json& j, TaskRecord& r) {
  auto c = j.find("cause");
  if (c == j.end() || !c->is_array()) return;
  r.causes_known = true;
  r.why = get<std::string>(j, "why", "");
  for (const auto& jc : *c) {
    if (r.cause.size() >= kMaxArray) break;
    if (!jc.is_object()) continue;
    CauseSlice s;
    s.kind = get<std::string>(jc, "kind", "");
    if (cause::kind_rank(s.kind) >= cause::kKinds.size()) continue;
    s.ms = get<double>(jc, "ms", 0);
    s.count = get<uint32_t>(jc, "count", 0);
    s.syscall = get<std::string>(jc, "syscall", "");
    s.state = get<std::string>(jc, "state", "");
    if (auto a = jc.find("address"); a != jc.end() && a->is_string()) {
      s.has_address = true;
      s.address = std::strtoull(a->get<std::string>().c_str(), nullptr, 16);
      s.address_where = get<std::string>(jc, "where", "");
    }
    if (auto o = jc.find("owner"); o != jc.end() && o->is_object()) s.owner = cause_thread_from(*o, true);
    if (auto w = jc.find(s.kind == "peer" ? "peer" : "waker"); w != jc.end() && w->is_object())
      s.waker = cause_thread_from(*w, true);
    s.in_interrupt = get<bool>(jc, "in_interrupt", false);
    s.by_kernel = get<bool>(jc, "by_kernel", false);
    s.fd = get<int>(jc, "fd", -1);
    s.fd_path = get<std::string>(jc, "fd_path", "");
    s.preempted = get<uint32_t>(jc, "preempted", 0);
    if (auto t = jc.find("cpu_tasks"); t != jc.end() && t->is_array())
      for (const auto& jt : *t) {
        if (s.cpu_tasks.size() >= 8) break;
        if (jt.is_object())
          s.cpu_tasks.push_back({get<pid_t>(jt, "pid", 0), get<pid_t>(jt, "tid", 0), get<std::string>(jt, "comm", ""),
                                 get<double>(jt, "ms", 0)});
      }
    s.cpu_others_ms = get<double>(jc, "cpu_others_ms", 0);
    s.cgroup = get<std::string>(jc, "cgroup", "");
    s.cgroup_fs = get<std::string>(jc, "cgroup_fs", "");
    s.quota = get<std::string>(jc, "quota", "");
    s.frame = get<std::string>(jc, "frame", "");
    s.kernel_stack = strings(jc, "kernel_stack", 16);
    s.unattributed = get<bool>(jc, "unattributed", false);
    r.cause.push_back(std::move(s));
  }
}

}  // namespace

namespace {

bool task_from(const Json& j, TaskRecord* rec) {
  std::string type = get<std::string>(j, "type", "");
  if (type != "jank" && type != "hang") return false;
  TaskRecord& r = *rec;
  r.kind = type == "hang" ? TaskRecord::Kind::Hang : TaskRecord::Kind::Jank;
  r.time_ms = get<int64_t>(j, "time", 0);
  r.proc.pid = get<pid_t>(j, "pid", 0);
  r.tid = get<pid_t>(j, "tid", 0);
  r.proc.uid = get<uint32_t>(j, "uid", 0);
  r.proc.name = get<std::string>(j, "bundle_name", "");
  r.proc.build_id = get<std::string>(j, "bundle_version", "");
  r.proc.exe = get<std::string>(j, "exe", "");
  r.thread_name = get<std::string>(j, "thread_name", "");
  r.begin_time_ms = get<int64_t>(j, "begin_time", 0);
  r.end_time_ms = get<int64_t>(j, "end_time", 0);
  r.duration_ms = get<double>(j, "duration_ms", 0);
  r.threshold_ms = get<uint32_t>(j, "threshold_ms", 0);
  if (auto s = j.find("state_ms"); s != j.end() && s->is_object()) {
    r.state.running_ms = get<double>(*s, "running", 0);
    r.state.runnable_ms = get<double>(*s, "runnable", 0);
    r.state.sleeping_ms = get<double>(*s, "sleeping", 0);
    r.state.blocked_io_ms = get<double>(*s, "blocked_io", 0);
  }
  r.delivery_ms = get<double>(j, "delivery_ms", 0);
  r.wait_syscall = get<std::string>(j, "wait_syscall", "");
  const std::string boundary = get<std::string>(j, "boundary", "syscall");
  r.boundary = boundary == "marker" ? Boundary::Marker : boundary == "after_marker" ? Boundary::AfterMarker : Boundary::Syscall;
  r.runnable_name = get<std::string>(j, "runnable_name", "");
  r.proc.cgroup = get<std::string>(j, "cgroup", "");
  r.begin_mono_ns = get<uint64_t>(j, "begin_monotonic_ns", 0);
  r.task_seq = get<uint64_t>(j, "task_seq", 0);
  r.seen_running = get<bool>(j, "seen_running", false);
  r.unrecovered = get<bool>(j, "unrecovered", false);
  r.begin_at_switch_in = get<bool>(j, "begin_at_switch_in", false);
  r.external_log = strings(j, "external_log", kMaxExternalLogs);
  r.log_over_limit = get<bool>(j, "log_over_limit", false);
  r.suppressed = parse_suppressed(get<std::string>(j, "suppressed", ""));
  r.heaviest_stack = get<std::string>(j, "heaviest_stack", "");
  r.samples = get<uint32_t>(j, "samples", 0);
  if (auto o = j.find("off_cpu"); o != j.end() && o->is_array()) {
    for (const auto& jo : *o) {
      if (r.off_cpu.size() >= kMaxArray) break;
      if (!jo.is_object()) continue;
      OffCpuInfo info;
      info.state = get<std::string>(jo, "state", "");
      info.duration_ms = get<double>(jo, "duration_ms", 0);
      info.kernel_stack = strings(jo, "kernel_stack");
      if (auto w = jo.find("waker"); w != jo.end() && w->is_object()) {
        info.has_waker = true;
        info.waker.pid = get<pid_t>(*w, "pid", 0);
        info.waker.tid = get<pid_t>(*w, "tid", 0);
        info.waker.comm = get<std::string>(*w, "comm", "");
        info.waker.in_interrupt = get<bool>(*w, "in_interrupt", false);
        info.waker.kernel_stack = strings(*w, "kernel_stack");
        info.waker.user_stack = strings(*w, "user_stack");
      }
      r.off_cpu.push_back(std::move(info));
    }
  }
  causes_from(j, r);
  return true;
}

Json parse_record(const std::string& line) {
  if (nesting(line) > kMaxNesting) return Json(Json::value_t::discarded);
  return Json::parse(line, nullptr, false);
}

}  // namespace

bool task_from_json(const std::string& line, TaskRecord* rec, std::string* error) {
  Json j = parse_record(line);
  if (j.is_discarded() || !j.is_object()) {
    *error = "not a JSON object";
    return false;
  }
  return task_from(j, rec);
}

Run read_jsonl(std::istream& in, const ReadOptions& opts, ReadStats* stats) {
  Run run;
  // A stack log is read once, however many records name it: by file
  // identity, the task whose samples came from it.
  std::map<std::pair<dev_t, ino_t>, size_t> logs_read;
  std::string line;
  bool too_long = false;
  while (read_line(in, line, &too_long)) {
    stats->lines++;
    if (too_long) {
      stats->bad_lines++;
      stats->lines_too_long++;
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j = parse_record(line);
    if (j.is_discarded() || !j.is_object()) {
      stats->bad_lines++;
      continue;
    }
    std::string type = get<std::string>(j, "type", "");
    if (type == "exit") {
      ExitRecord e;
      e.time_ms = get<int64_t>(j, "time", 0);
      e.pid = get<pid_t>(j, "pid", 0);
      e.name = get<std::string>(j, "bundle_name", "");
      e.exit_code = get<int>(j, "exit_code", 0);
      e.target = get<bool>(j, "target", false);
      run.add(std::move(e));
      stats->records++;
      continue;
    }
    if (type == "frame") {  // a janky frame: its record, and its place in the strip
      FrameRecord f;
      if (frame_from_json(j, &f)) {
        FrameBatch b;
        b.frames.push_back(f.frame);
        b.procs.push_back({f.proc.pid, {f.proc.name, f.proc.exe, ""}});
        run.add(b);
        run.add(std::move(f));
        stats->records++;
      }
      continue;
    }
    if (type == "summary") {
      SummaryRecord s;
      s.time_ms = get<int64_t>(j, "time", 0);
      s.elapsed_s = get<double>(j, "elapsed_s", 0);
      s.kernel.tasks = get<uint64_t>(j, "tasks_checked", 0);
      s.janks = get<uint64_t>(j, "janks", 0);
      s.hangs = get<uint64_t>(j, "hangs", 0);
      run.summary = s;
      stats->records++;
      continue;
    }
    TaskRecord r;
    if (!task_from(j, &r)) continue;  // another kind of record
    j = Json();
    stats->records++;
    if (run.tasks.size() >= Run::kMaxTasks) {  // not kept: its logs are not read either
      run.add(std::move(r));
      continue;
    }
    // Every sample of the task, from its stack log (the tree keeps counts,
    // not times); the recorded paths are rewritten to where the files are.
    std::optional<size_t> same_as;
    for (auto& p : r.external_log) {
      std::string found = find_log(p, opts);
      if (found.empty()) {
        stats->logs_missing++;
        continue;
      }
      p = found;
      auto slash = found.rfind('/');
      std::string name = slash == std::string::npos ? found : found.substr(slash + 1);
      if (!opts.read_logs || !name.starts_with("stack-") || !name.ends_with(".txt")) continue;
      Opened f = open_input_file(found, kMaxStackLog);
      if (!f) {
        stats->logs_refused++;
        if (stats->refusals.size() < 5) stats->refusals.push_back(f.error);
        continue;
      }
      auto key = std::make_pair(f.st.st_dev, f.st.st_ino);
      if (auto it = logs_read.find(key); it != logs_read.end()) {
        same_as = it->second;
        r.sampled.clear();
        stats->logs_repeated++;
        continue;
      }
      std::string text;
      read_bounded(f.fd.get(), text, kMaxStackLog);
      bool truncated = false;
      r.sampled = parse_stack_log(text, StackLogLimits{}, &truncated);
      stats->logs_truncated += truncated;
      stats->stack_logs++;
      same_as.reset();
      logs_read[key] = run.tasks.size();
    }
    if (same_as) run.add_samples_of(std::move(r), *same_as);
    else run.add(std::move(r));
  }
  stats->samples_dropped = run.samples_dropped;
  return run;
}

}  // namespace jankbpf::report
