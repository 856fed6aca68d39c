// Unit tests for JavaScript frames (issue 13): the layout from V8's
// v8dbg_* constants (a real node binary's, and bad sets), the walker on a V8
// heap and stack laid out by those offsets (served by a fake reader), how
// frames are placed in a native stack, and how they name a task.
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "markers/naming.h"
#include "runtime/interleave.h"
#include "runtime/mem_reader.h"
#include "runtime/runtime_find.h"
#include "runtime/v8_frames.h"
#include "runtime/v8_layout.h"
#include "stack/tree.h"
#include <fstream>
#include <nlohmann/json.hpp>

#include "fake_memory.h"
#include "ready_child.h"
#include "skip.h"

using namespace jankbpf;
using namespace jankbpf::runtime;
using jankbpf::test::FakeMemory;
using jankbpf::test::RecordingMemory;
using jankbpf::test::hex;
using jankbpf::test::unhex;

namespace {

// Node 20's instance types (what its v8dbg_type_* say).
constexpr uint16_t kSeqOneByte = 8, kSeqTwoByte = 32, kConsOneByte = 41, kScopeInfoType = 261,
                   kSfiType = 262, kScriptType = 167, kJsFunctionType = 2066;

V8Layout node20_layout() {
  V8Layout l;
  l.type_sfi = kSfiType;
  l.type_script = kScriptType;
  l.type_scope_info = kScopeInfoType;
  l.type_fixed_array = 175;
  return l;
}

// A V8 heap and one thread's stack, by the layout's offsets. Objects are
// tagged (+1) where the heap points at them.
struct FakeV8 {
  V8Layout l = node20_layout();
  FakeMemory mem;
  uint64_t next = 0x200000;
  std::map<uint16_t, uint64_t> maps;  // instance type -> tagged map

  uint64_t alloc(size_t n) {
    uint64_t a = next;
    next += (n + 15) & ~size_t{15};
    mem.region(a, n);
    return a;
  }
  uint64_t map_of(uint16_t type) {
    auto it = maps.find(type);
    if (it != maps.end()) return it->second;
    uint64_t m = alloc(80);
    mem.put<uint16_t>(m + l.map_instance_type, type);
    return maps[type] = m + 1;
  }
  uint64_t object(uint16_t type, size_t size) {
    uint64_t o = alloc(size);
    mem.put<uint64_t>(o + l.obj_map, map_of(type));
    return o + 1;
  }
  void set(uint64_t tagged, uint32_t off, uint64_t v) { mem.put<uint64_t>(tagged - 1 + off, v); }
  static uint64_t smi(int64_t v) { return static_cast<uint64_t>(v) << 32; }

  uint64_t one_byte(const std::string& s) {
    uint64_t o = object(kSeqOneByte, l.seq_chars + s.size() + 8);
    mem.put<int32_t>(o - 1 + l.str_length, static_cast<int32_t>(s.size()));
    for (size_t i = 0; i < s.size(); ++i) mem.put<char>(o - 1 + l.seq_chars + i, s[i]);
    return o;
  }
  uint64_t two_byte(const std::u16string& s) {
    uint64_t o = object(kSeqTwoByte, l.seq_chars + 2 * s.size() + 8);
    mem.put<int32_t>(o - 1 + l.str_length, static_cast<int32_t>(s.size()));
    for (size_t i = 0; i < s.size(); ++i) mem.put<char16_t>(o - 1 + l.seq_chars + 2 * i, s[i]);
    return o;
  }
  uint64_t cons(uint64_t a, uint64_t b, int32_t len) {
    uint64_t o = object(kConsOneByte, 40);
    mem.put<int32_t>(o - 1 + l.str_length, len);
    set(o, l.cons_first, a);
    set(o, l.cons_second, b);
    return o;
  }
  uint64_t script(uint64_t name, uint64_t source) {
    uint64_t o = object(kScriptType, 80);
    set(o, l.script_name, name);
    set(o, l.script_source, source);
    return o;
  }
  // A compiled function's ScopeInfo as Node 20 lays it out: flags, params,
  // context locals (names, infos), function variable (name, slot), inferred
  // name, position (start, end).
  uint64_t scope_info(int locals, uint64_t fn_name, uint64_t inferred, int64_t start, int64_t end) {
    uint64_t o = object(kScopeInfoType, 8 + 8 * (3 + 2 * locals + 8));
    auto slot = [&](uint64_t k, uint64_t v) { set(o, static_cast<uint32_t>(8 + 8 * k), v); };
    slot(0, smi(0x4171c2));
    slot(1, smi(1));
    slot(2, smi(locals));
    uint64_t k = l.scope_first_vars;
    for (int i = 0; i < locals; ++i) slot(k++, one_byte("local"));
    for (int i = 0; i < locals; ++i) slot(k++, smi(i));
    slot(k++, fn_name);
    slot(k++, smi(-1));
    slot(k++, inferred);
    slot(k++, smi(start));
    slot(k++, smi(end));
    return o;
  }
  uint64_t sfi(uint64_t name_or_scope, uint64_t script) {
    uint64_t o = object(kSfiType, 64);
    set(o, l.sfi_name_or_scope, name_or_scope);
    set(o, l.sfi_script, script);
    return o;
  }
  uint64_t function(uint64_t shared) {
    uint64_t o = object(kJsFunctionType, 64);
    set(o, l.fn_shared, shared);
    return o;
  }
};

// A stack copy with frames from the leaf up; each frame is 64 bytes:
// [fp-16] function, [fp-8] context (or a Smi marker), [fp] caller's fp,
// [fp+8] return address into the caller.
struct FakeStack {
  static constexpr uint64_t kSp = 0x7ffd00000000;
  std::vector<uint8_t> bytes = std::vector<uint8_t>(4096, 0);
  uint64_t next_fp = kSp + 48;  // room for the leaf's own locals below the first frame
  std::vector<uint64_t> fps;

  void put(uint64_t addr, uint64_t v) { std::memcpy(bytes.data() + (addr - kSp), &v, 8); }
  // A frame whose function slot holds `fn` (0: a native frame, its slots
  // left as data), returning into `ret`.
  uint64_t frame(uint64_t fn, uint64_t ctx, uint64_t ret) {
    uint64_t fp = next_fp;
    next_fp += 64;
    if (!fps.empty()) put(fps.back(), fp);  // the callee's saved fp
    put(fp, 0);                             // outermost so far
    put(fp + 8, ret);
    if (fn) {
      put(fp - 16, fn);
      put(fp - 8, ctx);
    }
    fps.push_back(fp);
    return fp;
  }
  NativeStack view(uint64_t pc, uint64_t fp) const { return NativeStack{pc, kSp, fp, bytes}; }
};

constexpr uint64_t kContext = 0x90001;  // a tagged heap pointer
constexpr uint64_t kRetIntoEmit = 0x18cfd1c, kRetIntoEntry = 0x18ce0dc, kRetIntoMain = 0xbb835e;

}  // namespace

TEST_CASE("v8: a function's name, file, line and column, from its ScopeInfo and Script", "[v8]") {
  FakeV8 v;
  const std::string src = "// app\nconst x = 1;\nfunction renderReport(n) {\n  return n;\n}\n";
  const int64_t paren = static_cast<int64_t>(src.find("(n)"));
  uint64_t script = v.script(v.one_byte("/srv/app.js"), v.one_byte(src));
  uint64_t named = v.function(v.sfi(v.scope_info(2, v.one_byte("renderReport"), 0x11 /*undefined*/, paren, paren + 20),
                                    script));
  // A function whose name is a plain string (not compiled yet), in a script
  // whose name is a two-byte cons of two halves.
  uint64_t cons_name = v.cons(v.one_byte("/srv/"), v.two_byte(u"lib.js"), 11);
  uint64_t lazy = v.function(v.sfi(v.one_byte("emit"), v.script(cons_name, v.one_byte("x"))));
  FakeStack st;
  st.frame(0, 0, 0xaaaa);                         // the native leaf (libm), no JS function
  st.frame(named, kContext, kRetIntoEmit);        // renderReport, called from emit
  st.frame(lazy, kContext, kRetIntoEntry);        // emit, called from V8's entry
  st.frame(FakeV8::smi(1), FakeV8::smi(1), kRetIntoMain);  // an entry frame: a Smi marker
  V8Walker w(v.l);
  JsCapture c = w.walk(v.mem, st.view(0x21452bb, st.fps[0]));
  REQUIRE(c.status == JsCapture::Status::Ok);
  CHECK_FALSE(c.scanned);
  REQUIRE(c.frames.size() == 2);
  CHECK(c.frames[0].name == "renderReport");
  CHECK(c.frames[0].file == "/srv/app.js");
  CHECK(c.frames[0].line == 3);
  CHECK(c.frames[0].column == 22);  // "function renderReport(" : the '(' is column 22
  CHECK(c.frames[0].caller_pc == kRetIntoEmit);
  CHECK(c.frames[1].name == "emit");
  CHECK(c.frames[1].file == "/srv/lib.js");
  CHECK(c.frames[1].line == 0);  // no position: a function not compiled
  CHECK(c.frames[1].caller_pc == kRetIntoEntry);

  SECTION("the second walk is served by the caches, re-checked") {
    uint64_t before = v.mem.reads;
    JsCapture again = w.walk(v.mem, st.view(0x21452bb, st.fps[0]));
    REQUIRE(again.frames.size() == 2);
    CHECK(again.frames[0].name == "renderReport");
    CHECK(v.mem.reads - before <= 6);  // two batches of two, and no string read
  }
  SECTION("a SharedFunctionInfo whose name moved is read again") {
    uint64_t shared = 0;
    REQUIRE(v.mem.read_value(named - 1 + v.l.fn_shared, &shared));
    v.set(shared, v.l.sfi_name_or_scope, v.one_byte("renamed"));
    JsCapture again = w.walk(v.mem, st.view(0x21452bb, st.fps[0]));
    CHECK(again.frames[0].name == "renamed");
    CHECK(again.frames[0].line == 0);
  }
}

TEST_CASE("v8: what only looks like a JS frame is not one", "[v8]") {
  FakeV8 v;
  uint64_t script = v.script(v.one_byte("/a.js"), v.one_byte("function f() {}"));
  uint64_t good = v.function(v.sfi(v.one_byte("f"), script));
  // A C++ frame whose slots happen to hold odd values: one points at an
  // object whose "shared" field is no SharedFunctionInfo, one at nothing.
  uint64_t not_fn = v.object(kJsFunctionType, 64);
  v.set(not_fn, v.l.fn_shared, v.one_byte("a string, not an SFI"));
  FakeStack st;
  st.frame(not_fn, kContext, 0x1111);
  st.frame(0xdead0001, kContext, 0x2222);  // unmapped
  st.frame(good, kContext, 0x3333);
  st.frame(good, FakeV8::smi(3), 0x4444);  // a typed frame (Smi marker), even with a function slot
  V8Walker w(v.l);
  JsCapture c = w.walk(v.mem, st.view(0x1000, st.fps[0]));
  REQUIRE(c.frames.size() == 1);
  CHECK(c.frames[0].name == "f");
  CHECK(c.frames[0].caller_pc == 0x3333);

  SECTION("a JS function whose name cannot be read is unreadable, not guessed") {
    uint64_t broken = v.function(v.sfi(v.one_byte("g"), script));
    uint64_t shared = 0;
    REQUIRE(v.mem.read_value(broken - 1 + v.l.fn_shared, &shared));
    uint64_t bad_name = v.object(kSeqOneByte, 24);
    v.mem.put<int32_t>(bad_name - 1 + v.l.str_length, 1 << 30);  // longer than any memory there
    v.set(shared, v.l.sfi_name_or_scope, bad_name);
    FakeStack s2;
    s2.frame(broken, kContext, 0x5555);
    JsCapture u = w.walk(v.mem, s2.view(0x1000, s2.fps[0]));
    REQUIRE(u.frames.size() == 1);
    CHECK(u.frames[0].unreadable);
    CHECK(u.frames[0].name.empty());
  }
}

TEST_CASE("v8: a leaf that took the frame pointer register: the chain is found by a scan", "[v8]") {
  FakeV8 v;
  uint64_t fn = v.function(v.sfi(v.one_byte("hashPassword"), v.script(v.one_byte("/s.js"), v.one_byte(""))));
  FakeStack st;
  st.next_fp += 256;  // the leaf's big frame of data below the first chained frame
  for (uint64_t a = FakeStack::kSp; a < FakeStack::kSp + 256; a += 8) st.put(a, 0x1d51880);  // a table address
  st.frame(0, 0, 0x1111);
  st.frame(fn, kContext, 0x2222);
  st.frame(0, 0, 0x3333);
  st.frame(0, 0, 0x4444);
  V8Walker w(v.l);
  JsCapture c = w.walk(v.mem, st.view(0x1d5442d, 0x1d51880));  // rbp holds the table address
  REQUIRE(c.frames.size() == 1);
  CHECK(c.scanned);
  CHECK(c.frames[0].name == "hashPassword");
  CHECK(c.frames[0].caller_pc == 0x2222);
  // No chain anywhere: nothing, and no guess.
  FakeStack flat;
  for (uint64_t a = FakeStack::kSp; a < FakeStack::kSp + 4096; a += 8) flat.put(a, 0x1d51880);
  CHECK(w.walk(v.mem, flat.view(0x1d5442d, 0x1d51880)).frames.empty());
}

namespace {

stack::Frame native(uint64_t pc, const char* sym, bool jit = false) {
  stack::Frame f;
  f.pc = pc;
  f.symbol = sym;
  if (!jit) {
    f.module = "/usr/bin/node";
    f.build_id = "ab";
  }
  f.flags = jit ? uint32_t{stack::kFrameJit} : 0u;
  return f;
}

// sin < [jit] renderReport < interpreted emit < JSEntry < main, as the
// unwinder leaves it (callers' pcs are return addresses).
stack::ResolvedStack node_stack() {
  stack::ResolvedStack s;
  s.frames = {native(0x2148931, "v8::base::ieee754::sin(double)"), native(0x7f0000006bc9, "", true),
              native(kRetIntoEmit, "Builtins_InterpreterEntryTrampoline"), native(kRetIntoEntry, "Builtins_JSEntry"),
              native(kRetIntoMain, "main")};
  return s;
}

JsCapture node_capture() {
  JsCapture c;
  c.status = JsCapture::Status::Ok;
  c.read_ns = 100;
  c.frames = {{kRetIntoEmit, "renderReport", "/srv/app.js", 3, 22, false}, {kRetIntoEntry, "emit", "node:events", 0, 0, false}};
  return c;
}

}  // namespace

TEST_CASE("v8: JS frames are named in place, by the return address of their caller", "[v8]") {
  auto s = node_stack();
  RuntimeFrameStats st;
  interleave_js(s, node_capture(), true, 1000, st);
  REQUIRE(s.frames.size() == 5);
  CHECK(s.frames[0].symbol == "v8::base::ieee754::sin(double)");
  CHECK(s.frames[1].runtime == "js");
  CHECK(s.frames[1].symbol == "renderReport");
  CHECK(s.frames[1].file == "/srv/app.js");
  CHECK(s.frames[1].line == 3);
  CHECK(s.frames[1].column == 22);
  CHECK_FALSE(s.frames[1].jit());
  CHECK_FALSE(s.frames[1].has_module());  // module_index -1 in records
  CHECK(s.frames[2].symbol == "emit");
  CHECK(s.frames[3].symbol == "Builtins_JSEntry");
  CHECK(st.read == 2);
  CHECK(st.unreadable == 0);
  stack::StackTree tree;
  tree.add(s);
  CHECK(tree.heaviest_stack().find("#01 at renderReport (/srv/app.js:3:22)\n#02 at emit (node:events)\n") !=
        std::string::npos);
  CHECK(tree.fingerprint().find("js!renderReport (/srv/app.js)") != std::string::npos);
}

TEST_CASE("v8: frames read too late, or after the task, say so", "[v8]") {
  for (auto status : {JsCapture::Status::Late, JsCapture::Status::Ok}) {
    auto s = node_stack();
    JsCapture c = node_capture();
    c.status = status;
    RuntimeFrameStats st;
    interleave_js(s, c, true, 50 /* the task ended before the read at 100 */, st);
    CHECK(s.frames[1].symbol == kJsUnreadable);
    CHECK(s.frames[2].symbol == kJsUnreadable);
    CHECK(s.frames[3].symbol == "Builtins_JSEntry");
    CHECK(st.unreadable == 2);
  }
  // A perf map's name (--perf-basic-prof) stands when nothing was read.
  auto s = node_stack();
  s.frames[1].symbol = "renderReport";
  RuntimeFrameStats st;
  interleave_js(s, JsCapture{.status = JsCapture::Status::Late}, true, 1000, st);
  CHECK(s.frames[1].symbol == "renderReport");
  CHECK(s.frames[1].jit());
  // Not a V8 process: nothing changes.
  auto n = node_stack();
  interleave_js(n, JsCapture{}, false, 1000, st);
  CHECK(n.frames[1].symbol.empty());
}

TEST_CASE("v8: a native walk cut short goes on with the JS frames", "[v8]") {
  stack::ResolvedStack s;
  s.frames = {native(0x1d5442d, "sha512_block_data_order_avx2")};
  s.stop = stack::UnwindStop::BadFrame;
  JsCapture c = node_capture();
  RuntimeFrameStats st;
  interleave_js(s, c, true, 1000, st);
  REQUIRE(s.frames.size() == 3);
  CHECK(s.frames[1].symbol == "renderReport");
  CHECK(s.frames[1].runtime == "js");
  CHECK(s.frames[2].symbol == "emit");
  // A complete native stack that does not show them: not added.
  stack::ResolvedStack whole;
  whole.frames = {native(0x1000, "f"), native(0x2000, "main")};
  interleave_js(whole, c, true, 1000, st);
  CHECK(whole.frames.size() == 2);
}

TEST_CASE("v8: a task is named after the application's innermost JS function", "[v8][naming]") {
  TaskRecord r;
  auto js = [](const char* sym, const char* file) {
    StackFrame f;
    f.symbol = sym;
    f.file = file;
    f.runtime = "js";
    return f;
  };
  StackFrame leaf;
  leaf.symbol = "EVP_DigestUpdate";
  r.stack = {leaf, js("pbkdf2Sync", "node:internal/crypto/pbkdf2"), js("hashPassword", "/srv/app.js:3"),
             js("emit", "node:events")};
  name_runnable_from_runtime(r);
  CHECK(r.runnable_name == "hashPassword");
  // Only Node's own frames: the innermost of them.
  TaskRecord n;
  n.stack = {leaf, js("listOnTimeout", "node:internal/timers"), js("processTimers", "node:internal/timers")};
  name_runnable_from_runtime(n);
  CHECK(n.runnable_name == "listOnTimeout");
  // An anonymous function says where it is.
  TaskRecord a;
  a.stack = {js("(anonymous)", "/srv/app.js:11")};
  name_runnable_from_runtime(a);
  CHECK(a.runnable_name == "(anonymous /srv/app.js)");
}

TEST_CASE("v8: the layout from constants, and what is refused", "[v8]") {
  std::string why;
  CHECK_FALSE(v8_layout_from({{"SystemPointerSize", 8}}, &why));
  CHECK(why.find("missing") != std::string::npos);
  // A real node binary's constants, read as jankbpf reads them.
  const char* node = "/usr/bin/node";
  int fd = ::open(node, O_RDONLY | O_CLOEXEC);
  SKIP_UNLESS(fd >= 0, "no " << node << " (nodejs): its v8dbg_* constants not read");
  auto syms = runtime_symbols_of(fd);
  ::close(fd);
  REQUIRE(syms);
  CHECK(syms->v8dbg.size() > 400);
  auto l = v8_layout_from(syms->v8dbg, &why);
  INFO(why);
  REQUIRE(l);
  CHECK(l->fp_function == -16);
  CHECK(l->fp_context_or_type == -8);
  CHECK(l->type_sfi != 0);
  CHECK(l->type_script != 0);
  CHECK(l->type_scope_info != 0);
  // The same constants with pointer compression: refused, saying why.
  auto compressed = syms->v8dbg;
  for (auto& [k, v] : compressed)
    if (k == "SmiShiftSize") v = 0;
  CHECK_FALSE(v8_layout_from(compressed, &why));
  CHECK(why.find("pointer compression") != std::string::npos);
}

#if defined(__x86_64__)
namespace {

// A node process spinning in spinHere <- inner <- outer, stopped once with
// ptrace for its registers and 16 KB of stack, as a perf sample has them.
struct NodeChild {
  std::string script = write_script();
  test::ReadyChild child;
  pid_t pid;
  NativeStack sample;
  std::vector<uint8_t> stack;
  static std::string write_script() {
    char dir[] = "/tmp/jankbpf-v8-XXXXXX";
    REQUIRE(mkdtemp(dir));
    std::string path = std::string(dir) + "/spin.js";
    FILE* f = fopen(path.c_str(), "w");
    REQUIRE(f);
    fputs("function spinHere(n) {\n  let x = 0;\n  for (;;) x += Math.sqrt(n + x);\n}\n"
          "function inner() { spinHere(1); }\nfunction outer() { inner(); }\n"
          "process.stdout.write('r', () => outer());\n", f);
    fclose(f);
    return path;
  }
  explicit NodeChild(const char* node) : child({node, script}), pid(child.pid) {
    usleep(300 * 1000);  // in the loop, optimized or not
    REQUIRE(ptrace(PTRACE_SEIZE, pid, nullptr, nullptr) == 0);
    REQUIRE(ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr) == 0);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    user_regs_struct regs{};
    REQUIRE(ptrace(PTRACE_GETREGS, pid, nullptr, &regs) == 0);
    stack.resize(16384);
    iovec local{stack.data(), stack.size()}, remote{reinterpret_cast<void*>(regs.rsp), stack.size()};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    REQUIRE(n > 0);
    stack.resize(static_cast<size_t>(n));
    sample = NativeStack{regs.rip, regs.rsp, regs.rbp, stack};
    ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
  }
  ~NodeChild() {
    unlink(script.c_str());
    rmdir(script.substr(0, script.rfind('/')).c_str());
  }
};

}  // namespace

TEST_CASE("v8: a live node's JS frames, found by its symbols and read from its memory", "[v8][live]") {
  const char* node = "/usr/bin/node";
  SKIP_UNLESS(access(node, X_OK) == 0, "no " << node << " (nodejs): live V8 walk not run");
  NodeChild child(node);
  RuntimeFinder finder;
  std::string why;
  auto found = finder.find(child.pid, &why);
  INFO(why);
  REQUIRE(found.v8);
  CHECK_FALSE(found.python);
  ProcessMemory mem(child.pid);
  V8Walker w(*found.v8);
  JsCapture c = w.walk(mem, child.sample);
  REQUIRE(c.status == JsCapture::Status::Ok);
  std::vector<std::string> names;
  for (const auto& f : c.frames) names.push_back(f.name);
  INFO(Catch::Detail::stringify(names));
  REQUIRE(c.frames.size() >= 3);
  CHECK(c.frames[0].name == "spinHere");
  CHECK(c.frames[0].file == child.script);
  CHECK(c.frames[0].line == 1);
  CHECK(c.frames[0].column == 18);
  CHECK(c.frames[1].name == "inner");
  CHECK(c.frames[1].line == 5);
  CHECK(c.frames[2].name == "outer");
  for (const auto& f : c.frames) CHECK_FALSE(f.unreadable);
}

// Not run by default: `build/jankbpf-unit "[v8-bench]"` prints the cost of
// reading one sample's JS frames (what the ring thread pays).
TEST_CASE("bench: JS frame read per sample", "[.][v8-bench]") {
  const char* node = "/usr/bin/node";
  SKIP_UNLESS(access(node, X_OK) == 0, "no " << node);
  NodeChild child(node);
  RuntimeFinder finder;
  auto t0 = std::chrono::steady_clock::now();
  auto found = finder.find(child.pid, nullptr);
  double find_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(found.v8);
  ProcessMemory mem(child.pid);
  V8Walker w(*found.v8);
  t0 = std::chrono::steady_clock::now();
  JsCapture first = w.walk(mem, child.sample);
  double cold_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(first.frames.size() >= 3);
  constexpr int kRuns = 5000;
  std::vector<double> us;
  uint64_t reads0 = mem.reads();
  for (int i = 0; i < kRuns; ++i) {
    auto a = std::chrono::steady_clock::now();
    JsCapture c = w.walk(mem, child.sample);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
    REQUIRE(c.frames.size() == first.frames.size());
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) { return us[static_cast<size_t>(p * (us.size() - 1))]; };
  std::printf("[v8-bench] %s, %zu JS frames: runtime found in %.2f ms; cold first read %.1f us; "
              "warm p50 %.1f us, p99 %.1f us, max %.1f us; %.1f reads per capture\n",
              node, first.frames.size(), find_ms, cold_us, pct(0.5), pct(0.99), us.back(),
              static_cast<double>(mem.reads() - reads0) / kRuns);
  CHECK(pct(0.5) < 1000.0);
}
#endif

namespace {


constexpr const char* kNodeFixture = "tests/fixtures/v8/node20-spin.json";

}  // namespace

#if defined(__x86_64__)
// Not run by default: `build/jankbpf-unit "[v8-capture]"` writes the
// fixture the next case replays -- a live node's sample (registers, 16 KB
// of stack), V8's constants, and every heap read the walk made.
TEST_CASE("capture: a live node's sample as a fixture", "[.][v8-capture]") {
  const char* node = "/usr/bin/node";
  SKIP_UNLESS(access(node, X_OK) == 0, "no " << node);
  NodeChild child(node);
  int fd = ::open(node, O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto syms = runtime_symbols_of(fd);
  ::close(fd);
  REQUIRE(syms);
  auto layout = v8_layout_from(syms->v8dbg, nullptr);
  REQUIRE(layout);
  ProcessMemory live(child.pid);
  RecordingMemory rec(live);
  V8Walker w(*layout);
  JsCapture c = w.walk(rec, child.sample);
  REQUIRE(c.frames.size() >= 3);
  nlohmann::json j;
  j["what"] = "node (no flags) spinning spinHere <- inner <- outer, stopped once with ptrace";
  j["script"] = child.script;
  j["pc"] = child.sample.pc;
  j["sp"] = child.sample.sp;
  j["fp"] = child.sample.fp;
  j["stack"] = hex(child.stack.data(), child.stack.size());
  for (const auto& [k, v] : syms->v8dbg) j["v8dbg"][k] = v;
  for (const auto& [a, b] : rec.reads) j["reads"].push_back({{"addr", a}, {"bytes", hex(b.data(), b.size())}});
  for (const auto& f : c.frames) j["frames"].push_back({{"name", f.name}, {"file", f.file}, {"line", f.line}, {"column", f.column}});
  std::ofstream(kNodeFixture) << j.dump(1) << "\n";
}
#endif

TEST_CASE("v8: a captured node sample replayed: the same frames from the same bytes", "[v8][fixture]") {
  std::ifstream in(kNodeFixture);
  REQUIRE(in);  // checked in: tests/fixtures/v8/
  auto j = nlohmann::json::parse(in);
  std::vector<std::pair<std::string, int64_t>> consts;
  for (auto& [k, v] : j["v8dbg"].items()) consts.emplace_back(k, v.get<int64_t>());
  std::string why;
  auto layout = v8_layout_from(consts, &why);
  INFO(why);
  REQUIRE(layout);
  FakeMemory mem;
  for (const auto& r : j["reads"]) {
    auto bytes = unhex(r["bytes"].get<std::string>());
    auto& region = mem.region(r["addr"].get<uint64_t>(), bytes.size());
    std::copy(bytes.begin(), bytes.end(), region.begin());
  }
  auto stack = unhex(j["stack"].get<std::string>());
  NativeStack s{j["pc"].get<uint64_t>(), j["sp"].get<uint64_t>(), j["fp"].get<uint64_t>(), stack};
  V8Walker w(*layout);
  JsCapture c = w.walk(mem, s);
  REQUIRE(c.frames.size() == j["frames"].size());
  for (size_t i = 0; i < c.frames.size(); ++i) {
    CHECK(c.frames[i].name == j["frames"][i]["name"].get<std::string>());
    CHECK(c.frames[i].file == j["frames"][i]["file"].get<std::string>());
    CHECK(c.frames[i].line == j["frames"][i]["line"].get<uint32_t>());
    CHECK(c.frames[i].column == j["frames"][i]["column"].get<uint32_t>());
  }
  CHECK(c.frames[0].name == "spinHere");
  CHECK(c.frames[0].line == 1);
  CHECK(c.frames[1].name == "inner");
  CHECK(c.frames[2].name == "outer");
  // The same sample with its frame pointer lost (a leaf that used the
  // register): the scan finds the same JS frames.
  NativeStack lost = s;
  lost.fp = 0x1d51880;
  JsCapture scanned = w.walk(mem, lost);
  REQUIRE_FALSE(scanned.frames.empty());
  CHECK(scanned.scanned);
  CHECK(scanned.frames.back().name == c.frames.back().name);
}
