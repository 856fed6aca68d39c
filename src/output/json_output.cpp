#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "output/output.h"
#include "output/schema_version.h"
#include "util/budget.h"
#include "util/clock.h"
#include "util/safe_open.h"

namespace jankbpf {
namespace {

using Json = nlohmann::ordered_json;

// Three decimals (ms with µs precision, s with ms precision), as a JSON number.
double ms3(double ms) { return std::round(ms * 1000.0) / 1000.0; }

Json state_json(const StateBreakdown& s) {
  return Json{{"running", ms3(s.running_ms)},
              {"runnable", ms3(s.runnable_ms)},
              {"sleeping", ms3(s.sleeping_ms)},
              {"blocked_io", ms3(s.blocked_io_ms)}};
}

std::string hex_text(uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// A thread a cause names (cause/attribute.h): who, and what it did meanwhile.
Json thread_json(const CauseThread& t) {
  Json j{{"pid", t.pid}, {"tid", t.tid}, {"comm", t.comm}};
  if (t.claim) j["claim"] = true;
  j["verified"] = t.verified;
  if (t.followed) {
    j["followed_ms"] = ms3(t.followed_ms);
    j["state_ms"] = state_json(t.state);
    j["samples"] = t.samples;
  }
  if (!t.function.empty()) j["function"] = t.function;
  if (!t.file.empty()) j["file"] = t.file;
  if (!t.stack.empty()) j["stack"] = t.stack;
  if (!t.waited_kind.empty()) {
    Json w{{"kind", t.waited_kind}, {"syscall", t.waited_syscall}};
    if (t.waited_address) w["address"] = hex_text(t.waited_address);
    if (!t.next.empty()) w["thread"] = thread_json(t.next.front());
    j["waited"] = w;
  }
  return j;
}

Json cause_json(const CauseSlice& c) {
  Json j{{"kind", c.kind}, {"ms", ms3(c.ms)}, {"count", c.count}};
  if (!c.syscall.empty()) j["syscall"] = c.syscall;
  if (!c.state.empty()) j["state"] = c.state;
  if (c.has_address) {
    j["address"] = hex_text(c.address);
    if (!c.address_where.empty()) j["where"] = c.address_where;
  }
  if (c.fd >= 0) {
    j["fd"] = c.fd;
    if (!c.fd_path.empty()) j["fd_path"] = c.fd_path;
  }
  if (c.owner) j["owner"] = thread_json(*c.owner);
  if (c.waker) j[c.kind == "peer" ? "peer" : "waker"] = thread_json(*c.waker);
  if (c.in_interrupt) j["in_interrupt"] = true;
  if (c.waker_unknown) j["waker_unknown"] = true;
  if (c.by_kernel) j["by_kernel"] = true;
  if (c.kind == "runnable") {
    j["preempted"] = c.preempted;
    Json tasks = Json::array();
    for (const auto& t : c.cpu_tasks)
      tasks.push_back(Json{{"comm", t.comm}, {"pid", t.pid}, {"tid", t.tid}, {"ms", ms3(t.ms)}});
    j["cpu_tasks"] = tasks;
    j["cpu_others_ms"] = ms3(c.cpu_others_ms);
  }
  if (c.kind == "throttled") {
    j["cgroup"] = c.cgroup;
    if (!c.cgroup_fs.empty()) j["cgroup_fs"] = c.cgroup_fs;
    if (!c.quota.empty()) j["quota"] = c.quota;
  }
  if (c.kind == "fault") {
    if (c.faults) j["faults"] = c.faults;
    if (!c.file.empty()) j["file"] = c.file;
    if (c.has_offsets) j["offsets"] = Json::array({hex_text(c.offset_lo), hex_text(c.offset_hi)});
  }
  if (c.kind == "io") {
    if (!c.device.empty()) j["device"] = c.device;
    if (!c.device_name.empty()) j["device_name"] = c.device_name;
    if (c.requests) {
      j["requests"] = c.requests;
      j["bytes"] = c.bytes;
      j["requests_done"] = c.requests_done;
      j["device_ms"] = ms3(c.device_ms);
      j["device_max_ms"] = ms3(c.device_max_ms);
    }
  }
  if (!c.frame.empty()) j["frame"] = c.frame;
  if (!c.kernel_stack.empty()) j["kernel_stack"] = c.kernel_stack;
  if (c.unattributed) j["unattributed"] = true;
  // Kernel windows (cause/kernel_causes.h)
  if (!c.lock_class.empty()) {
    if (!c.lock_name.empty()) j["lock"] = c.lock_name;
    j["lock_class"] = c.lock_class;
    if (!c.lock_mode.empty()) j["lock_mode"] = c.lock_mode;
    if (c.owner_reader_hint) j["owner_last_reader"] = true;
    if (!c.owner_kernel_stack.empty()) j["owner_kernel_stack"] = c.owner_kernel_stack;
    else if (c.owner && !c.owner_stack_missing.empty()) j["owner_stack_missing"] = c.owner_stack_missing;
  }
  if (c.kind == "reclaim") {
    j["memcg"] = c.memcg_reclaim;
    if (!c.cgroup.empty()) j["cgroup"] = c.cgroup;
    if (!c.cgroup_fs.empty()) j["cgroup_fs"] = c.cgroup_fs;
  }
  if (c.window_ms >= 0) {
    j["window_ms"] = ms3(c.window_ms);
    j["windows"] = c.windows;
    j["on_cpu_ms"] = ms3(c.window_ms > c.ms ? c.window_ms - c.ms : 0);
  }
  return j;
}

std::string line(const Json& j) {
  // Replace invalid UTF-8 (process and thread names are arbitrary bytes)
  // instead of throwing.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

// "elf_bytes", "record_rate", ...: the budgets a record's bits name.
Json budget_names(uint32_t bits) {
  Json a = Json::array();
  for (uint32_t i = 0; i < kBudgetCount; ++i)
    if (bits & (1u << i)) a.push_back(std::string(budget_name(1u << i)));
  return a;
}

}  // namespace

std::string to_json_line(const TaskRecord& r) {
  const bool jank = r.kind == TaskRecord::Kind::Jank;
  Json j;
  j["type"] = jank ? "jank" : "hang";
  j["time"] = r.time_ms;
  j["pid"] = r.proc.pid;
  j["tid"] = r.tid;
  j["uid"] = r.proc.uid;
  j["bundle_name"] = r.proc.name;
  j["bundle_version"] = r.proc.build_id;
  j["exe"] = r.proc.exe;
  j["thread_name"] = r.thread_name;
  j["begin_time"] = r.begin_time_ms;
  if (jank) j["end_time"] = r.end_time_ms;
  j["duration_ms"] = ms3(r.duration_ms);
  j["threshold_ms"] = r.threshold_ms;
  j["state_ms"] = state_json(r.state);
  j["delivery_ms"] = ms3(r.delivery_ms);
  j["wait_syscall"] = r.wait_syscall;
  j["boundary"] = boundary_name(r.boundary);
  if (r.begin_at_switch_in) j["begin_at_switch_in"] = true;
  // Marker tasks always name what ran; others when a Python frame did.
  if (r.boundary == Boundary::Marker || !r.runnable_name.empty()) j["runnable_name"] = r.runnable_name;
  if (r.jvm_pause) {
    Json p{{"kind", r.jvm_pause->kind}, {"ms", ms3(r.jvm_pause->ms)}};
    if (!r.jvm_pause->operation.empty()) p["operation"] = r.jvm_pause->operation;
    j["jvm_pause"] = std::move(p);
  }
  if (r.boundary == Boundary::Marker) {
    if (r.marker) {
      Json m{{"type", r.marker->type}, {"binary", r.marker->binary}, {"probe", r.marker->probe}};
      if (!r.marker->runtime.empty()) m["runtime"] = r.marker->runtime;
      j["marker"] = m;
    }
  }
  j["cgroup"] = r.proc.cgroup;
  if (!r.proc.container_id.empty()) j["container_id"] = r.proc.container_id;
  // The seed's name and unit for when the task began: jiffies of CLOCK_MONOTONIC.
  j["app_start_jiffies_time"] = mono_ns_to_jiffies(r.begin_mono_ns);
  j["begin_monotonic_ns"] = r.begin_mono_ns;
  j["task_seq"] = r.task_seq;
  if (jank) {
    j["seen_running"] = r.seen_running;
    j["unrecovered"] = r.unrecovered;
  }
  j["external_log"] = r.external_log;
  j["log_over_limit"] = r.log_over_limit;
  if (!r.log_error.empty()) j["log_error"] = r.log_error;
  if (!r.suppressed.empty()) j["suppressed"] = suppressed_text(r.suppressed);
  if (!r.trace_note.empty()) j["trace_note"] = r.trace_note;
  j["heaviest_stack"] = r.heaviest_stack;
  j["samples"] = r.samples;
  if (r.unsampled_ms > 0) j["unsampled_ms"] = ms3(r.unsampled_ms);
  Json stack = Json::array();
  for (const auto& f : r.stack) {
    char hex[32];
    snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(f.offset));
    Json jf{{"module_index", f.module_index}, {"offset", hex}, {"symbol", f.symbol}};
    if (!f.file.empty()) jf["file"] = f.line ? f.file + ":" + std::to_string(f.line) : f.file;
    if (f.kernel) jf["kernel"] = true;
    if (f.jit) jf["jit"] = true;
    if (f.inlined) jf["inlined"] = true;
    if (!f.runtime.empty()) jf["runtime"] = f.runtime;
    stack.push_back(std::move(jf));
  }
  j["stack"] = stack;
  Json modules = Json::array();
  for (const auto& [path, id] : r.modules) modules.push_back(Json::array({path, id}));
  j["modules"] = modules;
  Json off = Json::array();
  for (const auto& o : r.off_cpu) {
    Json jo{{"state", o.state}};
    if (o.duration_ms > 0) jo["duration_ms"] = ms3(o.duration_ms);  // known once woken
    jo["kernel_stack"] = o.kernel_stack;
    if (o.has_waker)
      jo["waker"] = Json{{"pid", o.waker.pid}, {"tid", o.waker.tid}, {"comm", o.waker.comm},
                         {"in_interrupt", o.waker.in_interrupt},
                         {"kernel_stack", o.waker.kernel_stack}, {"user_stack", o.waker.user_stack}};
    off.push_back(std::move(jo));
  }
  j["off_cpu"] = off;
  if (r.budgets) j["budget_exceeded"] = budget_names(r.budgets);
  if (r.records_rate_limited) j["records_rate_limited"] = r.records_rate_limited;
  if (r.causes_known) {
    Json cause = Json::array();
    for (const auto& c : r.cause) cause.push_back(cause_json(c));
    j["cause"] = cause;
    j["why"] = r.why;
  }
  return line(j);
}

std::string to_json_line(const ExitRecord& r) {
  Json j;
  j["type"] = "exit";
  j["time"] = r.time_ms;
  j["pid"] = r.pid;
  j["bundle_name"] = r.name;
  j["exit_code"] = r.exit_code;
  j["target"] = r.target;
  if (r.records_rate_limited) j["records_rate_limited"] = r.records_rate_limited;
  return line(j);
}

void add_frame_summary(nlohmann::ordered_json& j, const SummaryRecord& r);

std::string to_json_line(const SummaryRecord& r) {
  Json j;
  j["type"] = "summary";
  j["time"] = r.time_ms;
  j["schema_version"] = kSchemaVersion;  // of schema/jankbpf-records.schema.json
  // The kernel's counters under the records' names (1.0's, and 1.1's for
  // the later ones): this sink is the one place those names are spelled.
  const KernelCounters& k = r.kernel;
  j["elapsed_s"] = ms3(r.elapsed_s);
  j["tasks_checked"] = k.tasks;
  j["janks"] = r.janks;
  j["hangs"] = r.hangs;
  j["exits"] = r.exits;
  j["lost_events"] = k.lost_events();
  j["threads_untracked"] = k.threads_map_full;
  j["timer_failures"] = k.timer_failures;
  j["unseen_switches"] = k.unseen_switches;
  j["watchdog"] = r.watchdog;
  j["state_storage"] = r.state_storage;
  j["hooks"] = r.hooks;
  j["features_missing"] = r.features_missing;
  j["offcpu_stash_full"] = k.stash_full;
  j["procs_untracked"] = k.procs_full;
  j["scan_set_full"] = k.scan_full;
  j["offcpu_ring_full"] = k.offcpu_ring_full;
  j["offcpu_rate_limited"] = k.offcpu_rate_limited;
  j["timers_map_full"] = k.timers_map_full;
  j["records_rate_limited"] = k.records_rate_limited;
  // Causes (1.4): what their bounds left out.
  j["causes"] = {{"tasks_without", k.causes_full},
                 {"subjects_not_followed", k.subjects_full},
                 {"subject_samples_capped", k.subject_samples_capped},
                 {"wakers_unknown", k.wakers_unknown}};
  Json bpf = Json::array();
  uint64_t missed = 0;
  for (const auto& p : r.bpf) {
    Json one{{"name", p.name}, {"run_cnt", p.run_cnt}, {"run_time_ns", p.run_time_ns}};
    if (p.recursion_misses) one["recursion_misses"] = p.recursion_misses;
    missed += p.recursion_misses;
    bpf.push_back(std::move(one));
  }
  j["bpf"] = bpf;
  // Hook runs the kernel skipped: what they would have seen is missing.
  j["hook_runs_missed"] = missed;
  j["samples"] = k.samples;
  j["offcpu_captures"] = k.offcpu;
  j["samples_lost"] = r.samples_lost;
  j["unsampled_tasks"] = r.unsampled_tasks;
  j["samples_dropped"] = r.samples_dropped;
  j["stack_logs"] = r.stack_logs;
  j["traces"] = r.traces;
  j["suppressed"] = r.suppressed;
  if (r.failed_jobs) j["failed_jobs"] = r.failed_jobs;
  j["records_dropped"] = r.records_dropped;
  j["stacks_evicted"] = r.stacks_evicted;
  j["evictions"] = {{"processes", r.evictions.processes},
                    {"modules", r.evictions.modules},
                    {"symbol_memos", r.evictions.symbol_memos},
                    {"stack_threads", r.evictions.stack_threads},
                    {"quota_processes", r.evictions.quota_processes},
                    {"pending_traces", r.evictions.pending_traces}};
  if (r.marker_sites) j["marker_sites"] = r.marker_sites;
  if (r.marker_sites_released) j["marker_sites_released"] = r.marker_sites_released;
  if (r.marker_files_capped) j["marker_files_capped"] = r.marker_files_capped;
  if (r.marker_files_refused) j["marker_files_refused"] = r.marker_files_refused;
  if (r.runtime_frames_read || r.runtime_frames_unreadable)
    j["runtime_frames"] = Json{{"read", r.runtime_frames_read}, {"unreadable", r.runtime_frames_unreadable}};
  if (!r.frames.empty() || r.frame_records) add_frame_summary(j, r);  // output/json_frames.cpp
  {
    const BudgetCounts& b = r.budgets;
    auto limited = [](const std::vector<RateLimited>& v, const char* id) {
      Json a = Json::array();
      for (const auto& x : v) {
        Json e{{id, x.id}, {"count", x.count}};
        if (!x.name.empty()) e["bundle_name"] = x.name;
        a.push_back(std::move(e));
      }
      return a;
    };
    j["budgets"] = Json{{"elf_files_cut", b.elf_files_cut},
                        {"modules_refused", b.modules_refused},
                        {"perf_maps_cut", b.perf_maps_cut},
                        {"runtime_cache_cuts", b.runtime_cache_cuts},
                        {"reporter_time_skipped", b.reporter_time_skipped},
                        {"elf_bytes_max", b.elf_bytes_max},
                        {"rate_limited_processes", limited(b.rate_limited_processes, "pid")},
                        {"rate_limited_uids", limited(b.rate_limited_uids, "uid")}};
  }
  j["cpu_user_s"] = ms3(r.cpu_user_s);
  j["cpu_sys_s"] = ms3(r.cpu_sys_s);
  j["max_rss_kb"] = r.max_rss_kb;
  return line(j);
}

namespace {

// Every component, not only the last, is opened without following a link:
// root must not be steered into appending to another file.
int open_output(const std::string& path, std::string* error) {
  std::string leaf, why;
  Fd dir = open_parent_nofollow(path, &leaf, &why);
  if (!dir) {
    *error = "--output: " + why;
    return -1;
  }
  int fd = ::openat(dir.get(), leaf.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0640);
  if (fd < 0)
    *error = "--output: cannot open '" + path + "': " + strerror(errno) +
             (errno == ELOOP ? " (it is a symlink; jankbpf does not write through symlinks)" : "");
  return fd;
}


// stdout as a descriptor whose writes never block uninterruptibly. A pipe
// or terminal is opened again through /proc/self/fd: a new open file
// description, so O_NONBLOCK is ours alone (the shell shares the inherited
// one). A socket (journald's stdout) gets send(MSG_DONTWAIT) instead.
Fd open_stdout(bool* use_send) {
  Fd fd(dup_cloexec(STDOUT_FILENO));
  struct stat st{};
  if (!fd || ::fstat(fd.get(), &st) != 0) return fd;
  if (S_ISSOCK(st.st_mode)) {
    *use_send = true;
  } else if (S_ISFIFO(st.st_mode) || (S_ISCHR(st.st_mode) && ::isatty(fd.get()))) {
    Fd again(::open("/proc/self/fd/1", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st2{};
    if (again && ::fstat(again.get(), &st2) == 0 && st2.st_dev == st.st_dev && st2.st_ino == st.st_ino)
      return again;
  }
  return fd;
}

int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

JsonLinesOutput::JsonLinesOutput(Fd fd, std::string path)
    : fd_(std::move(fd)), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), path_(std::move(path)) {}

std::unique_ptr<JsonLinesOutput> JsonLinesOutput::open(const std::string& path, std::string* error) {
  if (path.empty() || path == "-") {
    bool use_send = false;
    Fd fd = open_stdout(&use_send);
    auto out = std::unique_ptr<JsonLinesOutput>(new JsonLinesOutput(std::move(fd), ""));
    out->use_send_ = use_send;
    return out;
  }
  int fd = open_output(path, error);
  if (fd < 0) return nullptr;
  return std::unique_ptr<JsonLinesOutput>(new JsonLinesOutput(Fd(fd), path));
}

bool JsonLinesOutput::reopen(std::string* error) {
  if (path_.empty()) {
    *error = "output is stdout: nothing to reopen";
    return false;
  }
  // Opened outside the lock: a slow filesystem must not hold up a write.
  int fd = open_output(path_, error);
  if (fd < 0) return false;
  std::lock_guard lock(mu_);
  fd_.reset(fd);
  return true;
}

void JsonLinesOutput::wait_for_reader_until(std::chrono::steady_clock::time_point deadline) {
  deadline_ns_ = steady_ns(deadline);
  uint64_t one = 1;
  if (wake_) (void)!::write(wake_.get(), &one, sizeof one);
}

bool JsonLinesOutput::wait_writable() {
  for (;;) {
    int timeout_ms = -1;
    if (int64_t deadline = deadline_ns_; deadline >= 0) {
      int64_t left = deadline - steady_ns(std::chrono::steady_clock::now());
      if (left <= 0) return false;
      timeout_ms = static_cast<int>((left + 999'999) / 1'000'000);
    }
    pollfd pfd[2] = {{fd_.get(), POLLOUT, 0}, {wake_.get(), POLLIN, 0}};
    int r = ::poll(pfd, wake_ ? 2 : 1, timeout_ms);
    if (r < 0 && errno != EINTR) return false;
    // Writable, or an error the next write will name (EPIPE).
    if (pfd[0].revents & (POLLOUT | POLLERR | POLLHUP)) return true;
    uint64_t v;
    if (pfd[1].revents & POLLIN) (void)!::read(wake_.get(), &v, sizeof v);
  }
}

void JsonLinesOutput::write_line(std::string s) {
  std::lock_guard lock(mu_);
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    ssize_t n = use_send_ ? ::send(fd_.get(), p, left, MSG_DONTWAIT | MSG_NOSIGNAL) : ::write(fd_.get(), p, left);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      const bool full = err == EAGAIN || err == EWOULDBLOCK;
      if (full && wait_writable()) continue;
      if (full) stalled_++;  // the reader did not take it before the deadline
      write_errors_++;  // ENOSPC and the like: counted, reported at exit
      if (err == EPIPE) broken_ = true;
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace jankbpf
