// TraceKeeper when trace-cmd cannot run (H4): the capture must end at once
// with a note or an error, and the flight recorder must record again, or
// every later traced jank would wait 60 s for a trace that never comes.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/trace_keeper.h"
#include "outputs.h"
#include "skip.h"
#include "trace/ftrace_instance.h"
#include "util/clock.h"
#include "util/tracefs.h"

using namespace jankbpf;
namespace fs = std::filesystem;

namespace {

using test::NullOutput;

// A temp dir and a Reporter writing its logs there: what a TraceKeeper needs.
struct Rig {
  std::string dir = make_dir();
  NullOutput out;
  Reporter reporter{config(dir), out};
  ~Rig() {
    reporter.finish();
    fs::remove_all(dir);
  }
  static std::string make_dir() {
    char tmpl[] = "/tmp/jankbpf-keeper-XXXXXX";
    return ::mkdtemp(tmpl);
  }
  static ReporterConfig config(const std::string& dir) {
    ReporterConfig rc;
    rc.log_dir = dir + "/logs";
    return rc;
  }
};

}  // namespace

TEST_CASE("trace keeper: a capture trace-cmd cannot make ends at once and re-arms", "[trace][tracefs]") {
  std::string err;
  SKIP_UNLESS(geteuid() == 0 && !tracefs::root(&err).empty(), "needs root and tracefs: " << err);
  Rig rig;
  const std::string& dir = rig.dir;
  CaptureOptions o;
  std::string expect;
  SECTION("trace-cmd missing: the text trace, with a note") {
    o.trace_cmd = dir + "/no-trace-cmd";
    expect = "not found or not executable";
  }
  SECTION("no private temp dir: an error") {
    o.temp_base = dir + "/missing";
    expect = "cannot make a private temp dir";
  }
  TraceKeeper keeper(rig.reporter, o);
  REQUIRE(keeper.start(&err));
  for (pid_t pid : {4001, 4002}) {  // the second proves the instance is free again
    keeper.on_trigger(pid, pid, 7, 1, monotonic_ns());
    keeper.on_deadline();  // the 3 s save deadline, fired by hand
    auto p = keeper.take(pid, 7);
    REQUIRE(p);
    {
      std::lock_guard lk(p->mu);
      CHECK(p->done);
      INFO("note: " << p->note << " error: " << p->error);
      CHECK((p->note + p->error).find(expect) != std::string::npos);
      CHECK(p->note.find("shares the trace") == std::string::npos);  // no capture was left running
    }
    CHECK(keeper.capture_fd() < 0);
  }
}

TEST_CASE("trace keeper: a stop cuts a slow trace-cmd short and saves the text trace", "[trace][tracefs]") {
  std::string err;
  SKIP_UNLESS(geteuid() == 0 && !tracefs::root(&err).empty(), "needs root and tracefs: " << err);
  Rig rig;
  const std::string& dir = rig.dir;
  // A trace-cmd that never finishes (a full buffer on a loaded machine,
  // a hung disk): stopping must not wait its 30 s timeout.
  CaptureOptions o;
  o.trace_cmd = dir + "/slow-trace-cmd";
  {
    std::ofstream f(o.trace_cmd);
    f << "#!/bin/sh\nexec sleep 30\n";
  }
  fs::permissions(o.trace_cmd, fs::perms::owner_all);
  TraceKeeper keeper(rig.reporter, o);
  REQUIRE(keeper.start(&err));
  keeper.on_trigger(4101, 4101, 3, 1, monotonic_ns());
  keeper.on_deadline();  // the save deadline: trace-cmd starts
  REQUIRE(keeper.capture_fd() >= 0);
  const auto t0 = std::chrono::steady_clock::now();
  keeper.shutdown(std::chrono::milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took < std::chrono::milliseconds(1500));
  auto p = keeper.take(4101, 3);
  REQUIRE(p);
  std::lock_guard lk(p->mu);
  CHECK(p->done);
  INFO("note: " << p->note << " error: " << p->error);
  CHECK(p->note.find("jankbpf was stopping") != std::string::npos);
  CHECK(p->paths.size() == 1);  // the text trace
}

TEST_CASE("trace keeper: a task that began before the recorder was ready is told so", "[trace][tracefs]") {
  std::string err;
  SKIP_UNLESS(geteuid() == 0 && !tracefs::root(&err).empty(), "needs root and tracefs: " << err);
  Rig rig;
  CaptureOptions o;
  o.trace_cmd = rig.dir + "/no-trace-cmd";  // the text trace: no trace-cmd run needed
  const uint64_t began = monotonic_ns();
  usleep(20'000);
  TraceKeeper keeper(rig.reporter, o);
  REQUIRE(keeper.start(&err));
  keeper.on_trigger(4201, 4201, 5, 1, began);     // began 20 ms before the recorder
  keeper.on_trigger(4202, 4202, 6, 1, monotonic_ns());  // began after it
  keeper.on_deadline();
  auto early = keeper.take(4201, 5), later = keeper.take(4202, 6);
  REQUIRE(early);
  REQUIRE(later);
  std::lock_guard lk(early->mu);
  INFO("note: " << early->note);
  const std::string lead = "the recorder started ";
  REQUIRE(early->note.rfind(lead, 0) == 0);
  CHECK(std::stoul(early->note.substr(lead.size())) >= 20);  // at least the 20 ms slept
  CHECK(early->note.find(" ms into the task: the trace misses its beginning") != std::string::npos);
  CHECK(early->note.find("not found or not executable") != std::string::npos);  // the capture's own note kept
  std::lock_guard lk2(later->mu);
  CHECK(later->note.find("the recorder started") == std::string::npos);
}

namespace {

std::string tracing_on(const std::string& root) {
  std::ifstream f(root + "/instances/jankbpf-" + std::to_string(::getpid()) + "/tracing_on");
  std::string v;
  f >> v;
  return v;
}

}  // namespace

TEST_CASE("trace keeper: on demand, the recorder records only while a task is long", "[trace][tracefs]") {
  std::string err;
  const std::string root = tracefs::root(&err);
  SKIP_UNLESS(geteuid() == 0 && !root.empty(), "needs root and tracefs: " << err);
  Rig rig;
  CaptureOptions o;
  o.trace_cmd = rig.dir + "/no-trace-cmd";  // the text trace: no trace-cmd run needed
  RecorderOptions rec;
  rec.on_demand = true;
  rec.hold_ns = 200'000'000;
  TraceKeeper keeper(rig.reporter, o, rec);
  REQUIRE(keeper.start(&err));
  // Set up, events on, but not recording: no long task yet.
  CHECK_FALSE(keeper.recording());
  CHECK(tracing_on(root) == "0");
  keeper.want_recording();  // a task's early mark
  CHECK(keeper.recording());
  CHECK(tracing_on(root) == "1");
  keeper.on_deadline();  // a check before the hold ends keeps it on
  CHECK(keeper.recording());
  usleep(250'000);
  keeper.on_deadline();  // the hold is over and nothing is scheduled: off
  CHECK_FALSE(keeper.recording());
  CHECK(tracing_on(root) == "0");

  // A trigger with the recorder off turns it on, and the record says the
  // trace begins inside the task.
  const uint64_t began = monotonic_ns() - 100'000'000;
  keeper.on_trigger(4301, 4301, 9, 1, began);
  CHECK(keeper.recording());
  keeper.on_deadline();  // the save deadline: the text trace, re-armed as recording
  auto p = keeper.take(4301, 9);
  REQUIRE(p);
  {
    std::lock_guard lk(p->mu);
    CHECK(p->done);
    INFO("note: " << p->note);
    const std::string lead = "the recorder started ";
    REQUIRE(p->note.rfind(lead, 0) == 0);
    CHECK(std::stoul(p->note.substr(lead.size())) >= 100);
  }
  CHECK(keeper.recording());
  CHECK(tracing_on(root) == "1");
  usleep(250'000);
  keeper.on_deadline();
  CHECK_FALSE(keeper.recording());
  CHECK(tracing_on(root) == "0");

  // Process 4301 has had its trace of the day: its next long task records
  // nothing for it, and its trigger is suppressed without turning it on.
  keeper.want_recording(4301, 1);
  CHECK_FALSE(keeper.recording());
  keeper.on_trigger(4301, 4301, 10, 1, monotonic_ns());
  CHECK_FALSE(keeper.recording());
  auto q = keeper.take(4301, 10);
  REQUIRE(q);
  {
    std::lock_guard lk(q->mu);
    CHECK(q->done);
    CHECK(q->suppressed == Suppressed::TraceQuota);
  }
  // Another process's long task still turns it on.
  keeper.want_recording(4302, 1);
  CHECK(keeper.recording());
  CHECK(tracing_on(root) == "1");
}
