#include "runtime/runtime_procs.h"

#include <sys/stat.h>

#include <charconv>
#include <string_view>

#include "bpf/test_seams.h"
#include "stack/maps.h"
#include "util/clock.h"
#include "util/log.h"

namespace jankbpf::runtime {

namespace {

bool exe_identity(pid_t pid, uint64_t* dev, uint64_t* ino) {
  // stat() follows /proc/PID/exe to the file: its identity, nothing opened.
  struct stat st {};
  if (stat(("/proc/" + std::to_string(pid) + "/exe").c_str(), &st) != 0) return false;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}

}  // namespace

void RuntimeProcesses::discover(pid_t pid) {
  Known k;
  exe_identity(pid, &k.exe_dev, &k.exe_ino);
  std::string why;
  RuntimeTargets t = finder_.find(pid, &why);
  if (t)
    log::info("pid %d: %s: reading %s frames", pid, log::escape_control(why).c_str(),
              t.python ? "Python" : t.java ? "Java" : "JavaScript");
  else if (!why.empty()) log::info("pid %d: %s: runtime frames not read", pid, log::escape_control(why).c_str());
  k.kind = t.python ? Kind::Python : t.v8 ? Kind::V8 : t.java ? Kind::Java : Kind::Native;
  {
    // Walkers of processes forgotten since (exited, exec'd) give their
    // caches back; past 4096, those gone without an exit record go too.
    std::lock_guard lk(mu_);
    std::erase_if(live_, [&](const auto& kv) { return !known_.count(kv.first); });
  }
  if (live_.size() >= 4096) live_.clear();
  Live& live = live_[pid];
  live = Live{};
  struct stat st {};
  uid_t uid = ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 ? st.st_uid : 0;
  live.charge = ledger_.charge(pid, uid, 0);
  if (t.python) live.walker = std::make_unique<PythonWalker>(*t.python);
  if (t.v8) live.v8 = std::make_unique<V8Walker>(*t.v8);
  if (t.java) live.java = std::make_unique<HotSpotWalker>(t.java->layout, t.java->syms, t.java->arm64);
  std::lock_guard lk(mu_);
  if (known_.size() >= 4096) known_.clear();
  known_[pid] = k;
}

bool RuntimeProcesses::look(pid_t pid) {
  {
    std::lock_guard lk(mu_);
    auto it = known_.find(pid);
    if (it != known_.end() && live_.count(pid)) return it->second.kind != Kind::Native;
  }
  discover(pid);
  return kind(pid) != Kind::Native;
}

RuntimeKind RuntimeProcesses::kind(pid_t pid) {
  std::lock_guard lk(mu_);
  auto it = known_.find(pid);
  return it != known_.end() ? it->second.kind : Kind::Native;
}

void RuntimeProcesses::check_exec(pid_t pid) {
  uint64_t dev = 0, ino = 0;
  if (!exe_identity(pid, &dev, &ino)) return;
  std::lock_guard lk(mu_);
  auto it = known_.find(pid);
  if (it != known_.end() && (it->second.exe_dev != dev || it->second.exe_ino != ino)) known_.erase(it);
}

void RuntimeProcesses::forget(pid_t pid) {
  std::lock_guard lk(mu_);
  known_.erase(pid);
}

uint64_t RuntimeProcesses::ns_tid(pid_t pid, pid_t tid) {
  std::string text;
  if (!stack::read_small_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status", text,
                              64 << 10))
    return static_cast<uint64_t>(tid);
  size_t at = text.find("\nNSpid:");
  if (at == std::string::npos) return static_cast<uint64_t>(tid);
  std::string_view line(text);
  line.remove_prefix(at + 7);
  line = line.substr(0, line.find('\n'));
  uint64_t last = static_cast<uint64_t>(tid);
  // "NSpid:\t123\t7": the last number is the innermost namespace's.
  while (!line.empty()) {
    size_t s = line.find_first_not_of(" \t");
    if (s == std::string_view::npos) break;
    line.remove_prefix(s);
    uint64_t v = 0;
    auto r = std::from_chars(line.data(), line.data() + line.size(), v);
    if (r.ec != std::errc()) break;
    last = v;
    line.remove_prefix(static_cast<size_t>(r.ptr - line.data()));
  }
  return last;
}

RuntimeProcesses::Live* RuntimeProcesses::live_for(pid_t pid) {
  bool known;
  {
    std::lock_guard lk(mu_);
    known = known_.count(pid) != 0;
  }
  // An exec is noticed by check_exec() at the start of each long task (an
  // exec ends the task), not here: a stat of /proc/PID/exe per sample was
  // a quarter of jankbpf's CPU while sampling a native process.
  auto lt = live_.find(pid);
  if (!known || lt == live_.end()) {  // first sample, or exited/exec'd since
    discover(pid);
    lt = live_.find(pid);
  }
  return &lt->second;
}

JsCapture RuntimeProcesses::capture_js(pid_t pid, uint64_t sample_ns, const NativeStack& s) {
  Live& live = *live_for(pid);
  if (!live.v8) return {};
  if ((sample_ns && monotonic_ns() - sample_ns > kMaxReadDelayNs) || test_seams::no_runtime_read())
    return JsCapture{.status = JsCapture::Status::Late};
  ProcessMemory mem(pid);
  JsCapture c = live.v8->walk(mem, s);
  if (!settle(live, live.v8->held_bytes())) {
    live.v8->clear_caches();
    c.budget_cut = true;
  }
  return c;
}

bool RuntimeProcesses::settle(Live& live, size_t held) {
  if (live.charge.resize(held)) return true;
  live.charge.resize(0);  // the caches are emptied: the uid's or the total budget is spent
  return false;
}

JavaCapture RuntimeProcesses::capture_java(pid_t pid, pid_t tid, uint64_t sample_ns, const NativeStack& s) {
  Live& live = *live_for(pid);
  if (!live.java) return {};
  auto nt = live.ns_tids.find(tid);
  if (nt == live.ns_tids.end()) {
    if (live.ns_tids.size() >= 4096) live.ns_tids.clear();
    nt = live.ns_tids.emplace(tid, ns_tid(pid, tid)).first;
  }
  if ((sample_ns && monotonic_ns() - sample_ns > kMaxReadDelayNs) || test_seams::no_runtime_read())
    return JavaCapture{.status = JavaCapture::Status::Late};
  ProcessMemory mem(pid);
  return live.java->walk(mem, nt->second, s);
}

PyCapture RuntimeProcesses::capture(pid_t pid, pid_t tid, uint64_t sample_ns) {
  Live& live = *live_for(pid);
  if (!live.walker) return {};
  auto nt = live.ns_tids.find(tid);
  if (nt == live.ns_tids.end()) {
    if (live.ns_tids.size() >= 4096) live.ns_tids.clear();
    nt = live.ns_tids.emplace(tid, ns_tid(pid, tid)).first;
  }
  // After the look-ups above: the read is what must be close to the sample.
  if (sample_ns && monotonic_ns() - sample_ns > kMaxReadDelayNs) return PyCapture{.status = PyCapture::Status::Late};
  ProcessMemory mem(pid);
  PyCapture c = live.walker->walk(mem, nt->second);
  c.read_ns = monotonic_ns();
  if (!settle(live, live.walker->held_bytes())) {
    live.walker->clear_caches();
    c.budget_cut = true;
  }
  return c;
}

}  // namespace jankbpf::runtime
