// Unit tests for the report encoders: the protobuf writer, folded stacks,
// HTML escaping, stack-log parsing, trace-cmd text parsing, atomic writes
// and reading records back.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "output/output.h"
#include "report/atomic_file.h"
#include "report/cause_view.h"
#include "report/folded.h"
#include "report/html.h"
#include "report/jsonl_reader.h"
#include "report/perfetto.h"
#include "report/protobuf.h"
#include "report/sampled.h"
#include "report/sched_trace.h"
#include "stack/tree.h"

using namespace jankbpf;
using namespace jankbpf::report;

namespace {

std::string hex(const std::string& s) {
  std::string out;
  char b[4];
  for (unsigned char c : s) {
    snprintf(b, sizeof b, "%02x", c);
    out += b;
  }
  return out;
}

SampledStack stack_of(std::vector<std::string> names, char wait = 0, uint32_t count = 1, uint64_t t = 0) {
  SampledStack s;
  s.wait_state = wait;
  s.count = count;
  s.time_ns = t;
  for (auto& n : names) s.frames.push_back({n, "app"});
  return s;
}

TaskRecord task(pid_t pid, std::string name, uint64_t seq, std::vector<SampledStack> samples) {
  TaskRecord r;
  r.proc.pid = pid;
  r.tid = pid;
  r.proc.name = std::move(name);
  r.thread_name = r.proc.name;
  r.task_seq = seq;
  r.duration_ms = 200;
  r.begin_mono_ns = 1'000'000'000ULL * seq;
  r.sampled = std::move(samples);
  return r;
}

std::filesystem::path temp_dir() {
  char tmpl[] = "/tmp/jankbpf-unit-report-XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  return tmpl;
}

}  // namespace

TEST_CASE("protobuf writer encodes varints, fixed64, strings and nested messages", "[report]") {
  ProtoWriter w;
  w.varint(1, 0);
  w.varint(1, 1);
  w.varint(1, 127);
  w.varint(1, 128);
  w.varint(1, 300);
  CHECK(hex(w.data()) == "0800" "0801" "087f" "088001" "08ac02");
  ProtoWriter big;
  big.varint(2, UINT64_MAX);
  CHECK(hex(big.data()) == "10ffffffffffffffffff01");
  ProtoWriter neg;
  neg.sint(3, -1);  // int64 -1: ten bytes, as protoc writes it
  CHECK(hex(neg.data()) == "18ffffffffffffffffff01");
  ProtoWriter f;
  f.fixed64(47, 0x0102030405060708ULL);
  CHECK(hex(f.data()) == "f9020807060504030201");  // tag (47<<3|1) = 377 = f9 02
  ProtoWriter s;
  s.string(2, "hi");
  ProtoWriter outer;
  outer.message(1, s);
  CHECK(hex(outer.data()) == "0a04" "12026869");
  ProtoWriter d;
  d.dbl(5, 1.5);
  CHECK(hex(d.data()) == "29000000000000f83f");
}

TEST_CASE("folded frames cannot break the format", "[report]") {
  CHECK(folded_frame("a;b") == "a:b");
  CHECK(folded_frame("line\nbreak") == "line break");
  CHECK(folded_frame("operator()(int) const") == "operator()(int) const");
  CHECK(folded_frame("") == "[unnamed]");
}

TEST_CASE("folded stacks per process and per jank, root first, off-CPU marked", "[report]") {
  Run run;
  run.add(task(10, "app", 1, {stack_of({"main", "outer", "inner"}, 0, 1, 5), stack_of({"main", "outer", "inner"}, 0, 1, 6),
                              stack_of({"main", "read"}, 'S', 1, 7)}));
  run.add(task(10, "app", 2, {stack_of({"main", "outer", "inner"})}));
  run.add(task(20, "other;x", 1, {stack_of({"main"}, 'D')}));
  CHECK(render_folded(run, FoldedBy::Process) ==
        "app (pid 10);main;outer;inner 3\n"
        "app (pid 10);main;read;[off-CPU: sleeping] 1\n"
        "other:x (pid 20);main;[off-CPU: blocked_io] 1\n");
  std::string by_jank = render_folded(run, FoldedBy::Jank);
  CHECK(by_jank.find("jank app pid 10 tid 10 #1 200.0 ms;main;outer;inner 2\n") != std::string::npos);
  CHECK(by_jank.find("jank app pid 10 tid 10 #2 200.0 ms;main;outer;inner 1\n") != std::string::npos);

  SECTION("a hang's samples come again with its jank: counted once") {
    TaskRecord h = task(10, "app", 2, {stack_of({"main", "outer", "inner"})});
    h.kind = TaskRecord::Kind::Hang;
    run.add(h);
    CHECK(render_folded(run, FoldedBy::Process).find("app (pid 10);main;outer;inner 3\n") != std::string::npos);
  }
}

TEST_CASE("HTML report: strings from the watched process cannot close the script", "[report]") {
  CHECK(script_safe_json(R"({"a":"</script><!--&"})") == R"({"a":"\u003c/script\u003e\u003c!--\u0026"})");
  Run run;
  TaskRecord r = task(10, "</script><script>alert(1)</script>", 1, {stack_of({"<img src=x onerror=alert(2)>"})});
  r.thread_name = "\xe2\x80\xa8<b>";  // U+2028 ends a JS line in old parsers
  r.external_log = {"/tmp/\"><script>alert(3)</script>.txt"};
  run.add(r);
  std::string page = render_html(run, true, 0);
  // Exactly the page's own two script elements, and its own closing tags.
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = page.find(needle); at != std::string::npos; at = page.find(needle, at + 1)) n++;
    return n;
  };
  CHECK(count("<script") == 2);
  CHECK(count("</script") == 2);
  CHECK(page.find("alert(1)") != std::string::npos);  // the name is there, as data
  CHECK(page.find("<img") == std::string::npos);
  CHECK(page.find("\xe2\x80\xa8") == std::string::npos);
  CHECK(page.find("\\u2028") != std::string::npos);
}

TEST_CASE("stack log text parses back to the samples the tree was built from", "[report]") {
  auto frame = [](std::string sym, std::string mod, uint64_t off, uint32_t flags = 0) {
    stack::Frame f;
    f.symbol = std::move(sym);
    f.module = std::move(mod);
    f.module_offset = off;
    f.pc = flags & stack::kFrameKernel ? 0xffffffff81000000ULL + off : 0x400000 + off;
    f.build_id = "0123456789abcdef0123456789abcdef01234567";
    f.symbol_offset = 4;
    f.flags = flags;
    return f;
  };
  stack::ResolvedStack a, b, c;
  // Leaf first, as the unwinder gives them.
  a.frames = {frame("inner", "/bin/app", 0x30), frame("ns::f(int)", "/bin/app", 0x20), frame("main", "/bin/app", 0x10)};
  b.frames = {frame("", "/lib/libx.so", 0x99), frame("main", "/bin/app", 0x10)};
  c.frames = {frame("schedule", "[kernel.kallsyms]", 0x5, stack::kFrameKernel), frame("main", "/bin/app", 0x11)};
  c.wait_state = 'S';
  stack::StackTree tree;
  tree.add(a);
  tree.add(a);
  tree.add(b);
  tree.add(c);
  auto parsed = parse_stack_log("# jankbpf stack log: header\n" + tree.render());
  std::map<std::string, uint32_t> got, want;
  auto key = [](const SampledStack& s) {
    std::string k;
    for (auto& f : s.frames) k += f.name + ";";
    return k + (s.wait_state ? off_cpu_frame(s.wait_state) : "");
  };
  for (auto& s : parsed) got[key(s)] += s.count;
  for (auto* s : {&a, &a, &b, &c}) want[key(to_sampled(*s, 0))] += 1;
  std::string seen;
  for (auto& [k, v] : got) seen += "got " + k + " " + std::to_string(v) + "\n";
  for (auto& [k, v] : want) seen += "want " + k + " " + std::to_string(v) + "\n";
  INFO(seen);
  CHECK(got == want);
  CHECK(want.count("main;ns::f(int);inner;") == 1);
  CHECK(want.count("main;libx.so+0x99;") == 1);
  CHECK(want.count("main;schedule_[k];[off-CPU: sleeping]") == 1);

  SECTION("JIT frames") {
    SampledFrame f;
    char w;
    REQUIRE(parse_log_frame("at busyLoopForJank (/tmp/busy.js:2:3)", &f, &w));
    CHECK(f.name == "busyLoopForJank");
  }
}

TEST_CASE("trace-cmd report text: sched_switch and sched_waking, comms with spaces", "[report]") {
  const char* text =
      "cpus=2\n"
      "         jankbpf-22032 [000]  1229.408820991: sched_switch:          prev_comm=jankbpf prev_pid=22032 "
      "prev_prio=120 prev_state=1 next_comm=Web Content next_pid=21690 next_prio=120\n"
      " memfd:sealed-91-7698  [001]  1229.410652357: sched_waking:          comm=redis-server pid=11567 prio=120 "
      "target_cpu=000\n"
      "  <idle>-0     [001]  1229.5: irq_handler_entry: irq=1\n"
      "  <idle>-0     [001]  1229.6: sched_wakeup: comm=a b pid=7 prio=120 target_cpu=001\n"
      "  late-1 [000]  1240.000000000: sched_switch: prev_comm=a prev_pid=1 prev_prio=1 prev_state=0 next_comm=b "
      "next_pid=2 next_prio=1\n";
  auto ev = parse_sched_report(text, 0, 1230'000'000'000ULL);
  REQUIRE(ev.size() == 3);
  CHECK(ev[2].kind == SchedEvent::Kind::Wakeup);
  CHECK(ev[2].prev_comm == "a b");
  CHECK(ev[2].ts_ns == 1229'600'000'000ULL);
  CHECK(ev[0].kind == SchedEvent::Kind::Switch);
  CHECK(ev[0].cpu == 0);
  CHECK(ev[0].ts_ns == 1229'408'820'991ULL);
  CHECK(ev[0].pid == 22032);
  CHECK(ev[0].prev_state == 1);
  CHECK(ev[0].next_comm == "Web Content");
  CHECK(ev[0].next_pid == 21690);
  CHECK(ev[1].kind == SchedEvent::Kind::Waking);
  CHECK(ev[1].cpu == 1);
  CHECK(ev[1].pid == 7698);
  CHECK(ev[1].prev_comm == "redis-server");
  CHECK(ev[1].prev_pid == 11567);
  CHECK(ev[1].target_cpu == 0);
}

TEST_CASE("perfetto trace: packets for tracks, slices, samples and ftrace", "[report]") {
  Run run;
  TaskRecord r = task(10, "app", 1, {stack_of({"main", "inner"}, 0, 1, 1'050'000'000ULL)});
  OffCpuInfo o;
  o.state = "sleeping";
  o.off_ns = 1'010'000'000ULL;
  o.woken_ns = 1'100'000'000ULL;
  o.has_waker = true;
  o.waker = {42, 43, "waker", {}, {}};
  r.off_cpu.push_back(o);
  run.add(r);
  SchedEvent s;
  s.ts_ns = 1'000'000'000ULL;
  s.prev_comm = "app";
  auto pb = render_perfetto(run, {s});
  // Every top-level field is Trace.packet (field 1, length-delimited).
  size_t at = 0, packets = 0;
  while (at < pb.size()) {
    REQUIRE(static_cast<unsigned char>(pb[at]) == 0x0a);
    at++;
    uint64_t len = 0;
    int shift = 0;
    while (static_cast<unsigned char>(pb[at]) & 0x80) len |= uint64_t(pb[at++] & 0x7f) << (shift += 7, shift - 7);
    len |= uint64_t(pb[at++] & 0x7f) << shift;
    at += len;
    packets++;
  }
  CHECK(at == pb.size());
  // interned data, 2 process/thread tracks + waker track, jank begin/end,
  // off-CPU begin/end, 2 flow instants, 1 sample, 1 ftrace bundle.
  CHECK(packets == 1 + 3 + 2 + 2 + 2 + 1 + 1);
}

TEST_CASE("atomic writes replace the file and never write through a symlink", "[report]") {
  auto dir = temp_dir();
  std::string path = dir / "r.html", error;
  REQUIRE(write_atomic(path, "one", &error));
  REQUIRE(write_atomic(path, "two", &error));
  std::ifstream f(path);
  std::string got((std::istreambuf_iterator<char>(f)), {});
  CHECK(got == "two");
  struct stat st{};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  CHECK(std::distance(std::filesystem::directory_iterator(dir), {}) == 1);  // no temp file left
  std::string target = dir / "target", link = dir / "link.html";
  { std::ofstream(target) << "keep"; }
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  CHECK_FALSE(write_atomic(link, "evil", &error));
  CHECK(error.find("symlink") != std::string::npos);
  CHECK_FALSE(check_writable((dir / "nodir" / "x.html").string(), &error));
  std::ifstream t(target);
  std::string kept((std::istreambuf_iterator<char>(t)), {});
  CHECK(kept == "keep");
  std::filesystem::remove_all(dir);
}

TEST_CASE("records read back from their JSON line", "[report]") {
  TaskRecord r = task(10, "app", 7, {});
  r.state.sleeping_ms = 150;
  r.wait_syscall = "epoll_wait";
  r.runnable_name = "cb";
  r.boundary = Boundary::Marker;
  OffCpuInfo o;
  o.state = "sleeping";
  o.duration_ms = 12;
  o.has_waker = true;
  o.waker.comm = "w";
  o.waker.pid = 3;
  r.off_cpu.push_back(o);
  TaskRecord back;
  std::string error;
  REQUIRE(task_from_json(to_json_line(r), &back, &error));
  CHECK(back.proc.pid == 10);
  CHECK(back.task_seq == 7);
  CHECK(back.state.sleeping_ms == 150);
  CHECK(back.runnable_name == "cb");
  CHECK(back.begin_mono_ns == r.begin_mono_ns);
  REQUIRE(back.off_cpu.size() == 1);
  CHECK(back.off_cpu[0].waker.comm == "w");
  CHECK_FALSE(task_from_json(R"({"type":"summary"})", &back, &error));
}

namespace {

// A jank that waited 150 ms on a mutex its owner held while it computed,
// and 30 ms queued behind a hog; the owner was followed.
TaskRecord jank_with_causes() {
  TaskRecord r = task(10, "app", 1, {stack_of({"main", "inner"}, 0, 1, 1'050'000'000ULL)});
  r.causes_known = true;
  r.why = "150 ms on mutex 0x1000 (app+0x1000) held by holder[12], which ran crunch_a (lock.c:41) for 140 ms";
  CauseSlice lock{.kind = "lock", .ms = 150, .count = 1, .syscall = "futex", .state = "sleeping",
                  .has_address = true, .address = 0x1000, .address_where = "app+0x1000"};
  CauseThread owner;
  owner.pid = 10;
  owner.tid = 12;
  owner.comm = "holder";
  owner.claim = owner.verified = owner.followed = true;
  owner.function = "crunch_a";
  owner.file = "lock.c:41";
  lock.owner = owner;
  lock.waker = owner;
  CauseSlice queued{.kind = "runnable", .ms = 30, .count = 1};
  queued.cpu_tasks.push_back({99, 99, "hog", 30});
  r.cause = {lock, queued};
  OffCpuInfo o;
  o.state = "sleeping";
  o.off_ns = 1'010'000'000ULL;
  o.woken_ns = 1'160'000'000ULL;
  o.has_waker = true;
  o.waker = {10, 12, "holder", {}, {}};
  r.off_cpu.push_back(o);
  return r;
}

}  // namespace

TEST_CASE("HTML report: a jank's why, its cause slices with identities, the largest kind", "[report][causes]") {
  Run run;
  run.add(jank_with_causes());
  run.add(task(10, "app", 2, {}));  // causes off: no why, no slices
  std::string page = render_html(run, true, 0);
  auto at = page.find("\"tasks\":[");
  REQUIRE(at != std::string::npos);
  CHECK(page.find("\"why\":\"150 ms on mutex 0x1000") != std::string::npos);
  CHECK(page.find("{\"id\":\"mutex 0x1000 (app+0x1000) held by holder[12] running crunch_a (lock.c:41)\","
                  "\"kind\":\"lock\",\"ms\":150.0}") != std::string::npos);
  CHECK(page.find("{\"id\":\"behind hog[99]\",\"kind\":\"runnable\",\"ms\":30.0}") != std::string::npos);
  CHECK(page.find("\"largest\":\"lock\"") != std::string::npos);
  // One task has causes, the other none at all.
  size_t n = 0;
  for (size_t i = page.find("\"largest\":"); i != std::string::npos; i = page.find("\"largest\":", i + 1)) n++;
  CHECK(n == 1);
}

TEST_CASE("perfetto trace: cause slices as args, a flow from the followed owner's track", "[report][causes]") {
  Run run;
  run.add(jank_with_causes());
  auto pb = render_perfetto(run, {});
  for (const char* s : {"why", "largest_cause", "cause", "identity", "behind hog[99]",
                        "cause: lock of app[10] (ran crunch_a)", "lock: waited for holder[12]"})
    CHECK(pb.find(s) != std::string::npos);
  // interned data, process + thread + the waker's track (the owner's: the same thread),
  // jank begin/end, off-CPU begin/end, 2 wakeup flow instants, 2 cause flow instants, 1 sample.
  size_t at = 0, packets = 0;
  while (at < pb.size()) {
    REQUIRE(static_cast<unsigned char>(pb[at]) == 0x0a);
    at++;
    uint64_t len = 0;
    int shift = 0;
    while (static_cast<unsigned char>(pb[at]) & 0x80) len |= uint64_t(pb[at++] & 0x7f) << (shift += 7, shift - 7);
    len |= uint64_t(pb[at++] & 0x7f) << shift;
    at += len;
    packets++;
  }
  CHECK(packets == 1 + 3 + 2 + 2 + 2 + 2 + 1);
}

TEST_CASE("causes read back from a jank's JSON line render as they did live", "[report][causes]") {
  TaskRecord live = jank_with_causes();
  std::string line = to_json_line(live);
  TaskRecord back;
  std::string error;
  REQUIRE(task_from_json(line, &back, &error));
  CHECK(back.causes_known);
  CHECK(back.why == live.why);
  REQUIRE(back.cause.size() == live.cause.size());
  for (size_t i = 0; i < live.cause.size(); i++) {
    CHECK(back.cause[i].kind == live.cause[i].kind);
    CHECK(back.cause[i].ms == Approx(live.cause[i].ms));
    CHECK(cause_identity(back.cause[i]) == cause_identity(live.cause[i]));
  }
  // A kind jankbpf never writes is left out; a record without causes has none.
  auto j = nlohmann::json::parse(line);
  j["cause"][0]["kind"] = "</script>";
  TaskRecord odd;
  REQUIRE(task_from_json(j.dump(), &odd, &error));
  CHECK(odd.cause.size() == live.cause.size() - 1);
  j.erase("cause");
  j.erase("why");
  TaskRecord none;
  REQUIRE(task_from_json(j.dump(), &none, &error));
  CHECK(!none.causes_known);
  CHECK(none.cause.empty());
}
