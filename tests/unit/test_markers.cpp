// Unit tests for task markers: --marker parsing, binary and function
// lookup, USDT notes, runnable names, and how marker records render.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "app/record_builder.h"
#include "cli/options.h"
#include "jankbpf/events.h"
#include "markers/marker_spec.h"
#include "markers/markers.h"
#include "markers/naming.h"
#include "markers/probe_elf.h"
#include "output/output.h"
#include "util/clock.h"

using namespace jankbpf;

// A function of this binary that uprobes could attach to.
extern "C" __attribute__((noinline, used)) int jankbpf_unit_marker_target(int x) { return x + 1; }

namespace {
std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : "";
}
}  // namespace

TEST_CASE("marker specs: uprobe, uretprobe, USDT", "[markers]") {
  std::string err;
  auto m = parse_marker("/usr/bin/app:dispatch_begin,/usr/bin/app:dispatch_end", &err);
  REQUIRE(m);
  CHECK(m->preset == MarkerSpec::Preset::None);
  CHECK(m->begin.kind == ProbeSpec::Kind::Uprobe);
  CHECK(m->begin.binary == "/usr/bin/app");
  CHECK(m->begin.symbol == "dispatch_begin");
  CHECK(m->end.symbol == "dispatch_end");

  m = parse_marker("libfoo.so.1:run%return,libfoo.so.1:run", &err);
  REQUIRE(m);
  CHECK(m->begin.kind == ProbeSpec::Kind::Uretprobe);
  CHECK(m->begin.symbol == "run");
  CHECK(m->begin.probe() == "run%return");
  CHECK(m->begin.kind_name() == std::string("uretprobe"));
  CHECK(m->end.kind == ProbeSpec::Kind::Uprobe);

  m = parse_marker("./app:loop:begin,./app:loop:end", &err);
  REQUIRE(m);
  CHECK(m->begin.kind == ProbeSpec::Kind::Usdt);
  CHECK(m->begin.provider == "loop");
  CHECK(m->begin.name == "begin");
  CHECK(m->end.name == "end");
  CHECK(m->begin.to_string() == "./app:loop:begin");

  // Mixed kinds are fine: a USDT begin with a uretprobe end.
  m = parse_marker("./app:loop:begin,./app:f%return", &err);
  REQUIRE(m);
  CHECK(m->end.kind == ProbeSpec::Kind::Uretprobe);

  // C++ symbols, mangled.
  m = parse_marker("node:_ZN4node11Environment9RunTimersEP10uv_timer_s,"
                   "node:_ZN4node11Environment9RunTimersEP10uv_timer_s%return", &err);
  REQUIRE(m);
  CHECK(m->end.kind == ProbeSpec::Kind::Uretprobe);
}

TEST_CASE("marker presets", "[markers]") {
  std::string err;
  auto m = parse_marker("glib", &err);
  REQUIRE(m);
  CHECK(m->preset == MarkerSpec::Preset::Glib);
  CHECK(m->preset_binary.empty());
  m = parse_marker("libuv=/usr/bin/node", &err);
  REQUIRE(m);
  CHECK(m->preset == MarkerSpec::Preset::Libuv);
  CHECK(m->preset_binary == "/usr/bin/node");
  CHECK_FALSE(parse_marker("glib=", &err));
  CHECK(err.find("no binary") != std::string::npos);
}

TEST_CASE("bad marker specs say what is wrong", "[markers]") {
  std::string err;
  CHECK_FALSE(parse_marker("/usr/bin/app:begin", &err));
  CHECK(err.find("BEGIN_SPEC,END_SPEC") != std::string::npos);
  CHECK_FALSE(parse_marker("a:b,c:d,e:f", &err));
  CHECK_FALSE(parse_marker("/usr/bin/app,/usr/bin/app:f", &err));
  CHECK(err.find("BINARY:SYMBOL") != std::string::npos);
  CHECK_FALSE(parse_marker(":f,:g", &err));
  CHECK(err.find("names no binary") != std::string::npos);
  CHECK_FALSE(parse_marker("app:a:b:c,app:f", &err));
  CHECK_FALSE(parse_marker("app:node::Env::Run,app:f", &err));
  CHECK_FALSE(parse_marker("app:f(int),app:g", &err));
  CHECK(err.find("mangled") != std::string::npos);
  CHECK_FALSE(parse_marker("app:%return,app:g", &err));
  CHECK_FALSE(parse_marker("app:prov:,app:g", &err));
  CHECK(err.find("identifiers") != std::string::npos);
}

TEST_CASE("binaries by path and by name", "[markers]") {
  std::string err;
  auto sh = resolve_binary("sh", &err);  // from PATH, symlinks resolved
  REQUIRE(sh);
  CHECK(sh->front() == '/');
  char buf[4096];
  CHECK(readlink(sh->c_str(), buf, sizeof buf) < 0);  // not a symlink
  auto libc = resolve_binary("libc.so.6", &err);  // from the library directories
  REQUIRE(libc);
  CHECK(libc->find("libc") != std::string::npos);
  CHECK_FALSE(resolve_binary("/nonexistent/x", &err));
  CHECK(err.find("no such file") != std::string::npos);
  CHECK_FALSE(resolve_binary("no-such-binary-jankbpf", &err));
  CHECK(err.find("not found") != std::string::npos);
}

TEST_CASE("a function's file offset, as a uprobe wants it", "[markers]") {
  std::string err, exe = self_exe();
  auto site = find_function(exe, "jankbpf_unit_marker_target", &err);
  REQUIRE(site);
  // Mapped at runtime: our own function is at load bias + vaddr; the file
  // offset is what /proc/self/maps's offset column and the address agree on.
  auto addr = reinterpret_cast<uintptr_t>(&jankbpf_unit_marker_target);
  FILE* maps = fopen("/proc/self/maps", "r");
  REQUIRE(maps);
  char line[4096];
  bool checked = false;
  while (fgets(line, sizeof line, maps)) {
    unsigned long lo, hi, off;
    if (sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &off) != 3) continue;
    if (addr >= lo && addr < hi) {
      CHECK(addr - lo + off == site->offset);
      checked = true;
    }
  }
  fclose(maps);
  CHECK(checked);
  CHECK_FALSE(find_function(exe, "no_such_function_jankbpf", &err));
  CHECK(err.find("no function") != std::string::npos);
  CHECK_FALSE(find_function("/proc/self/status", "x", &err));
}

TEST_CASE("USDT notes: none in a binary without them", "[markers]") {
  CHECK(sdt_probes(self_exe()).empty());
  CHECK(sdt_probes("/nonexistent").empty());
  std::vector<SdtProbe> probes{{"glib", "main__before_dispatch", "8@%rax", 0x10, 0}};
  CHECK(has_sdt_probe(probes, "glib", "main__before_dispatch"));
  CHECK_FALSE(has_sdt_probe(probes, "glib", "main__after_dispatch"));
}

TEST_CASE("display names of marker symbols", "[markers]") {
  CHECK(display_symbol("g_main_context_dispatch") == "g_main_context_dispatch");
  CHECK(display_symbol("_ZN4node11Environment9RunTimersEP10uv_timer_s") ==
        "node::Environment::RunTimers");
  CHECK(display_symbol("_Znotvalid") == "_Znotvalid");
}

TEST_CASE("runnable names: a printable string read at the probe, else the marker's name", "[markers]") {
  MarkerInfo m;
  m.name = "main__before_dispatch";
  char buf[JB_NAME_LEN] = {};
  CHECK(runnable_name(buf, sizeof buf, &m) == "main__before_dispatch");
  strcpy(buf, "GtkWidget resize");
  CHECK(runnable_name(buf, sizeof buf, &m) == "GtkWidget resize");
  buf[3] = '\x01';
  CHECK(runnable_name(buf, sizeof buf, &m) == "main__before_dispatch");
  memset(buf, 'x', sizeof buf);  // not terminated: bounded by the field
  CHECK(runnable_name(buf, sizeof buf, &m).size() == JB_NAME_LEN);
  buf[0] = 0;
  CHECK(runnable_name(buf, sizeof buf, nullptr) == "");
}

TEST_CASE("marker tasks render their boundary, runnable and marker", "[markers]") {
  EpochClock clock;
  MarkerTable table;
  std::string err;
  auto spec = parse_marker(self_exe() + ":jankbpf_unit_marker_target," + self_exe() +
                               ":jankbpf_unit_marker_target%return",
                           &err);
  REQUIRE(spec);
  REQUIRE(table.plan({*spec}, &err));
  REQUIRE(table.attachments().size() == 2);
  CHECK(table.attachments()[0].begin);
  CHECK_FALSE(table.attachments()[1].begin);
  CHECK(table.attachments()[1].kind == ProbeSpec::Kind::Uretprobe);
  CHECK((table.attachments()[0].cookie & 0xffffffffu) == 1);
  // The same marker twice attaches its sites once.
  MarkerTable twice;
  REQUIRE(twice.plan({*spec, *spec}, &err));
  CHECK(twice.attachments().size() == 2);
  CHECK(twice.markers().size() == 2);

  RecordBuilder builder(clock, table);
  jb_task_event e{};
  e.hdr.type = JB_EV_TASK_END;
  e.hdr.pid = e.hdr.tid = static_cast<uint32_t>(getpid());
  e.begin_ns = 1'000'000'000;
  e.end_ns = 1'200'000'000;
  e.boundary = JB_BOUND_MARKER;
  e.marker_id = 1;
  auto j = nlohmann::json::parse(to_json_line(builder.task(e)));
  CHECK(j["boundary"] == "marker");
  CHECK(j["runnable_name"] == "jankbpf_unit_marker_target");
  CHECK(j["marker"]["type"] == "uprobe");
  CHECK(j["marker"]["probe"] == "jankbpf_unit_marker_target");
  CHECK(j["marker"]["binary"] == self_exe());
  CHECK_FALSE(j["marker"].contains("runtime"));

  strcpy(e.runnable_name, "read at the probe");
  j = nlohmann::json::parse(to_json_line(builder.task(e)));
  CHECK(j["runnable_name"] == "read at the probe");

  e.boundary = JB_BOUND_AFTER_MARKER;
  j = nlohmann::json::parse(to_json_line(builder.task(e)));
  CHECK(j["boundary"] == "after_marker");
  CHECK_FALSE(j.contains("runnable_name"));
  CHECK_FALSE(j.contains("marker"));
  e.boundary = JB_BOUND_SYSCALL;
  j = nlohmann::json::parse(to_json_line(builder.task(e)));
  CHECK(j["boundary"] == "syscall");
  CHECK(j["delivery_ms"] == 0.0);
}

TEST_CASE("--marker is repeatable, one spec per flag", "[markers][cli]") {
  std::vector<std::string> args{"jankbpf", "--marker", "./a:b,./a:c", "--marker", "glib",
                                "--", "./a", "x"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto r = parse_options(static_cast<int>(argv.size()), argv.data());
  REQUIRE(r.options);
  REQUIRE(r.options->markers.size() == 2);
  CHECK(r.options->markers[0].begin.symbol == "b");
  CHECK(r.options->markers[1].preset == MarkerSpec::Preset::Glib);
  CHECK(r.options->command == std::vector<std::string>{"./a", "x"});

  std::vector<std::string> bad{"jankbpf", "--marker", "./a:b"};
  argv.clear();
  for (auto& a : bad) argv.push_back(a.data());
  r = parse_options(static_cast<int>(argv.size()), argv.data());
  CHECK_FALSE(r.options);
  CHECK(r.exit_code == kExitUsage);
  CHECK(r.message.find("--marker") != std::string::npos);
}

namespace {
StackFrame frame(const char* symbol, int module, bool jit = false, const char* file = "") {
  StackFrame f;
  f.symbol = symbol;
  f.module_index = module;
  f.jit = jit;
  f.file = file;
  return f;
}

TaskRecord runtime_task(const char* runtime, const char* marker_name) {
  TaskRecord r;
  r.boundary = Boundary::Marker;
  MarkerInfo m;
  m.type = "uprobe";
  m.runtime = runtime;
  m.name = marker_name;
  r.marker = m;
  r.runnable_name = marker_name;
  return r;
}
}  // namespace

TEST_CASE("runtime marker tasks are named after the callback in their stack", "[markers]") {
  // Node: native frames of the node binary (module 1), then JIT frames,
  // Node's internal JS, and the user's callback.
  auto r = runtime_task("libuv", "uv__run_timers");
  r.stack = {frame("gettimeofday", 0), frame("v8::base::Time::Now()", 1),
             frame("busyLoopForJank", -1, true, "/tmp/a.js:1"),
             frame("slowTimeoutCallback", -1, true, "/tmp/a.js:6"),
             frame("listOnTimeout", -1, true, "node:internal/timers:524"),
             frame("processTimers", -1, true, "node:internal/timers:504"),
             frame("Builtins_JSEntry", 1), frame("node::Environment::RunTimers(uv_timer_s*)", 1),
             frame("uv__run_timers", 1)};
  name_runnable_from_stack(r);
  CHECK(r.runnable_name == "slowTimeoutCallback");

  // A C program on libuv.so (module 2): the callback is the app's function.
  r = runtime_task("libuv", "uv__run_timers");
  r.stack = {frame("spin", 3), frame("on_timer", 3), frame("uv__run_timers", 2), frame("uv_run", 2),
             frame("main", 3)};
  name_runnable_from_stack(r);
  CHECK(r.runnable_name == "on_timer");

  // GLib without symbols for its static dispatchers (unnamed frames in libglib).
  r = runtime_task("glib", "g_main_context_dispatch");
  r.stack = {frame("clock_nanosleep", 0), frame("g_usleep", 1), frame("slow_cb", 2), frame("", 1),
             frame("g_main_context_dispatch", 1)};
  name_runnable_from_stack(r);
  CHECK(r.runnable_name == "slow_cb");

  // An anonymous JS callback is named by its place.
  r = runtime_task("libuv", "uv__run_check");
  r.stack = {frame("", -1, true, "/srv/app.js:12"), frame("processImmediate", -1, true, "node:internal/timers:476"),
             frame("node::Environment::CheckImmediate(uv_check_s*)", 1), frame("uv__run_check", 1)};
  name_runnable_from_stack(r);
  CHECK(r.runnable_name == "(anonymous /srv/app.js:12)");

  // Stacks that do not reach the marker's function, custom markers, USDT
  // markers and syscall tasks keep their names.
  r = runtime_task("glib", "g_main_context_dispatch");
  r.stack = {frame("spin", 2), frame("slow_cb", 2)};
  name_runnable_from_stack(r);
  CHECK(r.runnable_name == "g_main_context_dispatch");
  r = runtime_task("", "mark_begin");
  r.stack = {frame("work", 2), frame("mark_begin", 1)};
  name_runnable_from_stack(r);
  CHECK(r.runnable_name == "mark_begin");
  r = runtime_task("glib", "main__before_dispatch");
  r.marker->type = "usdt";
  r.runnable_name = "slow-timeout";
  r.stack = {frame("slow_cb", 2), frame("main__before_dispatch", 1)};
  name_runnable_from_stack(r);
  CHECK(r.runnable_name == "slow-timeout");
}

TEST_CASE("which mapped files a marker's binary is, in another process's view", "[markers]") {
  MarkerTable t;
  std::string err;
  auto custom = parse_marker(self_exe() + ":jankbpf_unit_marker_target," + self_exe() +
                                 ":jankbpf_unit_marker_target%return",
                             &err);
  auto glib = parse_marker("glib", &err);
  auto libuv = parse_marker("libuv", &err);
  auto named = parse_marker("libc.so.6:malloc,libc.so.6:free", &err);
  REQUIRE((custom && glib && libuv && named));
  REQUIRE(t.plan({*custom, *named}, &err));
  CHECK(t.matches(*custom, self_exe()));
  CHECK_FALSE(t.matches(*custom, "/other/jankbpf-unit"));
  CHECK(t.matches(*glib, "/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0.7400.6"));
  CHECK(t.matches(*glib, "/opt/gnome/lib/libglib-2.0.so.0"));
  CHECK_FALSE(t.matches(*glib, "/usr/lib/x86_64-linux-gnu/libgio-2.0.so.0"));
  CHECK(t.matches(*libuv, "/usr/local/bin/node"));
  CHECK(t.matches(*libuv, "/usr/lib/x86_64-linux-gnu/libuv.so.1.0.0"));
  CHECK_FALSE(t.matches(*libuv, "/usr/bin/nodejs-helper"));
  // A name matches that file name, versioned or not, wherever it lives.
  CHECK(t.matches(*named, "/lib/x86_64-linux-gnu/libc.so.6"));
  CHECK(t.matches(*named, "/containers/x/lib/libc.so.6"));
  CHECK_FALSE(t.matches(*named, "/lib/x86_64-linux-gnu/libm.so.6"));
  auto given = parse_marker("glib=/opt/app/lib/libglib-2.0.so.0", &err);
  REQUIRE(given);
  CHECK(t.matches(*given, "/opt/app/lib/libglib-2.0.so.0"));
  CHECK_FALSE(t.matches(*given, "/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0"));
}

TEST_CASE("a process mapping only files the markers cover needs nothing more", "[markers]") {
  MarkerTable t;
  std::string err;
  auto custom = parse_marker(self_exe() + ":jankbpf_unit_marker_target," + self_exe() +
                                 ":jankbpf_unit_marker_target%return",
                             &err);
  REQUIRE(custom);
  REQUIRE(t.plan({*custom}, &err));
  size_t before = t.attachments().size();
  std::vector<std::string> notes;
  // This process maps its own executable, the file the marker resolved to.
  CHECK(t.plan_for_process(getpid(), &notes).attach.empty());
  CHECK(notes.empty());
  CHECK(t.attachments().size() == before);
  CHECK(t.plan_for_process(999999999, &notes).attach.empty());  // gone: nothing
}
