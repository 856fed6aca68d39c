// Crashes the libFuzzer targets (tests/fuzz/) found, each kept here with
// its minimized input so the fix stays in place under the normal build.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "config/jank_config.h"
#include <nlohmann/json.hpp>

#include "report/jsonl_reader.h"
#include "stack/tree.h"

using namespace jankbpf;
using namespace jankbpf::stack;

namespace {

// Lines of a text whose lines are separated (heaviest_stack) or, with
// ends_in_newline, terminated (render) by '\n'.
size_t lines_of(const std::string& s, bool ends_in_newline = false) {
  size_t n = s.empty() || ends_in_newline ? 0 : 1;
  for (char c : s) n += c == '\n';
  return n;
}

// JSON lines as `jankbpf report` reads them, without opening stack logs.
report::Run read_records(const std::string& text) {
  std::istringstream in(text);
  report::ReadOptions opts;
  opts.read_logs = false;
  report::ReadStats st;
  return report::read_jsonl(in, opts, &st);
}

}  // namespace

// fuzz_stack_tree: heaviest_stack() is one "#NN frame" per line, but it
// printed names raw, so a symbol (a process's own bytes: JIT map, ELF
// symtab) with a newline forged extra frame lines into the record's
// heaviest_stack; render() already escaped them. Same for a wait state.
TEST_CASE("fuzz: a name with a newline stays one frame line", "[fuzz][stack][tree]") {
  Frame f;
  f.pc = 0x1000;
  f.module = "/usr/bin/app";
  f.module_offset = 0x10;
  f.symbol = "busy\n#01 pc 00000000 /lib/libc.so.6(forged+0)";
  ResolvedStack s;
  s.frames = {f};
  StackTree t;
  t.add(s);
  CHECK(lines_of(t.heaviest_stack()) == 1);
  CHECK(t.heaviest_stack() == "#00 pc 00000010 /usr/bin/app(busy\\n#01 pc 00000000 /lib/libc.so.6(forged+0)+0)");
  CHECK(lines_of(t.render(), true) == 1);

  ResolvedStack w;
  w.wait_state = '\n';
  StackTree tw;
  tw.add(w);
  CHECK(tw.heaviest_stack() == "#00 wait \\n (off-cpu)");
  CHECK(lines_of(tw.render(), true) == 1);
}

// fuzz_config (its generated 64 KB input): a key whose value is a deeply
// nested array was quoted in the error with json::dump(), which recurses
// once per level: ~30,000 levels overflowed the stack under ASan and made
// a 64 KB message otherwise. The value is now named, not printed.
TEST_CASE("fuzz: a deeply nested config value is named, not dumped", "[fuzz][config]") {
  char path[] = "/tmp/jankbpf-fuzz-config-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  {
    std::ofstream f(path);
    f << "{\"log_type\":" << std::string(32000, '[') << std::string(32000, ']') << "}";
  }
  std::string msg;
  try {
    ConfigBuilder b;
    b.load_file(path);
  } catch (const ConfigError& e) {
    msg = e.what();
  }
  unlink(path);
  CHECK(msg.find("log_type [...] is a JSON array, not a string") != std::string::npos);
  CHECK(msg.size() < 512);
}

// fuzz_report_jsonl (issue 26): a record's number outside its field's
// range ("time":1.79569e+24 for an int64) was converted by nlohmann's get<>,
// which is undefined behaviour (UBSan: "outside the range of representable
// values"). Such a field now reads as absent.
TEST_CASE("fuzz: out-of-range numbers in a record read as absent", "[fuzz][report]") {
  using namespace jankbpf::report;
  Run run = read_records(
      R"({"type":"jank","time":1.79569e+24,"pid":-1e300,"tid":4294967296,"uid":-1,"duration_ms":1e300,)"
      R"("begin_monotonic_ns":-5,"task_seq":18446744073709551615,"seen_running":1})" "\n"
      R"({"type":"exit","pid":7,"exit_code":1e19})" "\n");
  REQUIRE(run.tasks.size() == 1);
  const TaskRecord& r = run.tasks[0].rec;
  CHECK(r.time_ms == 0);
  CHECK(r.proc.pid == 0);
  CHECK(r.tid == 0);
  CHECK(r.proc.uid == 0);
  CHECK(r.begin_mono_ns == 0);
  CHECK(r.task_seq == 18446744073709551615ull);
  CHECK_FALSE(r.seen_running);
  REQUIRE(run.exits.size() == 1);
  CHECK(run.exits[0].exit_code == 0);
}

// fuzz_report_jsonl (stop 38): a `frame` record's fields were read with a
// getter of their own (report/jsonl_frames.cpp) that had none of the range
// checks above, so "pid":1303211…1 (1.3e76) was converted to an int:
// undefined (UBSan). Both readers now share report/json_field.h, which also
// turns away durations that are negative, not finite or over 1e12: the
// Perfetto writer turns a task's duration_ms into ns.
TEST_CASE("fuzz: a frame record's out-of-range numbers read as absent", "[fuzz][report]") {
  using namespace jankbpf::report;
  const auto j = nlohmann::json::parse(
      R"({"type":"frame","time":1795694609969,"pid":1303211111111111111111111111111111111111111111111111111111111111111111111111,)"
      R"("tid":-1e300,"frame_number":-3,"interval_ms":1e300,"skipped_frames":1e10,)"
      R"("expected":{"start_monotonic_ns":100,"deadline_monotonic_ns":1e30},)"
      R"("actual":{"start_monotonic_ns":200,"end_monotonic_ns":300},"state_ms":{"running":-5,"sleeping":1e13}})");
  FrameRecord rec;
  REQUIRE(frame_from_json(j, &rec));
  CHECK(rec.proc.pid == 0);
  CHECK(rec.frame.pid == 0);
  CHECK(rec.frame.tid == 0);
  CHECK(rec.frame.number == 0);
  CHECK(rec.frame.interval_ns == 0);
  CHECK(rec.frame.skipped_frames == 0);
  CHECK(rec.frame.deadline_ns == 0);
  CHECK(rec.frame.running_ms == 0);
  CHECK(rec.frame.sleeping_ms == 0);
  CHECK(rec.frame.start_ns == 200);
  CHECK(rec.time_ms == 1795694609969);

  Run run = read_records(R"({"type":"jank","pid":7,"tid":7,"duration_ms":1e300,"delivery_ms":-1,)"
                         R"("state_ms":{"running":"x","runnable":-0.5}})" "\n");
  REQUIRE(run.tasks.size() == 1);
  CHECK(run.tasks[0].rec.duration_ms == 0);
  CHECK(run.tasks[0].rec.delivery_ms == 0);
  CHECK(run.tasks[0].rec.state.running_ms == 0);
}
