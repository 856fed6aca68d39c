// Unit tests for Python frames (issue 13): the version table, the location
// table decoder against CPython's own tables, the frame walker on process
// memory laid out by each version's offsets (served by a fake reader), and
// how frames are interleaved, rendered, fingerprinted and name a task.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "markers/naming.h"
#include "runtime/interleave.h"
#include "runtime/python_frames.h"
#include "runtime/python_layout.h"
#include "runtime/runtime_find.h"
#include "runtime/runtime_procs.h"
#include "stack/tree.h"
#include "fake_memory.h"
#include "ready_child.h"
#include "skip.h"

using namespace jankbpf;
using namespace jankbpf::runtime;
using jankbpf::test::FakeMemory;
using jankbpf::test::unhex;

namespace {

constexpr uint64_t kCodeType = 0x9000, kUnicodeType = 0x9100, kBytesType = 0x9200;

// Lays out a CPython process by a layout's offsets: runtime, one
// interpreter, thread states, frames, code objects, strings.
struct FakePython {
  const PythonLayout& l;
  FakeMemory mem;
  uint64_t next = 0x100000;
  PythonTarget target;

  explicit FakePython(const PythonLayout& layout) : l(layout) {
    target.layout = &l;
    target.runtime = alloc(128);
    target.code_type = kCodeType;
    target.unicode_type = kUnicodeType;
    target.bytes_type = kBytesType;
  }
  uint64_t alloc(size_t n) {
    uint64_t a = next;
    mem.region(a, n);
    next += (n + 0xfff) & ~uint64_t{0xfff};
    return a;
  }
  uint64_t str(const std::string& ascii) {
    uint64_t a = alloc(l.ascii_size + ascii.size() + 1);
    mem.put<uint64_t>(a + kObType, kUnicodeType);
    mem.put<int64_t>(a + l.unicode_length, static_cast<int64_t>(ascii.size()));
    mem.put<uint32_t>(a + l.unicode_state, (1u << 2) | (1u << 5) | (1u << 6));
    auto& r = mem.regions[a];
    std::memcpy(r.data() + l.ascii_size, ascii.data(), ascii.size());
    return a;
  }
  uint64_t bytes(const std::vector<uint8_t>& b) {
    uint64_t a = alloc(l.bytes_data + b.size() + 1);
    mem.put<uint64_t>(a + kObType, kBytesType);
    mem.put<int64_t>(a + l.bytes_size, static_cast<int64_t>(b.size()));
    if (!b.empty()) std::memcpy(mem.regions[a].data() + l.bytes_data, b.data(), b.size());
    return a;
  }
  // A code object whose every code unit is on `line`.
  uint64_t code(const std::string& name, const std::string& file, int32_t line) {
    uint64_t a = alloc(l.code_adaptive + 64);
    mem.put<uint64_t>(a + kObType, kCodeType);
    mem.put<uint64_t>(a + l.code_name, str(name));
    mem.put<uint64_t>(a + l.code_qualname, str(name));
    mem.put<uint64_t>(a + l.code_filename, str(file));
    mem.put<int32_t>(a + l.code_firstlineno, line);
    // One entry: "no columns", 8 units, line delta 0.
    mem.put<uint64_t>(a + l.code_linetable, bytes({uint8_t(0x80 | (13 << 3) | 7), 0}));
    return a;
  }
  uint64_t frame(uint64_t code, uint64_t previous, bool entry, uint8_t owner = 0) {
    uint64_t a = alloc(l.frame_size);
    mem.put<uint64_t>(a + l.frame_code, code);
    mem.put<uint64_t>(a + l.frame_previous, previous);
    mem.put<uint64_t>(a + l.frame_prev_instr, code + l.code_adaptive + 4);
    mem.put<uint8_t>(a + l.frame_owner, owner);
    if (l.frame_is_entry != kNoField) mem.put<uint8_t>(a + l.frame_is_entry, entry ? 1 : 0);
    return a;
  }
  // The first Python frame an eval call runs: entry-marked in 3.11, above
  // a shim frame in 3.12.
  uint64_t entry_frame(uint64_t code, uint64_t previous) {
    if (l.entry == EntryRule::ShimFrame) {
      uint64_t shim = frame(0, previous, false, l.owner_cstack);
      return frame(code, shim, false);
    }
    return frame(code, previous, true);
  }
  // Thread states for `tids` (the first is the list head); each runs `top`.
  void threads(const std::vector<std::pair<uint64_t, uint64_t>>& tid_top) {
    uint64_t interp = alloc(256);
    mem.put<uint64_t>(target.runtime + l.runtime_interp_head, interp);
    uint64_t prev = 0;
    for (auto [tid, top] : tid_top) {
      uint64_t ts = alloc(l.tstate_size);
      mem.put<uint64_t>(ts + l.tstate_native_thread_id, tid);
      if (l.tstate_cframe != kNoField) {
        uint64_t cf = alloc(32);
        mem.put<uint64_t>(ts + l.tstate_cframe, cf);
        mem.put<uint64_t>(cf + l.cframe_current_frame, top);
      } else {
        mem.put<uint64_t>(ts + l.cframe_current_frame, top);
      }
      if (prev) mem.put<uint64_t>(prev + l.tstate_next, ts);
      else mem.put<uint64_t>(interp + l.interp_threads_head, ts);
      prev = ts;
    }
  }
};


constexpr uint64_t kNow = ~uint64_t{0};  // a task that has not ended

stack::Frame native(const std::string& sym) {
  stack::Frame f;
  f.module = "/usr/bin/python3.11";
  f.symbol = sym;
  f.pc = 0x1000 + sym.size();
  f.module_offset = f.pc;
  return f;
}

std::vector<std::string> names(const stack::ResolvedStack& s) {
  std::vector<std::string> out;
  for (const auto& f : s.frames) out.push_back((f.is_runtime() ? "py:" : "") + f.symbol);
  return out;
}

}  // namespace

TEST_CASE("python layouts are found by Py_Version, not by path") {
  const PythonLayout* l311 = python_layout(0x030B07F0);  // 3.11.7 final
  REQUIRE(l311);
  CHECK(std::string(l311->version) == "3.11");
  CHECK(l311->entry == EntryRule::IsEntryFlag);
  const PythonLayout* l312 = python_layout(0x030C01F0);
  REQUIRE(l312);
  CHECK(l312->entry == EntryRule::ShimFrame);
  CHECK(python_layout(0x030B00A1) == l311);  // an alpha of 3.11: same minor
  CHECK(python_layout(0x030A0DF0) == nullptr);  // 3.10 has no Py_Version; never matched
  CHECK(python_layout(0x030D00F0) == nullptr);  // 3.13: not in the table yet
  CHECK(python_layout(0x020712F0) == nullptr);
  CHECK(python_version_text(0x030B02F0) == "3.11.2");
  CHECK(python_supported_versions() == "3.11, 3.12");
}

TEST_CASE("python location tables decode as CPython's co_positions says") {
  for (const char* v : {"3.11", "3.12"}) {
    std::ifstream in(std::string("tests/fixtures/python/linetable-") + v + ".json");
    REQUIRE(in);
    auto j = nlohmann::json::parse(in);
    for (const auto& fn : j["functions"]) {
      INFO(v << " " << fn["name"].get<std::string>());
      auto table = unhex(fn["linetable"].get<std::string>());
      int first = fn["firstlineno"].get<int>();
      const auto& lines = fn["unit_lines"];
      REQUIRE(lines.size() > 4);
      for (size_t u = 0; u < lines.size(); ++u) {
        INFO("unit " << u);
        CHECK(python_line(table, first, static_cast<int64_t>(u)) == lines[u].get<uint32_t>());
      }
      CHECK(python_line(table, first, static_cast<int64_t>(lines.size()) + 100) == 0);
      CHECK(python_line(table, first, -1) == lines[0].get<uint32_t>());  // before the first unit
    }
  }
}

TEST_CASE("python location tables: damaged input yields no line") {
  CHECK(python_line({}, 5, 0) == 0);
  std::vector<uint8_t> cont{0x01, 0x02};  // a continuation byte first
  CHECK(python_line(cont, 5, 0) == 0);
  std::vector<uint8_t> cut{uint8_t(0x80 | (14 << 3)), 0x40};  // long form, varint never ends
  CHECK(python_line(cut, 5, 0) == 0);
  std::vector<uint8_t> neg{uint8_t(0x80 | (13 << 3)), 0x15};  // delta -10 from line 5
  CHECK(python_line(neg, 5, 0) == 0);
  // Fuzz finding: deltas near INT64_MIN twice overflowed the line (UB).
  std::vector<uint8_t> huge;
  for (int k = 0; k < 2; ++k) {
    huge.push_back(uint8_t(0x80 | (13 << 3)));
    for (int b = 0; b < 10; ++b) huge.push_back(0x7f);
    huge.push_back(0x0f);
  }
  CHECK(python_line(huge, 5, 1) == 0);
}

TEST_CASE("python frames are walked by each layout in the table") {
  for (uint64_t version : {0x030B07F0ull, 0x030C01F0ull}) {
    const PythonLayout& l = *python_layout(version);
    INFO(l.version);
    FakePython py(l);
    uint64_t c_main = py.code("<module>", "/app/main.py", 1);
    uint64_t c_run = py.code("Handle._run", "/usr/lib/python3.11/asyncio/events.py", 80);
    uint64_t c_slow = py.code("slow_busy", "/app/main.py", 12);
    uint64_t c_helper = py.code("helper", "/app/util.py", 40);
    // Outer eval call: <module>; inner eval call (a C call between them):
    // Handle._run -> slow_busy -> helper (Python-to-Python calls in one C call).
    uint64_t f_main = py.entry_frame(c_main, 0);
    uint64_t f_run = py.entry_frame(c_run, f_main);
    uint64_t f_slow = py.frame(c_slow, f_run, false);
    uint64_t f_helper = py.frame(c_helper, f_slow, false);
    uint64_t other = py.entry_frame(py.code("worker", "/app/w.py", 3), 0);
    py.threads({{500, other}, {501, f_helper}});

    PythonWalker w(py.target);
    PyCapture c = w.walk(py.mem, 501);
    REQUIRE(c.status == PyCapture::Status::Ok);
    REQUIRE(c.frames.size() == 4);
    CHECK(c.frames[0].name == "helper");
    CHECK(c.frames[0].file == "/app/util.py");
    CHECK(c.frames[0].line == 40);
    CHECK_FALSE(c.frames[0].entry);
    CHECK(c.frames[1].name == "slow_busy");
    CHECK(c.frames[1].line == 12);
    CHECK(c.frames[2].name == "Handle._run");
    CHECK(c.frames[2].entry);
    CHECK(c.frames[3].name == "<module>");
    CHECK(c.frames[3].entry);
    CHECK_FALSE(c.truncated);

    // Warm: the thread state and code objects come from the caches (one
    // read per frame and per code object header, none for names).
    uint64_t before = py.mem.reads;
    PyCapture again = w.walk(py.mem, 501);
    CHECK(again.frames.size() == 4);
    CHECK(w.cached_code_objects() == 4);
    CHECK(py.mem.reads - before <= 2 + 2 * (l.entry == EntryRule::ShimFrame ? 6 : 4));

    CHECK(w.walk(py.mem, 500).frames.at(0).name == "worker");
    CHECK(w.walk(py.mem, 999).status == PyCapture::Status::NoThread);

    // A code object freed and another made at its address: names re-read.
    py.mem.put<uint64_t>(c_slow + l.code_qualname, py.str("replaced"));
    CHECK(w.walk(py.mem, 501).frames.at(1).name == "replaced");

    // An object that is not a code object: that frame is unreadable, the
    // chain goes on.
    py.mem.put<uint64_t>(c_slow + kObType, 0x1234);
    PyCapture bad = w.walk(py.mem, 501);
    REQUIRE(bad.frames.size() == 4);
    CHECK(bad.frames[1].unreadable);
    CHECK(bad.frames[1].name.empty());
    CHECK(bad.frames[2].name == "Handle._run");

    // A frame pointer into nothing: one unreadable frame, then the walk stops.
    py.mem.put<uint64_t>(f_helper + l.frame_previous, 0xdead0000);
    PyCapture cut = w.walk(py.mem, 501);
    REQUIRE(cut.frames.size() == 2);
    CHECK(cut.frames[1].unreadable);

    // A cycle: bounded.
    py.mem.put<uint64_t>(f_helper + l.frame_previous, f_helper);
    PyCapture loop = w.walk(py.mem, 501);
    CHECK(loop.frames.size() == kMaxPyFrames);
    CHECK(loop.truncated);

    // The runtime itself unreadable.
    PythonTarget gone = py.target;
    gone.runtime = 0x10;
    PythonWalker w2(gone);
    CHECK(w2.walk(py.mem, 501).status == PyCapture::Status::Unreadable);
  }
}

// Issue 26: 8,100 code objects sharing one 64 KiB line table were each
// read and cached with their own copy (512 MiB for one process). The
// table is read once; what the cache holds stays under kMaxPyCacheBytes;
// a walk reads at most kMaxPyLineBytesPerWalk of tables.
TEST_CASE("python code objects sharing a big line table cost it once", "[budget]") {
  const PythonLayout& l = *python_layout(0x030B07F0);
  FakePython py(l);
  // 64 KiB of "no columns, 8 units, line +0" entries.
  std::vector<uint8_t> big;
  while (big.size() < kMaxPyLineTable) big.insert(big.end(), {uint8_t(0x80 | (13 << 3) | 7), 0});
  const uint64_t shared = py.bytes(big);
  std::vector<uint64_t> codes;
  for (int i = 0; i < 2000; ++i) {
    uint64_t c = py.code("f" + std::to_string(i), "/app/x.py", 10 + i);
    py.mem.put<uint64_t>(c + l.code_linetable, shared);
    codes.push_back(c);
  }
  PythonWalker w(py.target);
  // Walks of 100 frames over ever new code objects, as samples of a
  // process calling through all of them.
  size_t most = 0;
  for (int round = 0; round < 20; ++round) {
    uint64_t top = 0;
    for (int k = 0; k < 100; ++k) top = py.frame(codes[(round * 100 + k) % codes.size()], top, k == 0);
    const uint64_t tid = 700 + round;  // each round's thread state is new
    py.threads({{tid, top}});
    PyCapture c = w.walk(py.mem, tid);
    REQUIRE(c.frames.size() == 100);
    CHECK(c.frames[0].line == static_cast<uint32_t>(10 + (round * 100 + 99) % 2000));
    most = std::max(most, w.held_bytes());
  }
  INFO("cache held at most " << most << " bytes, " << w.cached_code_objects() << " code objects");
  CHECK(most <= kMaxPyCacheBytes);
  CHECK(most < 2 * kMaxPyLineTable + 2000 * 256);  // the table once, not 2,000 times
  // Distinct tables: a walk reads at most kMaxPyLineBytesPerWalk of them;
  // the frames past it keep their names, and say a budget cut their lines.
  uint64_t top = 0;
  for (int k = 0; k < 100; ++k) {
    uint64_t c = py.code("g" + std::to_string(k), "/app/y.py", 1);
    py.mem.put<uint64_t>(c + l.code_linetable, py.bytes(big));
    top = py.frame(c, top, k == 0);
  }
  py.threads({{800, top}});
  PyCapture c = w.walk(py.mem, 800);
  REQUIRE(c.frames.size() == 100);
  CHECK(c.budget_cut);
  CHECK(c.frames.back().name == "g0");
  CHECK(w.held_bytes() <= kMaxPyCacheBytes);
}

TEST_CASE("python strings: compact non-ASCII kinds, bounds, refusals") {
  const PythonLayout& l = *python_layout(0x030B07F0);
  FakePython py(l);
  auto compact = [&](uint32_t kind, const std::vector<uint32_t>& chars) {
    uint64_t a = py.alloc(l.compact_size + chars.size() * kind + 4);
    py.mem.put<uint64_t>(a + kObType, kUnicodeType);
    py.mem.put<int64_t>(a + l.unicode_length, static_cast<int64_t>(chars.size()));
    py.mem.put<uint32_t>(a + l.unicode_state, (kind << 2) | (1u << 5));
    for (size_t i = 0; i < chars.size(); ++i)
      std::memcpy(py.mem.regions[a].data() + l.compact_size + i * kind, &chars[i], kind);
    return a;
  };
  uint64_t c = py.code("x", "/f.py", 1);
  PythonWalker w(py.target);
  uint64_t f = py.frame(c, 0, true);
  py.threads({{7, f}});
  py.mem.put<uint64_t>(c + l.code_qualname, compact(1, {'c', 0xe9}));  // latin-1 "cé"
  CHECK(w.walk(py.mem, 7).frames.at(0).name == "c\xc3\xa9");
  c = py.code("x", "/f.py", 1);
  py.mem.put<uint64_t>(f + l.frame_code, c);
  py.mem.put<uint64_t>(c + l.code_qualname, compact(2, {0x4e2d}));  // UCS-2
  CHECK(w.walk(py.mem, 7).frames.at(0).name == "\xe4\xb8\xad");
  c = py.code("x", "/f.py", 1);
  py.mem.put<uint64_t>(f + l.frame_code, c);
  py.mem.put<uint64_t>(c + l.code_qualname, compact(4, {0x1f600}));  // UCS-4
  CHECK(w.walk(py.mem, 7).frames.at(0).name == "\xf0\x9f\x98\x80");
  // Out of range code point: refused, co_name is used instead.
  c = py.code("fallback", "/f.py", 1);
  py.mem.put<uint64_t>(f + l.frame_code, c);
  py.mem.put<uint64_t>(c + l.code_qualname, compact(4, {0x110000}));
  CHECK(w.walk(py.mem, 7).frames.at(0).name == "fallback");
  // A huge length is cut at the bound.
  c = py.code(std::string(kMaxPyStringBytes + 50, 'a'), "/f.py", 1);
  py.mem.put<uint64_t>(f + l.frame_code, c);
  std::string longname = w.walk(py.mem, 7).frames.at(0).name;
  CHECK(longname == std::string(kMaxPyStringBytes, 'a') + "...");
  // A legacy (non-compact) string for the file: the frame is unreadable.
  c = py.code("y", "/f.py", 1);
  py.mem.put<uint64_t>(f + l.frame_code, c);
  uint64_t legacy = py.str("/f.py");
  py.mem.put<uint32_t>(legacy + l.unicode_state, 1u << 2);
  py.mem.put<uint64_t>(c + l.code_filename, legacy);
  CHECK(w.walk(py.mem, 7).frames.at(0).unreadable);
}

TEST_CASE("python frames go where the native stack runs them") {
  stack::ResolvedStack s;
  s.pid = 1;
  s.frames = {native("time_perf_counter"), native("_PyEval_EvalFrameDefault"), native("_PyObject_Call"),
              native("context_run"), native("_PyEval_EvalFrameDefault"), native("Py_RunMain"), native("main")};
  PyCapture c;
  c.status = PyCapture::Status::Ok;
  c.frames = {{.name = "slow_busy", .file = "/a.py", .line = 12},
              {.name = "Handle._run", .file = "/e.py", .line = 80, .entry = true},
              {.name = "_run_once", .file = "/b.py", .line = 1900},
              {.name = "<module>", .file = "/a.py", .line = 30, .entry = true}};
  RuntimeFrameStats st;
  stack::ResolvedStack a = s;
  interleave_python(a, c, true, kNow, st);
  CHECK(names(a) == std::vector<std::string>{"time_perf_counter", "py:slow_busy", "py:Handle._run",
                                             "_PyEval_EvalFrameDefault", "_PyObject_Call", "context_run",
                                             "py:_run_once", "py:<module>", "_PyEval_EvalFrameDefault",
                                             "Py_RunMain", "main"});
  CHECK(st.read == 4);
  CHECK(a.frames[1].file == "/a.py");
  CHECK(a.frames[1].line == 12);
  CHECK(a.frames[1].runtime == "python");
  CHECK_FALSE(a.frames[1].has_module());

  // A native stack cut short: frames left over go at the root end.
  stack::ResolvedStack b = s;
  b.frames.resize(3);
  b.truncated = true;
  interleave_python(b, c, true, kNow, st);
  CHECK(names(b) == std::vector<std::string>{"time_perf_counter", "py:slow_busy", "py:Handle._run",
                                             "_PyEval_EvalFrameDefault", "_PyObject_Call", "py:_run_once",
                                             "py:<module>"});

  // A Python process whose frames could not be read: said at each eval frame.
  stack::ResolvedStack u = s;
  RuntimeFrameStats st2;
  interleave_python(u, PyCapture{.status = PyCapture::Status::Unreadable}, true, kNow, st2);
  CHECK(names(u)[1] == "py:[python: unreadable]");
  CHECK(names(u)[5] == "py:[python: unreadable]");
  CHECK(u.frames.size() == s.frames.size() + 2);
  CHECK(st2.unreadable == 2);
  CHECK(st2.read == 0);

  // An eval frame with calls inlined into it (libdwfl lists them first):
  // Python frames go leafward of the whole group.
  stack::ResolvedStack g;
  stack::Frame inl = native("do_call_core");
  inl.flags |= stack::kFrameInlined;
  g.frames = {native("PyObject_Vectorcall"), inl, native("_PyEval_EvalFrameDefault"), native("main")};
  RuntimeFrameStats st4;
  interleave_python(g, PyCapture{.status = PyCapture::Status::Ok, .frames = {{.name = "f", .entry = true}}}, true,
                    kNow, st4);
  CHECK(names(g) == std::vector<std::string>{"PyObject_Vectorcall", "py:f", "do_call_core",
                                             "_PyEval_EvalFrameDefault", "main"});

  // Frames read after the thread moved on: the loop back in its selector
  // (one eval call) while the native stack ran a callback (two). Refused.
  PyCapture moved{.status = PyCapture::Status::Ok,
                  .frames = {{.name = "select", .file = "/s.py", .line = 468},
                             {.name = "_run_once", .file = "/b.py", .line = 1884},
                             {.name = "<module>", .file = "/a.py", .line = 30, .entry = true}}};
  stack::ResolvedStack m = s;
  RuntimeFrameStats st5;
  interleave_python(m, moved, true, kNow, st5);
  CHECK(names(m)[1] == "py:[python: unreadable]");
  CHECK(names(m)[5] == "py:[python: unreadable]");
  auto mn = names(m);
  CHECK(std::count(mn.begin(), mn.end(), "py:select") == 0);
  CHECK(st5.read == 0);
  CHECK(st5.unreadable == 2);
  // ... and a sample that arrived too late is not read at all.
  stack::ResolvedStack late = s;
  RuntimeFrameStats st6;
  interleave_python(late, PyCapture{.status = PyCapture::Status::Late}, true, kNow, st6);
  CHECK(names(late)[1] == "py:[python: unreadable]");
  CHECK(st6.unreadable == 2);

  // Read after the task ended: refused, however well it fits.
  PyCapture after = c;
  after.read_ns = 2000;
  stack::ResolvedStack ended = s;
  RuntimeFrameStats st7;
  interleave_python(ended, after, true, 1000, st7);
  CHECK(names(ended)[1] == "py:[python: unreadable]");
  CHECK(st7.read == 0);
  stack::ResolvedStack in_time = s;
  interleave_python(in_time, after, true, 2000, st7);
  CHECK(names(in_time)[1] == "py:slow_busy");

  // Not Python: untouched.
  stack::ResolvedStack n = s;
  RuntimeFrameStats st3;
  interleave_python(n, PyCapture{}, false, kNow, st3);
  CHECK(names(n) == names(s));
  CHECK(st3.read + st3.unreadable == 0);
}

TEST_CASE("python frames in the stack tree, heaviest stack and fingerprint") {
  stack::ResolvedStack s;
  s.frames = {native("_PyEval_EvalFrameDefault"), native("main")};
  PyCapture c{.status = PyCapture::Status::Ok,
              .frames = {{.name = "slow_busy", .file = "/a.py", .line = 12, .entry = true}}};
  RuntimeFrameStats st;
  interleave_python(s, c, true, kNow, st);
  stack::StackTree tree;
  tree.add(s);
  stack::ResolvedStack s2 = s;
  s2.frames[0].line = 13;  // the same function at another line
  tree.add(s2);
  CHECK(tree.render().find("#02 at slow_busy (/a.py:12)") != std::string::npos);
  CHECK(tree.render().find("#02 at slow_busy (/a.py:13)") != std::string::npos);
  CHECK(tree.heaviest_stack().rfind("#00 at slow_busy (/a.py:", 0) == 0);
  CHECK(tree.fingerprint().find("python!slow_busy (/a.py)") != std::string::npos);

  stack::ResolvedStack other = s;
  other.frames[0].symbol = "other";
  stack::StackTree t2;
  t2.add(other);
  t2.add(other);
  CHECK(t2.fingerprint() != tree.fingerprint());
}

TEST_CASE("a task without markers is named by its innermost readable Python frame") {
  TaskRecord r;
  StackFrame k;
  k.symbol = "perf_counter";
  StackFrame p1;
  p1.symbol = "slow_busy";
  p1.runtime = "python";
  StackFrame p2;
  p2.symbol = "Handle._run";
  p2.runtime = "python";
  r.stack = {k, p1, p2};
  name_runnable_from_runtime(r);
  CHECK(r.runnable_name == "slow_busy");

  TaskRecord u = r;
  u.runnable_name.clear();
  u.stack[1].symbol = kPythonUnreadable;
  name_runnable_from_runtime(u);
  CHECK(u.runnable_name.empty());  // never guessed from an outer frame

  TaskRecord m = r;
  m.runnable_name.clear();
  m.marker = MarkerInfo{};
  name_runnable_from_runtime(m);
  CHECK(m.runnable_name.empty());  // marker tasks are named by their marker
}

// --- live: real interpreters -------------------------------------------------

namespace {

// A Python child running `code`; it prints a line when it is ready.
struct PyChild : test::ReadyChild {
  PyChild(const std::string& python, const std::string& code) : ReadyChild({python, "-c", code}) {}
};

// outer -> inner -> spin_here (line 5), each a plain Python call.
const char* kSpinCode =
    "import sys\n"
    "def spin_here():\n"
    "    sys.stdout.write('r'); sys.stdout.flush()\n"
    "    while True:\n"
    "        pass\n"
    "def inner(): spin_here()\n"
    "def outer(): inner()\n"
    "outer()\n";

std::vector<std::string> live_pythons() {
  std::vector<std::string> out;
  for (const char* p : {"/usr/bin/python3.11", "/root/.pyenv/versions/3.11.7/bin/python3",
                        "/root/.pyenv/versions/3.12.1/bin/python3"})
    if (access(p, X_OK) == 0) out.push_back(p);
  return out;
}

}  // namespace

TEST_CASE("python frames of a live interpreter, found by its symbols") {
  auto pythons = live_pythons();
  SKIP_UNLESS(!pythons.empty(), "no CPython 3.11/3.12 installed: live walk not run");
  for (const auto& python : pythons) {
    INFO(python);
    PyChild child(python, kSpinCode);
    RuntimeFinder finder;
    std::string why;
    auto target = finder.find(child.pid, &why).python;
    INFO(why);
    REQUIRE(target);
    CHECK(target->code_type != 0);
    CHECK(target->unicode_type != 0);
    ProcessMemory mem(child.pid);
    PythonWalker w(*target);
    PyCapture c;
    // The child is between its write and the loop: let it reach line 5.
    for (int i = 0; i < 100; ++i) {
      c = w.walk(mem, static_cast<uint64_t>(child.pid));
      if (c.status == PyCapture::Status::Ok && !c.frames.empty() && c.frames[0].line == 5) break;
      usleep(10000);
    }
    REQUIRE(c.status == PyCapture::Status::Ok);
    REQUIRE(c.frames.size() == 4);
    CHECK(c.frames[0].name == "spin_here");
    CHECK(c.frames[0].file == "<string>");
    CHECK(c.frames[0].line == 5);
    CHECK(c.frames[1].name == "inner");
    CHECK(c.frames[1].line == 6);
    CHECK(c.frames[2].name == "outer");
    CHECK(c.frames[3].name == "<module>");
    CHECK(c.frames[3].line == 8);
    CHECK(c.frames[3].entry);
    for (const auto& f : c.frames) CHECK_FALSE(f.unreadable);
  }
}

TEST_CASE("a process that execs into Python is looked at again when check_exec says so") {
  auto pythons = live_pythons();
  SKIP_UNLESS(!pythons.empty(), "no CPython 3.11/3.12 installed: live exec check not run");
  // A shell that waits for a line, then becomes Python (`exec python3`).
  int in[2], out[2];
  REQUIRE(pipe(in) == 0);
  REQUIRE(pipe(out) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    const std::string script = "printf s; read x; exec " + pythons[0] + " -c \"" + std::string(kSpinCode) + "\"";
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  char c;
  REQUIRE(::read(out[0], &c, 1) == 1);  // the shell runs
  RuntimeProcesses procs;
  CHECK_FALSE(procs.look(pid));
  CHECK(procs.capture(pid, pid, 0).status == PyCapture::Status::None);
  REQUIRE(::write(in[1], "\n", 1) == 1);
  REQUIRE(::read(out[0], &c, 1) == 1);  // Python's 'r': exec'd and running
  // Samples alone do not look again (no stat per sample) ...
  CHECK(procs.capture(pid, pid, 0).status == PyCapture::Status::None);
  // ... the next long task's check does.
  procs.check_exec(pid);
  CHECK(procs.look(pid));
  PyCapture cap;
  for (int i = 0; i < 100 && cap.status != PyCapture::Status::Ok; ++i) {
    cap = procs.capture(pid, pid, 0);
    if (cap.status != PyCapture::Status::Ok) usleep(10000);
  }
  CHECK(cap.status == PyCapture::Status::Ok);
  CHECK_FALSE(cap.frames.empty());
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  close(in[1]);
  close(out[0]);
}

TEST_CASE("a native process is not taken for Python") {
  RuntimeFinder finder;
  std::string why = "x";
  CHECK_FALSE(finder.find(getpid(), &why));
  CHECK(why.empty());
  CHECK_FALSE(finder.find(999999999, &why));  // no such process
}

// Not run by default: `build/jankbpf-unit "[python-bench]"` prints the cost
// of reading one sample's Python frames (what the ring thread pays).
TEST_CASE("bench: python frame read per capture", "[.][python-bench]") {
  auto pythons = live_pythons();
  SKIP_UNLESS(!pythons.empty(), "no CPython 3.11/3.12 installed");
  // 30 Python frames deep, spinning.
  const char* code =
      "import sys\n"
      "def deep(n):\n"
      "    if n: return deep(n - 1)\n"
      "    sys.stdout.write('r'); sys.stdout.flush()\n"
      "    while True: pass\n"
      "deep(28)\n";
  PyChild child(pythons[0], code);
  RuntimeFinder finder;
  auto t0 = std::chrono::steady_clock::now();
  auto target = finder.find(child.pid, nullptr).python;
  double find_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(target);
  ProcessMemory mem(child.pid);
  PythonWalker w(*target);
  t0 = std::chrono::steady_clock::now();
  PyCapture first = w.walk(mem, static_cast<uint64_t>(child.pid));
  double cold_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(first.frames.size() == 30);
  std::vector<double> us;
  uint64_t reads0 = mem.reads();
  constexpr int kRuns = 5000;
  for (int i = 0; i < kRuns; ++i) {
    auto a = std::chrono::steady_clock::now();
    PyCapture c = w.walk(mem, static_cast<uint64_t>(child.pid));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
    REQUIRE(c.frames.size() == 30);
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) { return us[static_cast<size_t>(p * (us.size() - 1))]; };
  std::printf("[python-bench] %s, %zu frames: runtime found in %.2f ms; cold first read %.1f us; "
              "warm p50 %.1f us, p99 %.1f us, max %.1f us; %.1f reads per capture\n",
              pythons[0].c_str(), first.frames.size(), find_ms, cold_us, pct(0.5), pct(0.99), us.back(),
              static_cast<double>(mem.reads() - reads0) / kRuns);
  CHECK(pct(0.5) < 1000.0);
}

TEST_CASE("process memory: batched reads fail one range, not the rest") {
  static const char a[] = "first", c[] = "third";
  char oa[6] = {}, ob[8] = {}, oc[6] = {};
  ProcessMemory mem(getpid());
  std::vector<MemReader::Op> ops{{reinterpret_cast<uint64_t>(a), oa, sizeof oa},
                                 {0x10, ob, sizeof ob},  // never mapped
                                 {reinterpret_cast<uint64_t>(c), oc, sizeof oc}};
  mem.read_batch(ops);
  CHECK(ops[0].ok);
  CHECK_FALSE(ops[1].ok);
  CHECK(ops[2].ok);
  CHECK(std::string(oa) == "first");
  CHECK(std::string(oc) == "third");
  CHECK(mem.reads() == 2);  // the batch, then what followed the hole
  uint64_t v = 0;
  CHECK_FALSE(mem.read(0x10, &v, sizeof v));
  CHECK_FALSE(mem.read(~uint64_t{0} - 2, &v, sizeof v));  // wraps: refused
}
