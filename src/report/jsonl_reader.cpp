#include "report/jsonl_reader.h"

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report/sampled.h"

namespace jankbpf::report {
namespace {

using Json = nlohmann::json;

template <typename T>
T get(const Json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const Json::exception&) {
    return fallback;
  }
}

std::vector<std::string> strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
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

}  // namespace

bool task_from_json(const std::string& line, TaskRecord* rec, std::string* error) {
  Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "not a JSON object";
    return false;
  }
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
  r.external_log = strings(j, "external_log");
  r.log_over_limit = get<bool>(j, "log_over_limit", false);
  r.suppressed = parse_suppressed(get<std::string>(j, "suppressed", ""));
  r.heaviest_stack = get<std::string>(j, "heaviest_stack", "");
  r.samples = get<uint32_t>(j, "samples", 0);
  if (auto o = j.find("off_cpu"); o != j.end() && o->is_array()) {
    for (const auto& jo : *o) {
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
  return true;
}

Run read_jsonl(std::istream& in, const ReadOptions& opts, ReadStats* stats) {
  Run run;
  std::string line;
  while (std::getline(in, line)) {
    stats->lines++;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j = Json::parse(line, nullptr, false);
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
      run.exits.push_back(std::move(e));
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
    std::string error;
    if (!task_from_json(line, &r, &error)) continue;  // another kind of record
    stats->records++;
    // Every sample of the task, from its stack log (the tree keeps counts,
    // not times); the recorded paths are rewritten to where the files are.
    for (auto& p : r.external_log) {
      std::string found = find_log(p, opts);
      if (found.empty()) {
        stats->logs_missing++;
        continue;
      }
      p = found;
      auto slash = found.rfind('/');
      std::string name = slash == std::string::npos ? found : found.substr(slash + 1);
      if (!name.starts_with("stack-") || !name.ends_with(".txt")) continue;
      std::ifstream f(found);
      std::stringstream ss;
      ss << f.rdbuf();
      r.sampled = parse_stack_log(ss.str());
      stats->stack_logs++;
    }
    run.add(std::move(r));
  }
  return run;
}

}  // namespace jankbpf::report
