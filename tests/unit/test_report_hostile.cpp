// `jankbpf report` and the live report sink against the inputs of issue 26:
// a stack log that is a 20,000-deep chain, a count of 4e9, lines and
// nesting past reason, one log named by every record, traces that are
// FIFOs, output paths through a symlinked directory, and a render that
// held the lock emit() needs.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "report/atomic_file.h"
#include "report/input_file.h"
#include "report/jsonl_reader.h"
#include "report/perfetto.h"
#include "report/report_sink.h"
#include "report/sampled.h"
#include "report/sched_trace.h"
#include "report/writer.h"

using namespace jankbpf;
using namespace jankbpf::report;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char t[] = "/tmp/jankbpf-unit-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// A run of three 200 ms tasks of one thread, each with these samples.
Run three_tasks_sampling(const std::vector<SampledStack>& stacks) {
  Run run;
  TaskRecord r;
  r.proc.pid = r.tid = 7;
  r.begin_mono_ns = 1'000'000'000;
  r.duration_ms = 200;
  r.sampled = stacks;
  for (int i = 0; i < 3; i++) run.add(r);
  return run;
}

// Each node of the chain has one sample of its own and the rest below it:
// every node is a leaf, and a leaf's stack is its whole path.
std::string deep_chain(size_t depth) {
  std::string out;
  for (size_t i = 0; i < depth; i++)
    out += std::string(i % 64, ' ') + std::to_string(depth - i) + " #" + std::to_string(i) + " pc " +
           std::to_string(1000 + i) + " /usr/bin/app(f" + std::to_string(i) + "+1)\n";
  return out;
}

size_t frames_of(const std::vector<SampledStack>& v) {
  size_t n = 0;
  for (const auto& s : v) n += s.frames.size();
  return n;
}

std::string record_line(const std::string& log, uint64_t seq = 1) {
  return R"({"type":"jank","time":1,"pid":7,"tid":7,"bundle_name":"app","duration_ms":200,"begin_monotonic_ns":)" +
         std::to_string(seq * 1'000'000'000ULL) + R"(,"task_seq":)" + std::to_string(seq) +
         R"(,"external_log":[")" + log + "\"]}\n";
}

}  // namespace

TEST_CASE("a 20,000-deep chain of a stack log costs its bounds, not its square", "[report][hostile]") {
  const std::string text = deep_chain(20000);
  INFO("log of " << text.size() << " bytes");
  bool truncated = false;
  auto stacks = parse_stack_log(text, StackLogLimits{}, &truncated);
  CHECK(frames_of(stacks) <= StackLogLimits{}.max_frame_refs);
  size_t deepest = 0;
  for (const auto& s : stacks) deepest = std::max(deepest, s.frames.size());
  CHECK(deepest == StackLogLimits{}.max_depth);
  uint64_t samples = 0;
  for (const auto& s : stacks) samples += s.count;
  CHECK(samples == 20000);  // the deeper nodes' samples stay with the deepest kept
  // Chains within the depth bound, side by side: the frame bound ends it.
  std::string wide;
  for (int i = 0; i < 200; i++) wide += deep_chain(500);
  stacks = parse_stack_log(wide, StackLogLimits{}, &truncated);
  CHECK(truncated);
  CHECK(frames_of(stacks) <= StackLogLimits{}.max_frame_refs);
  // A legitimate log within the bounds is read whole.
  truncated = true;
  auto small = parse_stack_log(deep_chain(100), StackLogLimits{}, &truncated);
  CHECK_FALSE(truncated);
  CHECK(small.size() == 100);
  CHECK(small.back().frames.size() == 1);  // the root's own sample, closed last
  CHECK(frames_of(small) == 100 * 101 / 2);
}

TEST_CASE("nodes past the depth bound leave their samples with their ancestor", "[report][hostile]") {
  StackLogLimits limits;
  limits.max_depth = 3;
  auto stacks = parse_stack_log(deep_chain(6), limits);
  uint64_t total = 0;
  for (const auto& s : stacks) total += s.count;
  CHECK(total == 6);  // every sample kept
  REQUIRE(stacks.size() == 3);
  CHECK(stacks[0].frames.size() == 3);
  CHECK(stacks[0].count == 4);  // levels 2..5
}

TEST_CASE("a count of 4e9 in a stack log makes a bounded Perfetto trace", "[report][hostile]") {
  auto stacks = parse_stack_log("4000000000 #0 pc 1 /a(f+1)\n");
  REQUIRE(stacks.size() == 1);
  CHECK(stacks[0].count == StackLogLimits{}.max_count);
  stacks[0].count = 4'000'000'000u;  // as the live path could hand it too
  Run run = three_tasks_sampling(stacks);
  std::string trace = render_perfetto(run, {});
  INFO("trace of " << trace.size() << " bytes");
  CHECK(trace.size() < (4u << 20));
}

namespace {

// The callstack iid of each PerfSample packet in a trace, in order: the
// wire format walked by hand (Trace.packet = 1, TracePacket.perf_sample =
// 66, PerfSample.callstack_iid = 4).
bool read_varint(std::string_view b, size_t* at, uint64_t* v) {
  *v = 0;
  for (int shift = 0; *at < b.size() && shift < 64; shift += 7) {
    const auto c = static_cast<unsigned char>(b[(*at)++]);
    *v |= uint64_t{c & 0x7fu} << shift;
    if (!(c & 0x80)) return true;
  }
  return false;
}

// Calls fn(field, bytes) for each length-delimited field; skips the rest.
template <typename Fn>
bool walk(std::string_view b, Fn fn) {
  size_t at = 0;
  while (at < b.size()) {
    uint64_t key, v;
    if (!read_varint(b, &at, &key)) return false;
    switch (key & 7) {
      case 0: if (!read_varint(b, &at, &v)) return false; fn(key >> 3, std::string_view{}, v); break;
      case 1: at += 8; break;
      case 5: at += 4; break;
      case 2:
        if (!read_varint(b, &at, &v) || v > b.size() - at) return false;
        fn(key >> 3, b.substr(at, v), 0);
        at += v;
        break;
      default: return false;
    }
  }
  return at == b.size();
}

std::vector<uint64_t> sample_callstacks(std::string_view trace) {
  std::vector<uint64_t> iids;
  bool ok = walk(trace, [&](uint64_t f, std::string_view packet, uint64_t) {
    if (f != 1) return;
    walk(packet, [&](uint64_t pf, std::string_view sample, uint64_t) {
      if (pf != 66) return;
      walk(sample, [&](uint64_t sf, std::string_view, uint64_t v) {
        if (sf == 4) iids.push_back(v);
      });
    });
  });
  REQUIRE(ok);
  return iids;
}

}  // namespace

TEST_CASE("PerfSample packets stop at their bounds, each stack keeping its share", "[report][hostile]") {
  auto stacks = parse_stack_log("300 #0 pc 1 /a(f+1)\n100 #0 pc 2 /a(g+1)\n");
  REQUIRE(stacks.size() == 2);
  Run run = three_tasks_sampling(stacks);
  // 400 claimed a task: 40 packets for each of the first two, 20 left for the third.
  auto iids = sample_callstacks(render_perfetto(run, {}, SampleLimits{.per_task = 40, .per_trace = 100}));
  REQUIRE(iids.size() == 100);
  std::map<uint64_t, int> per_stack;
  for (size_t i = 0; i < 40; i++) per_stack[iids[i]]++;
  REQUIRE(per_stack.size() == 2);
  CHECK(per_stack.begin()->second == 30);  // 300 of 400
  CHECK(per_stack.rbegin()->second == 10);
  // Under the bounds, every claimed sample is a packet.
  CHECK(sample_callstacks(render_perfetto(run, {})).size() == 3 * 400);
}

TEST_CASE("JSON lines: too long, too deep, too many files are bounded", "[report][hostile]") {
  std::string in;
  in += std::string(5u << 20, ' ') + "{\"type\":\"jank\"}\n";   // 5 MiB: over the line bound
  in += std::string(100000, '[') + std::string(100000, ']') + "\n";  // nesting
  in += R"({"type":"jank","pid":1,"tid":1,"external_log":[)";
  for (int i = 0; i < 1000; i++) in += "\"/nonexistent/stack-" + std::to_string(i) + ".txt\",";
  in += "\"x\"]}\n";
  std::istringstream s(in);
  ReadStats st;
  Run run = read_jsonl(s, ReadOptions{}, &st);
  CHECK(st.lines == 3);
  CHECK(st.bad_lines == 2);
  CHECK(st.lines_too_long == 1);
  REQUIRE(run.tasks.size() == 1);
  CHECK(run.tasks[0].rec.external_log.size() == 8);
  CHECK(st.logs_missing == 8);
}

TEST_CASE("one stack log named by every record is read once", "[report][hostile]") {
  TempDir d;
  const fs::path log = d.path / "stack-1.txt";
  std::string text;
  for (int i = 0; i < 2000; i++) text += "1 #0 pc " + std::to_string(i) + " /usr/bin/app(f" + std::to_string(i) + "+1)\n";
  write(log, text);
  std::string in;
  for (int i = 0; i < 3000; i++) in += record_line(log.string(), i + 1);
  std::istringstream s(in);
  ReadStats st;
  Run run = read_jsonl(s, ReadOptions{}, &st);
  CHECK(st.stack_logs == 1);
  CHECK(st.logs_repeated == 2999);
  REQUIRE(run.tasks.size() == 3000);
  CHECK(run.tasks.front().samples.size() == 2000);
  CHECK(run.tasks[1000].samples.size() == 2000);  // the same samples, not read again
  // 6e6 claimed: the run keeps kMaxSamples of them and counts the rest.
  CHECK(run.samples() == Run::kMaxSamples);
  CHECK(st.samples_dropped == 3000ull * 2000 - Run::kMaxSamples);
  CHECK(run.tasks.back().samples.empty());
}

TEST_CASE("the samples a run holds are bounded whatever the logs claim", "[report][hostile]") {
  Run run;
  TaskRecord r;
  for (int i = 0; i < 70; i++) {
    r.sampled.clear();
    SampledStack s;
    s.frames.push_back({"f" + std::to_string(i), "m"});
    r.sampled.assign(65536, s);
    run.add(r);
  }
  CHECK(run.samples() == Run::kMaxSamples);
  CHECK(run.samples_dropped == 70ull * 65536 - Run::kMaxSamples);
}

TEST_CASE("input files: FIFOs and devices are refused without opening them", "[report][hostile]") {
  TempDir d;
  const fs::path fifo = d.path / "trace-1.dat", link = d.path / "link.dat", reg = d.path / "stack-1.txt";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_symlink(fifo, link);
  write(reg, "1 #0 pc 1 /a(f+1)\n");
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& p : {fifo, link}) {
    Opened o = open_input_file(p, 1 << 20);
    CHECK_FALSE(o);
    CHECK(o.error.find("a FIFO, not a regular file") != std::string::npos);
  }
  Opened dev = open_input_file("/dev/null", 1 << 20);
  CHECK(dev.error.find("a character device") != std::string::npos);
  CHECK(open_input_file(reg, 1 << 20));
  CHECK_FALSE(open_input_file(reg, 4));  // over its size bound
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  // A trace that is a FIFO: refused at once, trace-cmd never waits on it.
  std::string error;
  auto events = read_sched_events(fifo, 0, ~0ull, &error);
  CHECK(events.empty());
  CHECK(error.find("a FIFO, not a regular file") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
}

TEST_CASE("report files refuse a symlinked directory anywhere on the path", "[report][hostile]") {
  TempDir d;
  fs::create_directory(d.path / "victim");
  fs::create_directory(d.path / "real");
  fs::create_directory_symlink(d.path / "victim", d.path / "planted");
  std::string error;
  for (const char* flag : {"html", "perfetto", "folded"}) {
    INFO(flag);
    ReportFiles files;
    const std::string path = (d.path / "planted" / "out").string();
    (std::string(flag) == "html" ? files.html : std::string(flag) == "perfetto" ? files.perfetto : files.folded) = path;
    ReportWriter w(files);
    CHECK_FALSE(w.check(&error));
    CHECK(error.find("\"planted\" is a symlink") != std::string::npos);
    CHECK_FALSE(write_atomic(path, "x", &error));
  }
  CHECK(fs::is_empty(d.path / "victim"));
  CHECK(write_atomic((d.path / "real" / "out").string(), "x", &error));
  struct stat st{};
  REQUIRE(stat((d.path / "real" / "out").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
}

TEST_CASE("the live report sink: emit() never waits for a render; exits are bounded", "[report][hostile]") {
  TempDir d;
  ReportFiles files;
  files.html = (d.path / "r.html").string();
  files.perfetto = (d.path / "r.pftrace").string();
  files.folded = (d.path / "r.folded").string();
  // A run that takes a while to render: 20,000 tasks, 5 stacks each.
  std::vector<TaskRecord> tasks;
  for (int i = 0; i < 20000; i++) {
    TaskRecord r;
    r.proc.pid = r.tid = 100 + i % 50;
    r.proc.name = "app";
    r.task_seq = static_cast<uint64_t>(i);
    r.begin_mono_ns = 1'000'000'000ull + static_cast<uint64_t>(i) * 1'000'000;
    r.duration_ms = 200;
    for (int k = 0; k < 5; k++) {
      SampledStack s;
      for (int f = 0; f < 8; f++) s.frames.push_back({"fn" + std::to_string((i * 7 + k * 3 + f) % 5000), "app"});
      r.sampled.push_back(std::move(s));
    }
    tasks.push_back(std::move(r));
  }
  Run whole;
  for (const auto& t : tasks) whole.add(t);
  ReportWriter probe(files);
  std::string error;
  const auto r0 = std::chrono::steady_clock::now();
  REQUIRE(probe.write(whole, false, &error));
  const double render_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
  INFO("one render of 20,000 tasks: " << render_s << " s");
  REQUIRE(render_s > 0.2);  // else this machine cannot tell a wait from none

  ReportSink sink(files, 0);
  REQUIRE(sink.start(&error));
  for (size_t i = 0; i + 1 < tasks.size(); i++) sink.emit(tasks[i]);
  // Renders run now; every emit meanwhile must return at once.
  double worst = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(3 * render_s);
  ExitRecord e;
  size_t exits = 0;
  while (std::chrono::steady_clock::now() < until) {
    const auto t0 = std::chrono::steady_clock::now();
    sink.emit(tasks.back());
    for (int k = 0; k < 100; k++, exits++) sink.emit(e);
    worst = std::max(worst, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (; exits < 30000; exits++) sink.emit(e);
  SummaryRecord s;
  sink.emit(s);
  INFO("the longest emit() while rendering: " << worst << " s");
  CHECK(worst < render_s / 4);
  CHECK(fs::file_size(d.path / "r.html") > 1000);
  // What the sink kept: within the run's bounds (the rest counted).
  CHECK(sink.held_exits() == Run::kMaxExits);
  CHECK(sink.held_tasks() == Run::kMaxTasks);
}

TEST_CASE("the live report sink: frames arriving during renders reach the run between them", "[report][hostile]") {
  // Every frame of a 60 Hz client comes in batches while the writer thread
  // renders. The run is the writer's alone: emit() once pushed frames into
  // it while a render walked them, and jankbpf died of SIGSEGV (e2e
  // test_frames, 2 runs of 6). Each render here walks 20,000 frames.
  TempDir d;
  ReportFiles files;
  files.html = (d.path / "r.html").string();
  files.perfetto = (d.path / "r.pftrace").string();
  ReportSink sink(files, 0);
  std::string error;
  REQUIRE(sink.start(&error));
  FrameRecord janky;
  janky.proc.pid = 7;
  janky.proc.name = "wl_frames";
  janky.frame.pid = janky.frame.tid = 7;
  janky.frame.surface = 3;
  uint64_t number = 0, sent = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    FrameBatch b;
    b.procs.push_back({7, {"wl_frames", "/bin/wl_frames", ""}});
    for (int k = 0; k < 500; k++) {
      FrameTiming f;
      f.pid = f.tid = 7;
      f.surface = 3;
      f.number = ++number;
      f.start_ns = 1'000'000'000 + number * 16'666'667;
      f.end_ns = f.start_ns + 5'000'000;
      f.deadline_ns = f.start_ns + 16'666'667;
      f.interval_ns = 16'666'667;
      b.frames.push_back(f);
    }
    sink.emit(b);
    sent += b.frames.size();
    janky.frame = b.frames.back();
    janky.frame.janky = true;
    sink.emit(janky);  // a rewrite is due
  }
  SummaryRecord s;
  sink.emit(s);
  INFO(sent << " frames sent");
  REQUIRE(sent > Run::kMaxFrames);
  // The newest kMaxFrames kept, the rest counted, none lost between.
  CHECK(sink.held_frames() == Run::kMaxFrames);
  CHECK(sink.dropped_frames() == sent - Run::kMaxFrames);
  CHECK(fs::file_size(d.path / "r.html") > 1000);
}
