// Unit tests for Wayland frames (issue 28): the frame tracker's timelines
// and verdicts driven by made-up kernel events, the per-surface statistics,
// the `frame` record's JSON, and the PLT-entry finder on synthetic code and
// on the system's libwayland-client.
#include <elf.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>

#include "frame/frame_causes.h"
#include "frame/frame_stats.h"
#include "frame/frame_tracker.h"
#include "frame/wayland_lib.h"
#include "markers/probe_elf.h"
#include "output/output.h"
#include "report/jsonl_reader.h"
#include "skip.h"

using namespace jankbpf;
using namespace jankbpf::frame;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kI = 16'666'667;  // 60 Hz

// A client thread: its clock, CPU time and tasks, as the kernel would see them.
struct Client {
  FrameTracker tracker;
  ClockOffsets clocks{};
  uint64_t exec = 0, seq = 1, task_begin = 0;
  uint32_t next_feedback = 100;
  explicit Client(TrackerConfig cfg = {}) : tracker(cfg) {}

  jb_frame_event ev(uint32_t kind, uint64_t t, uint32_t surface = 3) {
    jb_frame_event e{};
    e.hdr.type = JB_EV_FRAME;
    e.hdr.pid = 42;
    e.hdr.tid = 42;
    e.hdr.time_ns = t;
    e.kind = kind;
    e.surface = surface;
    e.object = surface;
    e.display = 0x1000;
    e.flags = JB_FRF_IN_TASK;
    e.task_seq = seq;
    e.task_begin_ns = task_begin;
    e.exec_ns = exec;
    e.state_ns[JB_ST_RUNNING] = t - task_begin;  // running since the task began
    return e;
  }
  // A frame: callback at `t` in a fresh task, `work` of CPU, commit; with a
  // feedback request when `feedback`.
  uint32_t frame(uint64_t t, uint64_t work, uint32_t surface = 3, bool feedback = false) {
    seq++;
    task_begin = t;
    tracker.on_event(ev(JB_FR_BEGIN, t, surface), clocks);
    exec += work;
    uint32_t fb = 0;
    if (feedback) {
      fb = next_feedback++;
      auto f = ev(JB_FR_FEEDBACK, t + work, surface);
      f.object = fb;
      tracker.on_event(f, clocks);
    }
    tracker.on_event(ev(JB_FR_COMMIT, t + work, surface), clocks);
    return fb;
  }
  void presented(uint32_t fb, uint64_t when, uint32_t surface = 3, uint32_t refresh = kI) {
    auto e = ev(JB_FR_PRESENTED, when, surface);
    e.object = fb;
    e.args[0] = static_cast<uint32_t>((when / 1'000'000'000) >> 32);
    e.args[1] = static_cast<uint32_t>(when / 1'000'000'000);
    e.args[2] = static_cast<uint32_t>(when % 1'000'000'000);
    e.args[3] = refresh;
    tracker.on_event(e, clocks);
  }
};

}  // namespace

TEST_CASE("a frame is its callback to its commit, held to one refresh", "[frames]") {
  Client c;
  const uint64_t t0 = 10'000 * kMs;
  for (int i = 0; i < 20; i++) c.frame(t0 + i * kI, 2 * kMs);
  c.frame(t0 + 20 * kI, 42 * kMs);  // a planted slow frame
  auto done = c.tracker.take_finished();
  REQUIRE(done.size() == 21);
  for (int i = 0; i < 20; i++) {
    CHECK_FALSE(done[i].janky);
    CHECK(done[i].duration_ms() == Approx(2.0));
  }
  const FrameTiming& slow = done[20];
  CHECK(slow.janky);
  CHECK(slow.jank == FrameJank::AppDeadlineMissed);
  CHECK(slow.skipped_frames == 2);  // 42 ms spans three refreshes: two skipped
  CHECK(slow.deadline_ns == slow.start_ns + kI);
  CHECK(slow.duration_ms() == Approx(42.0));
  CHECK(slow.running_ms == Approx(42.0));
  CHECK(std::string(slow.interval_source) == "default");
}

TEST_CASE("skipped frames follow Choreographer's count", "[frames]") {
  for (auto [ms, skipped] : std::vector<std::pair<uint64_t, uint32_t>>{{16, 0}, {17, 1}, {25, 1}, {34, 2}, {58, 3}, {75, 4}, {110, 6}}) {
    Client c;
    c.frame(1'000 * kMs, ms * kMs);
    auto done = c.tracker.take_finished();
    REQUIRE(done.size() == 1);
    INFO(ms << " ms");
    CHECK(done[0].skipped_frames == skipped);
    CHECK(done[0].janky == (skipped > 0));
  }
}

TEST_CASE("a frame waits for its presentation feedback; a late present is the compositor's", "[frames]") {
  Client c;
  const uint64_t t0 = 5'000 * kMs;
  // Presented 41 ms after each callback, as weston's headless backend does.
  for (int i = 0; i < 12; i++) {
    uint64_t t = t0 + i * 25 * kMs;
    uint32_t fb = c.frame(t, 1 * kMs, 3, true);
    CHECK(c.tracker.take_finished().empty());  // until its present
    c.presented(fb, t + 41 * kMs);
    auto done = c.tracker.take_finished();
    REQUIRE(done.size() == 1);
    CHECK_FALSE(done[0].janky);
    CHECK(done[0].present_ns == t + 41 * kMs);
    if (i > 0) CHECK(std::string(done[0].interval_source) == "presentation");  // learned from the first
  }
  // On time, but shown two refreshes later than usual.
  uint64_t t = t0 + 12 * 25 * kMs;
  uint32_t fb = c.frame(t, 1 * kMs, 3, true);
  c.presented(fb, t + 41 * kMs + 2 * kI);
  auto done = c.tracker.take_finished();
  REQUIRE(done.size() == 1);
  CHECK(done[0].jank == FrameJank::CompositorLate);
  CHECK(done[0].skipped_frames == 2);
  CHECK(done[0].expected_present_ns == t + 41 * kMs);
  // Late by less than a refresh: the compositor's jitter, not jank.
  t += 25 * kMs;
  fb = c.frame(t, 1 * kMs, 3, true);
  c.presented(fb, t + 41 * kMs + 12 * kMs);
  done = c.tracker.take_finished();
  REQUIRE(done.size() == 1);
  CHECK_FALSE(done[0].janky);
}

TEST_CASE("after a janky frame, a late present is buffer stuffing; a discarded frame is dropped", "[frames]") {
  Client c;
  uint64_t t = 5'000 * kMs;
  for (int i = 0; i < 10; i++, t += 25 * kMs) c.presented(c.frame(t, 1 * kMs, 3, true), t + 41 * kMs);
  c.presented(c.frame(t, 40 * kMs, 3, true), t + 90 * kMs);  // janky
  t += 50 * kMs;
  c.presented(c.frame(t, 1 * kMs, 3, true), t + 41 * kMs + kI + kMs);  // behind it
  t += 25 * kMs;
  auto f = c.frame(t, 1 * kMs, 3, true);
  auto d = c.ev(JB_FR_DISCARDED, t + 20 * kMs);
  d.object = f;
  c.tracker.on_event(d, c.clocks);
  auto done = c.tracker.take_finished();
  REQUIRE(done.size() == 13);
  CHECK(done[10].jank == FrameJank::AppDeadlineMissed);
  CHECK(done[11].jank == FrameJank::BufferStuffing);
  CHECK(done[12].jank == FrameJank::Dropped);
  CHECK(done[12].dropped);
}

TEST_CASE("a feedback that never comes finishes the frame without a present", "[frames]") {
  Client c;
  c.frame(1'000 * kMs, 30 * kMs, 3, true);
  c.tracker.tick(1'500 * kMs);
  CHECK(c.tracker.take_finished().empty());
  c.tracker.tick(2'100 * kMs);
  auto done = c.tracker.take_finished();
  REQUIRE(done.size() == 1);
  CHECK(done[0].present_ns == 0);
  CHECK(done[0].jank == FrameJank::AppDeadlineMissed);
}

TEST_CASE("a callback the app went idle after is no frame", "[frames]") {
  Client c;
  const uint64_t t = 1'000 * kMs;
  c.tracker.on_event(c.ev(JB_FR_BEGIN, t), c.clocks);
  // Back to its event loop, asleep two seconds, then a commit in a new task.
  c.seq++;
  c.task_begin = t + 2'000 * kMs;
  c.exec += 1 * kMs;
  c.tracker.on_event(c.ev(JB_FR_COMMIT, t + 2'001 * kMs), c.clocks);
  CHECK(c.tracker.take_finished().empty());
  CHECK(c.tracker.abandoned() == 1);
  // A frame whose work spans two tasks with no idle between is one frame.
  const uint64_t t2 = t + 3'000 * kMs;
  c.tracker.on_event(c.ev(JB_FR_BEGIN, t2), c.clocks);
  c.seq++;
  c.task_begin = t2 + 1 * kMs;
  c.exec += 30 * kMs;
  c.tracker.on_event(c.ev(JB_FR_COMMIT, t2 + 31 * kMs), c.clocks);
  auto done = c.tracker.take_finished();
  REQUIRE(done.size() == 1);
  CHECK(done[0].jank == FrameJank::AppDeadlineMissed);
  CHECK(done[0].running_ms == Approx(30.0));
}

TEST_CASE("a callback that waited for a CPU starts late", "[frames]") {
  Client c;
  const uint64_t t = 1'000 * kMs;
  c.seq++;
  c.task_begin = t;
  auto b = c.ev(JB_FR_BEGIN, t);
  b.delivery_ns = 20 * kMs;  // woken 20 ms before its wait returned
  c.tracker.on_event(b, c.clocks);
  c.exec += 1 * kMs;
  c.tracker.on_event(c.ev(JB_FR_COMMIT, t + 1 * kMs), c.clocks);
  auto done = c.tracker.take_finished();
  REQUIRE(done.size() == 1);
  CHECK(done[0].expected_start_ns == t - 20 * kMs);
  CHECK(done[0].jank == FrameJank::AppDeadlineMissed);
  CHECK(done[0].skipped_frames == 1);
  CHECK(done[0].duration_ms() == Approx(1.0));
}

TEST_CASE("two surfaces are framed apart; the interval comes from flag, feedback, output", "[frames]") {
  TrackerConfig cfg;
  cfg.fixed_interval_ns = 8 * kMs;
  Client c(cfg);
  c.frame(1'000 * kMs, 10 * kMs, 3);
  c.frame(1'100 * kMs, 5 * kMs, 7);
  auto done = c.tracker.take_finished();
  REQUIRE(done.size() == 2);
  CHECK(done[0].surface == 3);
  CHECK(done[0].janky);  // 10 ms against the flag's 8
  CHECK(done[1].surface == 7);
  CHECK_FALSE(done[1].janky);
  CHECK(std::string(done[0].interval_source) == "flag");
  CHECK(c.tracker.surfaces().size() == 2);

  Client o;
  auto mode = o.ev(JB_FR_OUTPUT_MODE, 1);
  mode.args[0] = 1;        // current
  mode.args[3] = 120000;   // mHz
  o.tracker.on_event(mode, o.clocks);
  auto upd = o.tracker.take_interval_updates();
  REQUIRE(upd.size() == 1);
  CHECK(upd[0].second == 8'333'333);
  o.frame(1'000 * kMs, 10 * kMs);
  done = o.tracker.take_finished();
  REQUIRE(done.size() == 1);
  CHECK(std::string(done[0].interval_source) == "output");
  CHECK(done[0].skipped_frames == 1);
}

TEST_CASE("frame statistics: counts, slow and frozen, percentiles, buckets", "[frames]") {
  FrameStats st;
  FrameTiming f;
  auto add = [&](double ms, bool janky) {
    f.start_ns = 1'000'000;
    f.end_ns = f.start_ns + static_cast<uint64_t>(ms * 1e6);
    f.janky = janky;
    f.jank = janky ? FrameJank::AppDeadlineMissed : FrameJank::None;
    st.add(f);
  };
  for (int i = 0; i < 98; i++) add(5.0, false);
  add(40.0, true);
  add(800.0, true);
  SurfaceFrameStats out;
  st.fill(&out);
  CHECK(out.frames == 100);
  CHECK(out.janky == 2);
  CHECK(out.slow == 2);
  CHECK(out.frozen == 1);
  CHECK(out.p50_ms == Approx(5.0));
  CHECK(out.p99_ms == Approx(40.0));
  CHECK(out.max_ms == Approx(800.0));
  REQUIRE(out.buckets.size() == std::size(kFrameBucketsMs) + 1);
  CHECK(out.buckets[1] == 98);  // le 8
  CHECK(out.buckets.back() == 0);
  CHECK(out.by_jank[static_cast<size_t>(FrameJank::AppDeadlineMissed)] == 2);
}

TEST_CASE("the frame record renders its timelines and verdict", "[frames]") {
  FrameRecord r;
  r.proc.pid = 42;
  r.proc.name = "app";
  r.frame.pid = 42;
  r.frame.tid = 42;
  r.frame.surface = 3;
  r.frame.number = 7;
  r.frame.expected_start_ns = 1'000 * kMs;
  r.frame.start_ns = 1'000 * kMs;
  r.frame.deadline_ns = 1'000 * kMs + kI;
  r.frame.end_ns = 1'042 * kMs;
  r.frame.interval_ns = kI;
  r.frame.jank = FrameJank::AppDeadlineMissed;
  r.frame.skipped_frames = 2;
  r.frame.janky = true;
  r.frame.task_seq = 9;
  auto j = nlohmann::json::parse(to_json_line(r));
  CHECK(j["type"] == "frame");
  CHECK(j["surface"] == "wl_surface@3");
  CHECK(j["jank_type"] == "app_deadline_missed");
  CHECK(j["skipped_frames"] == 2);
  CHECK(j["duration_ms"] == Approx(42.0));
  CHECK(j["expected"]["deadline_monotonic_ns"] == 1'000 * kMs + kI);
  CHECK_FALSE(j["expected"].contains("present_monotonic_ns"));
  CHECK(j["task_seq"] == 9);
  CHECK_FALSE(j.contains("why"));
}

TEST_CASE("jankbpf report reads a frame record back", "[frames]") {
  FrameRecord r;
  r.proc.pid = 42;
  r.proc.name = "app";
  r.frame.pid = 42;
  r.frame.tid = 42;
  r.frame.surface = 7;
  r.frame.number = 3;
  r.frame.expected_start_ns = 1'000 * kMs;
  r.frame.start_ns = 1'010 * kMs;
  r.frame.deadline_ns = 1'000 * kMs + kI;
  r.frame.end_ns = 1'060 * kMs;
  r.frame.interval_ns = kI;
  r.frame.jank = FrameJank::AppDeadlineMissed;
  r.frame.skipped_frames = 3;
  r.frame.janky = true;
  r.runnable_name = "slow_paint";
  FrameRecord back;
  REQUIRE(report::frame_from_json(nlohmann::json::parse(to_json_line(r)), &back));
  CHECK(back.frame.surface == 7);
  CHECK(back.frame.start_ns == r.frame.start_ns);
  CHECK(back.frame.deadline_ns == r.frame.deadline_ns);
  CHECK(back.frame.jank == FrameJank::AppDeadlineMissed);
  CHECK(back.frame.skipped_frames == 3);
  CHECK(back.runnable_name == "slow_paint");
  // Nonsense timelines are refused, not drawn.
  auto bad = nlohmann::json::parse(to_json_line(r));
  bad["actual"]["end_monotonic_ns"] = 1;
  CHECK_FALSE(report::frame_from_json(bad, &back));
  CHECK_FALSE(report::frame_from_json(nlohmann::json::parse(R"({"type":"frame","actual":"x"})"), &back));
}

TEST_CASE("the ffi_call PLT entry is found by the GOT slot it jumps through", "[frames]") {
  // x86_64 .plt: the resolver entry, then `jmp *d(%rip); push $n; jmp .plt`.
  std::vector<uint8_t> plt(48, 0x90);
  const uint64_t base = 0x6020, got = 0x110f8;
  auto put = [&](size_t at, uint64_t slot) {
    plt[at] = 0xff;
    plt[at + 1] = 0x25;
    int32_t d = static_cast<int32_t>(slot - (base + at + 6));
    memcpy(&plt[at + 2], &d, 4);
  };
  put(16, 0x11000);
  put(32, got);
  auto at = plt_jump_to(plt.data(), plt.size(), base, got, EM_X86_64);
  REQUIRE(at);
  CHECK(*at == base + 32);
  CHECK_FALSE(plt_jump_to(plt.data(), plt.size(), base, 0x12345, EM_X86_64));
  // aarch64: adrp x16, page; ldr x17, [x16, #off]
  std::vector<uint8_t> a(32, 0);
  const uint64_t abase = 0x10000, agot = 0x30018;
  const uint64_t page_delta = ((agot & ~0xfffull) - (abase & ~0xfffull)) >> 12;
  uint32_t adrp = 0x90000010u | ((page_delta & 3) << 29) | (((page_delta >> 2) & 0x7ffff) << 5);
  uint32_t ldr = 0xf9400211u | (((agot & 0xfff) / 8) << 10);
  memcpy(&a[16], &adrp, 4);
  memcpy(&a[20], &ldr, 4);
  auto aat = plt_jump_to(a.data(), a.size(), abase, agot, EM_AARCH64);
  REQUIRE(aat);
  CHECK(*aat == abase + 16);
}

TEST_CASE("the system's libwayland-client has the three probe sites", "[frames]") {
  std::string why;
  auto path = resolve_binary("libwayland-client.so.0", &why);
  SKIP_UNLESS(path, "no libwayland-client here: " << why);
  // The library is here: its sites must be found (a copy that lost a
  // section once made this skip instead of fail).
  auto sites = wayland_sites(*path, &why);
  INFO(why);
  REQUIRE(sites);
  CHECK(sites->request != 0);
  CHECK(sites->listener != 0);
  CHECK(sites->event != 0);
  CHECK(sites->event != sites->request);
#if defined(__x86_64__)
  // On x86_64 the one call of ffi_call's PLT entry, an instruction uprobes
  // emulate (e8 rel32): Debian's library has exactly one.
  FILE* f = fopen(sites->path.c_str(), "rb");
  REQUIRE(f);
  REQUIRE(fseek(f, static_cast<long>(sites->event), SEEK_SET) == 0);
  int op = fgetc(f);
  fclose(f);
  CHECK(op == 0xe8);
#endif
}

TEST_CASE("a frame that is part of a long task says that task's why; a shorter one says nothing", "[frames][causes]") {
  TaskWhys whys;
  TaskRecord jank;
  jank.tid = 700;
  jank.task_seq = 41;
  jank.causes_known = true;
  jank.why = "297 ms on mutex 0x55c73de1a440 (app+0x5440) held by holder[812], which ran crunch_a (app.c:84) for 217 ms";
  whys.remember(jank);
  TaskRecord off = jank;  // causes off: no line to give
  off.task_seq = 42;
  off.causes_known = false;
  off.why.clear();
  whys.remember(off);

  FrameRecord in_task;
  in_task.frame.tid = 700;
  in_task.frame.task_seq = 41;
  in_task.frame.expected_start_ns = in_task.frame.start_ns = 1'000 * kMs;
  in_task.frame.end_ns = 1'300 * kMs;
  attach_causes(in_task, whys);
  REQUIRE(in_task.why.size() == 1);
  CHECK(in_task.why[0] == jank.why);
  // The frame's JSON carries it beside task_seq.
  auto j = nlohmann::json::parse(to_json_line(in_task));
  CHECK(j["task_seq"] == 41);
  CHECK(j["why"][0] == jank.why);
  FrameRecord back;  // and `jankbpf report` reads it back
  REQUIRE(report::frame_from_json(j, &back));
  CHECK(back.why == in_task.why);

  FrameRecord short_frame = in_task;  // below the threshold: no task_seq, no causes collected
  short_frame.why.clear();
  short_frame.frame.task_seq = 0;
  attach_causes(short_frame, whys);
  CHECK(short_frame.why.empty());
  CHECK(!nlohmann::json::parse(to_json_line(short_frame)).contains("why"));

  FrameRecord other_thread = short_frame;
  other_thread.frame.tid = 701;
  other_thread.frame.task_seq = 41;
  attach_causes(other_thread, whys);
  CHECK(other_thread.why.empty());
  FrameRecord causes_off = short_frame;
  causes_off.frame.task_seq = 42;
  attach_causes(causes_off, whys);
  CHECK(causes_off.why.empty());

  // A hang's line so far is replaced by its jank's; the table stays bounded.
  jank.why = "the jank's final line";
  whys.remember(jank);
  attach_causes(in_task, whys);
  CHECK(in_task.why == std::vector<std::string>{"the jank's final line"});
  for (uint64_t s = 100; s < 100 + 2 * TaskWhys::kMaxTasks; s++) {
    jank.task_seq = s;
    whys.remember(jank);
  }
  CHECK(whys.size() == TaskWhys::kMaxTasks);
  CHECK(whys.find(700, 41) == nullptr);
  CHECK(whys.find(700, 99 + 2 * TaskWhys::kMaxTasks) != nullptr);
}
