// The flight-recorder instance and trace capture against the real tracefs
// (root only): the instance is created with its events on, a capture gives
// a .dat that `trace-cmd report` reads with sched_switch events on
// CLOCK_MONOTONIC, the top-level instance and other instances are never
// touched, removal leaves nothing, stale instances are cleaned up, and the
// text fallback and tool failures give saved text plus a note.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "logs/log_dir.h"
#include "trace/capture.h"
#include "trace/ftrace_instance.h"
#include "trace/spawn.h"
#include "util/tracefs.h"
#include "skip.h"

using namespace jankbpf;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_line(const std::string& path) {
  std::string s = slurp(path);
  return s.substr(0, s.find('\n'));
}

// Why these tests cannot run here, or "" when they can.
std::string skip_reason() {
  if (geteuid() != 0) return "needs root (creates ftrace instances)";
  std::string err;
  if (tracefs::root(&err).empty()) return "no tracefs: " + err;
  return "";
}

#define REQUIRE_TRACEFS()                          \
  do {                                             \
    std::string why_skip = skip_reason();          \
    SKIP_UNLESS(why_skip.empty(), why_skip);       \
  } while (0)

// The top-level state jankbpf must never change.
std::map<std::string, std::string> top_level_state(const std::string& root) {
  std::map<std::string, std::string> s;
  for (const char* f : {"tracing_on", "current_tracer", "trace_clock", "buffer_size_kb", "events/enable",
                        "set_event", "options/overwrite", "set_event_pid", "events/sched/sched_switch/enable",
                        "events/sched/sched_switch/filter"})
    s[f] = slurp(root + "/" + f);
  s["kptr_restrict"] = slurp("/proc/sys/kernel/kptr_restrict");
  return s;
}

struct Scratch {
  std::string path;
  Scratch() {
    char tmpl[] = "/tmp/jankbpf-ttest-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Another tool's instance, which must come through everything untouched.
struct ForeignInstance {
  std::string path;
  explicit ForeignInstance(const std::string& root)
      : path(root + "/instances/othertool-" + std::to_string(getpid())) {
    mkdir(path.c_str(), 0750);
    std::ofstream(path + "/events/sched/sched_wakeup/enable") << "1";
    std::ofstream(path + "/tracing_on") << "1";
  }
  ~ForeignInstance() {
    std::ofstream(path + "/tracing_on") << "0";
    std::ofstream(path + "/events/enable") << "0";
    rmdir(path.c_str());
  }
};

// Runs argv (no shell) and returns its output.
std::string run_tool(const std::vector<std::string>& argv, int* status_out = nullptr) {
  Scratch s;
  const std::string out = s.path + "/out";
  Fd fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  SpawnSpec spec;
  spec.path = argv[0];
  spec.argv = argv;
  spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  spec.output_fd = fd.get();
  Child c;
  std::string err;
  REQUIRE(c.start(spec, err));
  int status = 0;
  REQUIRE(c.wait(60000, status));
  if (status_out) *status_out = status;
  return slurp(out);
}

double mono_s() {
  struct timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// Some scheduler activity: short-lived children and sleeps.
void make_activity() {
  for (int i = 0; i < 5; ++i) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, nullptr, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

LogDirOptions log_opts(const std::string& path) {
  LogDirOptions o;
  o.path = path;
  return o;
}

}  // namespace

TEST_CASE("the flight-recorder instance is created armed, and removed without a trace", "[trace][tracefs]") {
  REQUIRE_TRACEFS();
  const std::string root = tracefs::root();
  const auto top_before = top_level_state(root);
  ForeignInstance other(root);
  const std::string other_events = slurp(other.path + "/set_event");

  std::string path;
  {
    FtraceInstance inst;
    std::string err;
    REQUIRE(inst.create(err));
    INFO(err);
    path = inst.path();
    CHECK(inst.name() == "jankbpf-" + std::to_string(getpid()));
    CHECK(path == root + "/instances/" + inst.name());
    CHECK(fs::is_directory(path));
    CHECK(first_line(path + "/tracing_on") == "1");
    CHECK(first_line(path + "/options/overwrite") == "1");
    CHECK(slurp(path + "/trace_clock").find("[mono]") != std::string::npos);
    const unsigned cpus = static_cast<unsigned>(std::distance(fs::directory_iterator(path + "/per_cpu"),
                                                              fs::directory_iterator()));
    CHECK(inst.buffer_kb_per_cpu() == std::min(4096u, 65536u / cpus));
    // The kernel rounds the size up to whole sub-buffers.
    const unsigned got_kb = static_cast<unsigned>(std::stoul(first_line(path + "/buffer_size_kb")));
    CHECK(got_kb >= inst.buffer_kb_per_cpu());
    CHECK(got_kb <= inst.buffer_kb_per_cpu() + 64);
    for (const char* ev : {"sched/sched_switch", "sched/sched_wakeup", "sched/sched_wakeup_new",
                           "sched/sched_process_fork", "sched/sched_process_exec", "sched/sched_process_exit",
                           "irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry",
                           "irq/softirq_exit", "block/block_rq_issue", "block/block_rq_complete"}) {
      CAPTURE(ev);
      CHECK(first_line(path + "/events/" + ev + "/enable") == "1");
    }
    // Events this kernel lacks are listed, not fatal.
    for (const auto& ev : FtraceInstance::default_events()) {
      bool on_kernel = fs::exists(root + "/events/" + ev);
      bool listed_missing = std::find(inst.missing_events().begin(), inst.missing_events().end(), ev) !=
                            inst.missing_events().end();
      CAPTURE(ev);
      CHECK(on_kernel != listed_missing);
    }
    CHECK(inst.remove());
    CHECK_FALSE(fs::exists(path));
    CHECK(inst.remove());  // idempotent
    CHECK_FALSE(inst.active());
  }
  {
    FtraceInstance inst;  // the destructor removes it too
    std::string err;
    REQUIRE(inst.create(err));
    CHECK(fs::exists(path));
  }
  CHECK_FALSE(fs::exists(path));
  CHECK(top_level_state(root) == top_before);
  CHECK(fs::exists(other.path));
  CHECK(slurp(other.path + "/set_event") == other_events);
  CHECK(first_line(other.path + "/tracing_on") == "1");
}

TEST_CASE("an event list with unknown events keeps the known ones", "[trace][tracefs]") {
  REQUIRE_TRACEFS();
  FtraceOptions o;
  o.events = {"sched:sched_switch", "nosuch/event"};
  o.buffer_kb_per_cpu = 256;
  FtraceInstance inst(o);
  std::string err;
  REQUIRE(inst.create(err));
  CHECK(inst.enabled_events() == std::vector<std::string>{"sched/sched_switch"});
  CHECK(inst.missing_events() == std::vector<std::string>{"nosuch/event"});
  CHECK(inst.buffer_kb_per_cpu() == 256);

  FtraceOptions none;
  none.events = {"nosuch/event"};
  none.name = "jankbpf-test-none-" + std::to_string(getpid());
  FtraceInstance bad(none);
  CHECK_FALSE(bad.create(err));
  CHECK(err.find("none of the trace events could be enabled") != std::string::npos);
  CHECK_FALSE(fs::exists(tracefs::root() + "/instances/" + none.name));
}

TEST_CASE("a capture through trace-cmd is a .dat that trace-cmd report reads", "[trace][tracefs]") {
  REQUIRE_TRACEFS();
  SKIP_UNLESS(!TraceCapture::find_trace_cmd().empty(), "trace-cmd is not installed");
  const std::string root = tracefs::root();
  const auto top_before = top_level_state(root);
  ForeignInstance other(root);
  Scratch s;
  LogDir logs(log_opts(s.path + "/logs"));
  FtraceInstance inst;
  std::string err;
  REQUIRE(inst.create(err));

  const double t0 = mono_s();
  make_activity();
  const double t1 = mono_s();

  TraceCapture cap(inst, logs);
  CaptureResult r = cap.run(getpid());
  INFO("note: " << r.note << " error: " << r.error << " tool: " << r.tool_output);
  REQUIRE(r.ok());
  CHECK(r.format == "dat");
  CHECK(r.note.empty());
  CHECK(r.rearmed);
  CHECK(fs::path(r.log.path).filename().string().rfind("trace-" + std::to_string(getpid()) + "-", 0) == 0);
  CHECK(fs::path(r.log.path).extension() == ".dat");
  CHECK(r.log.bytes == fs::file_size(r.log.path));
  CHECK((fs::status(r.log.path).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));

  int status = 0;
  std::string report = run_tool({TraceCapture::find_trace_cmd(), "report", "-i", r.log.path}, &status);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // Lines look like "  comm-pid  [cpu]  12345.678901: sched_switch: ..."
  size_t switches = 0, in_window = 0;
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find(": sched_switch:");
    if (at == std::string::npos) continue;
    ++switches;
    size_t start = line.rfind(' ', at);
    double ts = std::stod(line.substr(start + 1, at - start - 1));
    if (ts >= t0 - 1 && ts <= t1 + 1) ++in_window;  // mono clock: same timeline as ours
  }
  CHECK(switches > 0);
  CHECK(in_window > 0);
  CHECK(report.find("sched_process_fork") != std::string::npos);

  // Re-armed after trace-cmd disabled the events of the buffer it read.
  CHECK(first_line(inst.path() + "/tracing_on") == "1");
  CHECK(first_line(inst.path() + "/events/sched/sched_switch/enable") == "1");
  // Nobody else's tracing was touched, and no temp dir is left.
  CHECK(top_level_state(root) == top_before);
  CHECK(fs::exists(other.path));
  CHECK(first_line(other.path + "/tracing_on") == "1");
  CHECK(first_line(other.path + "/events/sched/sched_wakeup/enable") == "1");
  for (const auto& e : fs::directory_iterator("/tmp"))
    CHECK(e.path().filename().string().rfind("jankbpf-trace-", 0) != 0);

  // A second capture works too (the instance recorded again).
  make_activity();
  CaptureResult again = cap.run(getpid());
  CHECK(again.format == "dat");
  CHECK(again.log.path != r.log.path);
}

TEST_CASE("a capture can run in the background", "[trace][tracefs]") {
  REQUIRE_TRACEFS();
  SKIP_UNLESS(!TraceCapture::find_trace_cmd().empty(), "trace-cmd is not installed");
  Scratch s;
  LogDir logs(log_opts(s.path));
  FtraceInstance inst;
  std::string err;
  REQUIRE(inst.create(err));
  make_activity();
  TraceCapture cap(inst, logs);
  REQUIRE(cap.start(4242));
  CHECK_FALSE(cap.start(4242));  // one at a time
  REQUIRE(cap.wait_fd() >= 0);
  struct pollfd p{cap.wait_fd(), POLLIN, 0};
  REQUIRE(poll(&p, 1, 30000) == 1);
  std::optional<CaptureResult> r = cap.finish(false);
  REQUIRE(r);
  CHECK(r->format == "dat");
  CHECK(fs::path(r->log.path).filename().string().rfind("trace-4242-", 0) == 0);
  CHECK_FALSE(cap.running());
}

TEST_CASE("without trace-cmd the text trace is saved, and says so", "[trace][tracefs]") {
  REQUIRE_TRACEFS();
  Scratch s;
  LogDir logs(log_opts(s.path));
  FtraceInstance inst;
  std::string err;
  REQUIRE(inst.create(err));

  SECTION("trace-cmd missing") {
    make_activity();
    CaptureOptions o;
    o.trace_cmd = s.path + "/no-trace-cmd";
    TraceCapture cap(inst, logs, o);
    CaptureResult r = cap.run(77);
    REQUIRE(r.ok());
    CHECK(r.format == "text");
    CHECK(r.note == "trace-cmd " + o.trace_cmd + " not found or not executable: saved the instance's text trace");
    CHECK(fs::path(r.log.path).extension() == ".txt");
    CHECK(fs::path(r.log.path).filename().string().rfind("trace-77-", 0) == 0);
    CHECK(slurp(r.log.path).find("sched_switch:") != std::string::npos);
    CHECK(r.rearmed);
  }
  SECTION("trace-cmd fails") {
    make_activity();
    CaptureOptions o;
    o.trace_cmd = "/bin/false";
    TraceCapture cap(inst, logs, o);
    CaptureResult r = cap.run(78);
    CHECK(r.format == "text");
    CHECK(r.note == "trace-cmd extract failed (exit status 1): saved the instance's text trace");
    CHECK(slurp(r.log.path).find("sched_switch:") != std::string::npos);
  }
  SECTION("trace-cmd hangs and is killed at the timeout") {
    const std::string hang = s.path + "/hang";
    std::ofstream(hang) << "#!/bin/sh\nexec sleep 30\n";
    chmod(hang.c_str(), 0755);
    make_activity();
    CaptureOptions o;
    o.trace_cmd = hang;
    o.timeout_ms = 300;
    TraceCapture cap(inst, logs, o);
    CaptureResult r = cap.run(79);
    CHECK(r.format == "text");
    CHECK(r.note == "trace-cmd extract timed out after 300 ms and was killed: saved the instance's text trace");
    CHECK(r.duration_ms < 5000);
  }
  SECTION("a long text trace keeps its newest lines") {
    make_activity();
    CaptureOptions o;
    o.use_trace_cmd = false;
    o.text_max_bytes = 3000;
    TraceCapture cap(inst, logs, o);
    CaptureResult r = cap.run(81);
    REQUIRE(r.ok());
    CHECK(r.format == "text");
    CHECK(r.note == "trace-cmd not used (disabled): saved the instance's text trace; text trace cut to its "
                    "newest 3000 bytes");
    const std::string text = slurp(r.log.path);
    CHECK(text.size() <= 3000);
    CHECK(text.size() > 1000);
    CHECK(text.rfind("# tracer: nop", 0) == 0);
    CHECK(text.find("# jankbpf: older events cut to keep the newest 3000 bytes\n") != std::string::npos);
    CHECK(text.back() == '\n');
  }
  SECTION("the log dir is over its cap") {
    LogDirOptions lo = log_opts(s.path + "/tiny");
    lo.cap_bytes = 10;
    LogDir tiny(lo);
    make_activity();
    TraceCapture cap(inst, tiny);
    CaptureResult r = cap.run(80);
    CHECK_FALSE(r.ok());
    CHECK(r.log.over_limit);
    CHECK(r.format.empty());
    CHECK(r.rearmed);
  }
}

// A pid that has exited (and been reaped): free until the kernel reuses it.
pid_t dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return p;
}

TEST_CASE("stale jankbpf instances are removed, live ones and others' kept", "[trace][tracefs]") {
  REQUIRE_TRACEFS();
  const std::string root = tracefs::root();
  const std::string inst_dir = root + "/instances/";

  const std::string dead_name = "jankbpf-" + std::to_string(dead_pid());
  // A live pid that is not a jankbpf (the init process here, unless it is one).
  const bool init_is_jankbpf = slurp("/proc/1/comm").rfind("jankbpf", 0) == 0;
  // A live jankbpf (this test binary, comm jankbpf-unit) that predates it.
  const std::string live_name = "jankbpf-" + std::to_string(getpid());
  const std::string other_name = "othertool-" + std::to_string(getpid());
  for (const auto& n : {dead_name, std::string("jankbpf-1"), live_name, other_name})
    REQUIRE((mkdir((inst_dir + n).c_str(), 0750) == 0 || errno == EEXIST));

  std::vector<std::string> removed = FtraceInstance::remove_stale(root);
  auto was_removed = [&](const std::string& n) {
    return std::find(removed.begin(), removed.end(), n) != removed.end();
  };
  CHECK(was_removed(dead_name));
  CHECK_FALSE(fs::exists(inst_dir + dead_name));
  if (!init_is_jankbpf) {
    CHECK(was_removed("jankbpf-1"));
    CHECK_FALSE(fs::exists(inst_dir + "jankbpf-1"));
  }
  CHECK_FALSE(was_removed(live_name));
  CHECK(fs::exists(inst_dir + live_name));
  CHECK(fs::exists(inst_dir + other_name));
  CHECK(FtraceInstance::owner_alive(root, live_name));

  // create() clears a stale instance under its own name too.
  {
    FtraceOptions o;
    o.name = live_name;
    FtraceInstance inst(o);
    std::string err;
    REQUIRE(inst.create(err));
    CHECK(first_line(inst.path() + "/tracing_on") == "1");
  }
  CHECK_FALSE(fs::exists(inst_dir + live_name));
  rmdir((inst_dir + other_name).c_str());
}

TEST_CASE("a jankbpf-PID instance older than the process now holding PID is stale", "[trace][tracefs]") {
  REQUIRE_TRACEFS();
  const std::string root = tracefs::root();
  // Make the instance for a free pid, wait, then start a "jankbpf" on
  // exactly that pid (clone3 with set_tid): the pid was reused after the
  // instance's owner died. Another process may take the pid first (EEXIST):
  // then again with another one.
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t pid = 0;
  std::string name;
  long child = -1;
  int clone_errno = 0;
  for (int attempt = 0; attempt < 5 && child < 0; ++attempt) {
    pid = dead_pid();
    name = "jankbpf-" + std::to_string(pid);
    REQUIRE(mkdir((root + "/instances/" + name).c_str(), 0750) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1300));
    struct {
      uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
          cgroup;
    } args{};
    pid_t want = pid;
    args.exit_signal = SIGCHLD;
    args.set_tid = reinterpret_cast<uint64_t>(&want);
    args.set_tid_size = 1;
    child = syscall(SYS_clone3, &args, sizeof args);
    if (child == 0) {
      prctl(PR_SET_NAME, "jankbpf-fake");
      char c = 1;
      (void)!write(ready[1], &c, 1);
      for (;;) pause();
    }
    if (child < 0) {
      clone_errno = errno;
      rmdir((root + "/instances/" + name).c_str());
      if (clone_errno != EEXIST) break;  // not a race: the kernel refuses set_tid
    }
  }
  if (child < 0) {
    close(ready[0]);
    close(ready[1]);
  }
  // ENOSYS/EINVAL: a kernel without clone3's set_tid (before 5.5).
  SKIP_UNLESS(child > 0, "clone3 with set_tid failed: " << strerror(clone_errno)
                                                          << (clone_errno == EEXIST ? " five times in a row" : ""));
  char c;
  REQUIRE(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  close(ready[1]);
  REQUIRE(child == pid);
  CHECK(slurp("/proc/" + std::to_string(pid) + "/comm") == "jankbpf-fake\n");

  CHECK_FALSE(FtraceInstance::owner_alive(root, name));
  std::vector<std::string> removed = FtraceInstance::remove_stale(root);
  CHECK(std::find(removed.begin(), removed.end(), name) != removed.end());
  CHECK_FALSE(fs::exists(root + "/instances/" + name));

  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  rmdir((root + "/instances/" + name).c_str());
}
