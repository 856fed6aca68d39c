// Unit tests for Java frames (issue 29): HotSpot's compressed streams
// (UNSIGNED5, line number tables), the layout from the JVM's own tables,
// a live JVM's frames (interpreted and compiled, an inlined method), a
// captured sample replayed offline, and how Java frames go into a native
// stack and name a task.
#include <dirent.h>
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
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "markers/naming.h"
#include "runtime/hotspot_find.h"
#include "runtime/hotspot_frames.h"
#include "runtime/hotspot_layout.h"
#include "runtime/hotspot_walk.h"
#include "runtime/interleave.h"
#include "runtime/mem_reader.h"
#include "runtime/runtime_find.h"
#include "report/sampled.h"
#include "stack/tree.h"

#include "fake_memory.h"
#include "ready_child.h"
#include "skip.h"

using namespace jankbpf;
using namespace jankbpf::runtime;
using jankbpf::test::FakeMemory;
using jankbpf::test::RecordingMemory;
using jankbpf::test::hex;
using jankbpf::test::unhex;

TEST_CASE("hotspot: UNSIGNED5 numbers, with and without the excluded null byte", "[hotspot]") {
  // 0..191 in one byte; larger ones in continuation bytes of 6 bits.
  std::vector<uint8_t> s{5, 191, 192, 1, 0xc5, 0xff, 0x03};
  size_t pos = 0;
  uint32_t v = 0;
  REQUIRE(read_unsigned5(s, pos, v, 0));
  CHECK(v == 5);
  REQUIRE(read_unsigned5(s, pos, v, 0));
  CHECK(v == 191);
  REQUIRE(read_unsigned5(s, pos, v, 0));
  CHECK(v == 192 + (1u << 6));
  REQUIRE(read_unsigned5(s, pos, v, 0));
  CHECK(v == 0xc5 + (0xffu << 6) + (0x03u << 12));
  CHECK(pos == s.size());
  CHECK_FALSE(read_unsigned5(s, pos, v, 0));  // nothing left
  // JDK 20+: every byte one higher, 0 never appears.
  // (L is 191 then: 190 is the largest one-byte number.)
  std::vector<uint8_t> x{6, 191, 192, 2};
  pos = 0;
  REQUIRE(read_unsigned5(x, pos, v, 1));
  CHECK(v == 5);
  REQUIRE(read_unsigned5(x, pos, v, 1));
  CHECK(v == 190);
  REQUIRE(read_unsigned5(x, pos, v, 1));
  CHECK(v == 191 + (1u << 6));
  std::vector<uint8_t> zero{0};
  pos = 0;
  CHECK_FALSE(read_unsigned5(zero, pos, v, 1));
  // A number never ends: five bytes at most.
  std::vector<uint8_t> endless(8, 0xf0);
  pos = 0;
  REQUIRE(read_unsigned5(endless, pos, v, 0));
  CHECK(pos == 5);
}

TEST_CASE("hotspot: the stack view reads past its copy in pages, never from bytes it has not read", "[hotspot]") {
  // A fuzz input found it: a first read in page 0 passed for the cached page
  // (the cache's start value) and was copied from an empty buffer.
  FakeMemory mem;
  auto& page = mem.region(0x7ffd00002000, 4096);
  page[8] = 0x2a;
  std::vector<uint8_t> copy(64, 0x11);
  NativeStack s;
  s.sp = 0x7ffd00001000;
  s.stack = copy;
  hotspot_detail::StackView view(mem, s);
  uint64_t w = 0;
  CHECK_FALSE(view.word(0, &w));
  CHECK_FALSE(view.word(8, &w));
  REQUIRE(view.word(0x7ffd00001008, &w));  // in the copy
  CHECK(w == 0x1111111111111111);
  REQUIRE(view.word(0x7ffd00002008, &w));  // read live, one page
  CHECK(w == 0x2a);
  CHECK_FALSE(view.word(0x18, &w));        // still not page 0
  CHECK_FALSE(view.word(0x7ffd00002009, &w));  // unaligned
}

TEST_CASE("hotspot: line number tables and the line of a bci", "[hotspot]") {
  // (bci 0, line 10) as an escape, then (+3, +1), (+8, +2), then an escape
  // going back a line (a loop's condition after its body), end.
  std::vector<uint8_t> t{0xff, 0, 20, (3 << 3) | 1, (8 << 3) | 2, 0xff, 2 * 5, 1, 0};
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  size_t used = 0;
  REQUIRE(decode_line_table(t, 0, pairs, 100, &used));
  CHECK(used == t.size());
  REQUIRE(pairs.size() == 4);
  CHECK(pairs[0] == std::make_pair(0u, 10u));
  CHECK(pairs[1] == std::make_pair(3u, 11u));
  CHECK(pairs[2] == std::make_pair(11u, 13u));
  CHECK(pairs[3] == std::make_pair(16u, 12u));
  CHECK(java_line(pairs, 0) == 10);
  CHECK(java_line(pairs, 2) == 10);
  CHECK(java_line(pairs, 3) == 11);
  CHECK(java_line(pairs, 15) == 13);
  CHECK(java_line(pairs, 16) == 12);
  CHECK(java_line(pairs, 400) == 12);
  CHECK(java_line({}, 3) == 0);
  // Damaged: no terminator, an escape cut short, too many pairs.
  pairs.clear();
  CHECK_FALSE(decode_line_table(std::vector<uint8_t>{8, 8, 8}, 0, pairs, 100));
  pairs.clear();
  CHECK_FALSE(decode_line_table(std::vector<uint8_t>{0xff, 0xf0}, 0, pairs, 100));
  pairs.clear();
  CHECK_FALSE(decode_line_table(std::vector<uint8_t>(64, 8), 0, pairs, 10));
  CHECK(pairs.size() <= 10);
}

namespace {

std::string java_bin(const char* tool) {
  std::string p = std::string("/usr/bin/") + tool;
  return access(p.c_str(), X_OK) == 0 ? p : "";
}

// HsSpin.java compiled once per run, into a temporary directory.
[[maybe_unused]] const std::string& hsspin_classes() {
  static std::string dir;
  if (!dir.empty()) return dir;
  char tmpl[] = "/tmp/jankbpf-hs-XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  std::string src = std::string("tests/apps/java/HsSpin.java");
  std::string cmd = java_bin("javac") + " -g -d " + tmpl + " " + src;
  REQUIRE(std::system(cmd.c_str()) == 0);
  dir = tmpl;
  return dir;
}

// The last thread of pid named `name` other than pid itself (the java
// launcher's first thread only waits for the JVM's main thread, which
// keeps the name "java").
pid_t thread_named(pid_t pid, const std::string& name) {
  std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(task.c_str());
  if (!d) return 0;
  pid_t found = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(task + "/" + e->d_name + "/comm");
    std::string comm;
    std::getline(in, comm);
    if (comm == name && std::atoi(e->d_name) != pid) found = static_cast<pid_t>(std::atoi(e->d_name));
  }
  closedir(d);
  return found;
}

// A JVM running HsSpin, its "hs-spin" thread stopped once with ptrace for
// its registers and 16 KB of stack, as a perf sample has them.
struct JvmChild {
  test::ReadyChild child;
  pid_t pid, tid = 0;
  NativeStack sample;
  std::vector<uint8_t> stack;
  JvmChild(std::vector<std::string> argv) : child(argv), pid(child.pid) {
    tid = thread_named(pid, "hs-spin");
    REQUIRE(tid > 0);
  }
  void stop_and_sample() {
#if defined(__x86_64__)
    REQUIRE(ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) == 0);
    REQUIRE(ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) == 0);
    int st = 0;
    REQUIRE(waitpid(tid, &st, __WALL) == tid);
    user_regs_struct regs{};
    REQUIRE(ptrace(PTRACE_GETREGS, tid, nullptr, &regs) == 0);
    stack.resize(16384);
    iovec local{stack.data(), stack.size()}, remote{reinterpret_cast<void*>(regs.rsp), stack.size()};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    REQUIRE(n > 0);
    stack.resize(static_cast<size_t>(n));
    sample = NativeStack{regs.rip, regs.rsp, regs.rbp, stack, 0, regs.r13};
#endif
  }
  void resume() { ptrace(PTRACE_DETACH, tid, nullptr, nullptr); }
};

[[maybe_unused]] std::vector<std::string> names(const JavaCapture& c) {
  std::vector<std::string> out;
  for (const auto& s : c.segments)
    for (const auto& f : s.frames) {
      const char* k = f.kind == JavaFrame::Kind::Interpreted ? "i"
                      : f.kind == JavaFrame::Kind::Compiled  ? "c"
                      : f.kind == JavaFrame::Kind::Inlined   ? "inl"
                      : f.kind == JavaFrame::Kind::Native    ? "n"
                      : f.kind == JavaFrame::Kind::Stub      ? "stub"
                                                             : "?";
      out.push_back(std::string(k) + ":" + f.name + "(" + f.file + ":" + std::to_string(f.line) + ") bci " +
                    std::to_string(f.bci));
    }
  return out;
}

}  // namespace

#if defined(__x86_64__)
namespace {

const JavaFrame* frame(const JavaCapture& c, size_t i) {
  for (const auto& s : c.segments) {
    if (i < s.frames.size()) return &s.frames[i];
    i -= s.frames.size();
  }
  return nullptr;
}

}  // namespace

TEST_CASE("hotspot: a live JVM's frames, interpreted and compiled", "[hotspot][live]") {
  SKIP_UNLESS(!java_bin("java").empty() && !java_bin("javac").empty(),
              "no /usr/bin/java and javac (openjdk-17-jdk-headless): live HotSpot walk not run");
  const std::string& cp = hsspin_classes();
  for (bool interpreted : {true, false}) {
    INFO((interpreted ? "-Xint" : "default (JIT)"));
    std::vector<std::string> argv{java_bin("java")};
    if (interpreted) argv.push_back("-Xint");
    argv.insert(argv.end(), {"-cp", cp, "HsSpin", interpreted ? "200" : "1500"});
    JvmChild jvm(argv);
    RuntimeFinder finder;
    std::string why;
    auto found = finder.find(jvm.pid, &why);
    INFO(why);
    REQUIRE(found.java);
    CHECK(found.java->release.starts_with("17."));
    ProcessMemory mem(jvm.pid);
    HotSpotWalker w(found.java->layout, found.java->syms, false);
    // Compiled: sampled until helper() runs inlined (C2 compiles in the
    // background), at most 20 s. Into middle()'s own nmethod (compiled
    // after ~10,000 calls), or into outer()'s on-stack-replacement one with
    // middle() inlined too, whichever C2 did first: CI saw both.
    auto inlined_shape = [](const JavaCapture& c) {
      const JavaFrame *h = frame(c, 1), *m = frame(c, 2), *o = frame(c, 3);
      if (!h || !m || !o || h->kind != JavaFrame::Kind::Inlined || m->name != "HsSpin.middle") return false;
      return m->kind == JavaFrame::Kind::Compiled ||
             (m->kind == JavaFrame::Kind::Inlined && o->kind == JavaFrame::Kind::Compiled);
    };
    JavaCapture c;
    for (int tries = 0; tries < 100; ++tries) {
      jvm.stop_and_sample();
      c = w.walk(mem, static_cast<uint64_t>(jvm.tid), jvm.sample);
      jvm.resume();
      if (interpreted || inlined_shape(c)) break;
      usleep(200 * 1000);
    }
    auto n = names(c);
    INFO(Catch::Detail::stringify(n));
    REQUIRE(c.status == JavaCapture::Status::Ok);
    REQUIRE(c.segments.size() == 1);
    CHECK_FALSE(c.segments[0].cut);  // to the thread's first Java frame
    CHECK(c.segments[0].exit_pc != 0);
    REQUIRE(c.frames() >= 6);
    const JavaFrame& work = *frame(c, 0);
    CHECK(work.name == "HsSpin.work");
    CHECK(work.file == "HsSpin.java");
    CHECK(work.line >= 13);  // its loop
    CHECK(work.line <= 24);
    CHECK(frame(c, 1)->name == "HsSpin.helper");
    CHECK(frame(c, 1)->line == 29);
    CHECK(frame(c, 2)->name == "HsSpin.middle");
    CHECK(frame(c, 2)->line == 33);
    CHECK(frame(c, 3)->name == "HsSpin.outer");
    CHECK(frame(c, 3)->line == 37);
    const JavaFrame& root = *frame(c, c.frames() - 1);
    CHECK(root.name == "java.lang.Thread.run");
    CHECK(root.file == "Thread.java");
    CHECK(root.line > 0);
    if (interpreted) {
      for (size_t i = 0; i < c.frames(); ++i) CHECK(frame(c, i)->kind == JavaFrame::Kind::Interpreted);
    } else {
      CHECK(work.kind == JavaFrame::Kind::Compiled);
      // helper() inlined into middle()'s nmethod, or both into outer()'s.
      CHECK(inlined_shape(c));
    }
  }
}
#endif

namespace {

// A sample in Thread.sleep's native code: libc and libjvm frames, the
// native walk through interpreted frames (by their frame pointers), then
// the C++ that started the thread. The code cache is [0x7f00'0000'0000,
// 0x7f00'1000'0000); its interpreter [0x7f00'0000'1000, 0x7f00'0001'0000).
constexpr uint64_t kCodeLo = 0x7f0000000000, kCodeHi = 0x7f0010000000;
constexpr uint64_t kInterpLo = 0x7f0000001000, kInterpHi = 0x7f0000010000;
constexpr uint64_t kCallHelperRet = 0x7f7774828200;

stack::Frame native(uint64_t pc, const char* sym, const char* module = "/usr/lib/jvm/lib/server/libjvm.so") {
  stack::Frame f;
  f.pc = pc;
  f.symbol = sym;
  f.module = module;
  return f;
}

stack::Frame jit(uint64_t pc) {
  stack::Frame f;
  f.pc = pc;
  f.flags = stack::kFrameJit;
  return f;
}

stack::ResolvedStack sleep_stack() {
  stack::ResolvedStack s;
  s.frames = {native(0x7f7775585f16, "__futex_abstimed_wait_common", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
              native(0x7f7774c37008, "os::PlatformEvent::park(long)"),
              native(0x7f777490e985, "JVM_Sleep"),
              jit(0x7f0000002345),  // the interpreter, as the frame pointers led
              jit(0x7f0000002400),
              jit(0x7f0000002400),
              native(kCallHelperRet, "JavaCalls::call_helper(...)"),
              native(0x7f7774829952, "JavaCalls::call_virtual(...)"),
              native(0x7f77755dd1f5, "start_thread", "/usr/lib/x86_64-linux-gnu/libc.so.6")};
  return s;
}

JavaFrame jf(JavaFrame::Kind k, const char* name, const char* file, uint32_t line, bool jit = false) {
  JavaFrame f;
  f.kind = k;
  f.name = name;
  f.file = file;
  f.line = line;
  f.jit = jit;
  return f;
}

JavaCapture sleep_capture() {
  JavaCapture c;
  c.status = JavaCapture::Status::Ok;
  c.read_ns = 100;
  c.code_lo = kCodeLo;
  c.code_hi = kCodeHi;
  JavaSegment seg;
  seg.blob_lo = kInterpLo;
  seg.blob_hi = kInterpHi;
  seg.exit_pc = kCallHelperRet;
  seg.frames = {jf(JavaFrame::Kind::Native, "java.lang.Thread.sleep", "Sleep.java", 0),
                jf(JavaFrame::Kind::Interpreted, "Handlers.lookup", "LoopServer.java", 225),
                jf(JavaFrame::Kind::Interpreted, "LoopServer$NioLoop.serve", "LoopServer.java", 121),
                jf(JavaFrame::Kind::Interpreted, "java.lang.Thread.run", "Thread.java", 840)};
  c.segments.push_back(seg);
  return c;
}

}  // namespace

TEST_CASE("hotspot: Java frames replace the code cache's frames, the native walk resumes at the call stub's return",
          "[hotspot]") {
  auto s = sleep_stack();
  RuntimeFrameStats st;
  interleave_java(s, sleep_capture(), true, 1000, st);
  std::vector<std::string> got;
  for (const auto& f : s.frames) got.push_back(f.runtime + ":" + f.symbol);
  INFO(Catch::Detail::stringify(got));
  REQUIRE(s.frames.size() == 10);
  CHECK(s.frames[2].symbol == "JVM_Sleep");
  CHECK(s.frames[3].runtime == "java");
  CHECK(s.frames[3].symbol == "java.lang.Thread.sleep");
  CHECK(s.frames[3].file == "Native Method");  // as Java prints a native method
  CHECK(s.frames[4].symbol == "Handlers.lookup");
  CHECK(s.frames[4].file == "LoopServer.java");
  CHECK(s.frames[4].line == 225);
  CHECK_FALSE(s.frames[4].jit());  // interpreted
  CHECK_FALSE(s.frames[4].has_module());
  CHECK(s.frames[6].symbol == "java.lang.Thread.run");
  CHECK(s.frames[7].symbol == "JavaCalls::call_helper(...)");
  CHECK(s.frames[9].symbol == "start_thread");
  CHECK(st.read == 4);
  CHECK(st.unreadable == 0);
  stack::StackTree tree;
  tree.add(s);
  const std::string text = tree.heaviest_stack();
  CHECK(text.find("#03 at java.lang.Thread.sleep(Native Method)\n#04 at Handlers.lookup(LoopServer.java:225)\n") !=
        std::string::npos);
  CHECK(tree.fingerprint().find("java!Handlers.lookup (LoopServer.java)") != std::string::npos);
}

TEST_CASE("hotspot: compiled and inlined frames, stubs, a walk cut short, segments past a VM call", "[hotspot]") {
  // The leaf in compiled code; the native walk's frame pointers go astray
  // past it (no frame pointer in compiled code): its frames after the
  // first code-cache one are not believed, and the Java frames stand.
  stack::ResolvedStack s;
  s.frames = {jit(0x7f0000200010), native(0x7f7774000001, "junk_from_a_stale_rbp"), jit(0x7f0000300000)};
  s.stop = stack::UnwindStop::BadFrame;
  JavaCapture c;
  c.status = JavaCapture::Status::Ok;
  c.read_ns = 1;
  c.code_lo = kCodeLo;
  c.code_hi = kCodeHi;
  JavaSegment inner;
  inner.blob_lo = 0x7f0000200000;
  inner.blob_hi = 0x7f0000201000;
  inner.exit_pc = kCallHelperRet;
  inner.frames = {jf(JavaFrame::Kind::Compiled, "Handlers.render", "LoopServer.java", 206, true),
                  jf(JavaFrame::Kind::Inlined, "Handlers.report", "LoopServer.java", 198, true),
                  jf(JavaFrame::Kind::Compiled, "Handlers.serve", "LoopServer.java", 193, true),
                  jf(JavaFrame::Kind::Stub, "I2C/C2I adapters", "", 0, true)};
  JavaSegment outer;  // the Java frames that called into the VM, past the call stub
  outer.blob_lo = kInterpLo;
  outer.blob_hi = kInterpHi;
  outer.frames = {jf(JavaFrame::Kind::Interpreted, "Main.main", "Main.java", 7)};
  outer.cut = true;
  c.segments = {inner, outer};
  RuntimeFrameStats st;
  interleave_java(s, c, true, 1000, st);
  std::vector<std::string> got;
  for (const auto& f : s.frames) got.push_back(f.symbol);
  INFO(Catch::Detail::stringify(got));
  REQUIRE(s.frames.size() == 6);
  CHECK(s.frames[0].symbol == "Handlers.render");
  CHECK(s.frames[0].jit());
  CHECK(s.frames[1].inlined());
  CHECK(s.frames[3].symbol == "[stub: I2C/C2I adapters]");
  CHECK(s.frames[4].symbol == "Main.main");
  CHECK(s.frames[5].symbol == kJavaUnreadable);  // where the cut walk stopped
  CHECK(st.read == 5);
  CHECK(st.unreadable == 1);
  // Records: inlined and jit say so.
  stack::StackTree tree;
  tree.add(s);
  CHECK(tree.heaviest_stack().find("at Handlers.report(LoopServer.java:198)") != std::string::npos);
  CHECK(tree.heaviest_stack().find("at [stub: I2C/C2I adapters]") != std::string::npos);
}

TEST_CASE("hotspot: frames late, failed, or of another moment say so", "[hotspot]") {
  // Read after the task ended; failed; the native walk entering the code
  // cache elsewhere than the read's innermost frame (the thread moved on).
  JavaCapture moved = sleep_capture();
  moved.segments[0].blob_lo = 0x7f0000500000;
  moved.segments[0].blob_hi = 0x7f0000501000;
  JavaCapture failed{.status = JavaCapture::Status::Unreadable};
  JavaCapture late{.status = JavaCapture::Status::Late};
  const std::vector<std::pair<JavaCapture, uint64_t>> cases{
      {moved, 1000}, {failed, 1000}, {late, 1000}, {sleep_capture(), 50 /* the task ended before the read at 100 */}};
  for (const auto& [c, end] : cases) {
    auto s = sleep_stack();
    RuntimeFrameStats st;
    interleave_java(s, c, true, end, st);
    std::vector<std::string> got;
    for (const auto& f : s.frames) got.push_back(f.symbol);
    INFO(Catch::Detail::stringify(got));
    REQUIRE(s.frames.size() == 7);
    CHECK(s.frames[3].symbol == kJavaUnreadable);  // one for the run of three
    CHECK(s.frames[4].symbol == "JavaCalls::call_helper(...)");
    CHECK(st.unreadable == 1);
    CHECK(st.read == 0);
  }
  // Not a JVM: nothing changes.
  auto n = sleep_stack();
  RuntimeFrameStats st;
  interleave_java(n, JavaCapture{}, false, 1000, st);
  CHECK(n.frames.size() == 9);
}

TEST_CASE("hotspot: a task is named after the application's innermost Java method", "[hotspot][naming]") {
  auto java = [](const char* sym, const char* file) {
    StackFrame f;
    f.symbol = sym;
    f.file = file;
    f.runtime = "java";
    return f;
  };
  StackFrame leaf;
  leaf.symbol = "JVM_Sleep";
  TaskRecord r;
  r.stack = {leaf, java("java.lang.Thread.sleep", "Native Method"), java("[stub: StubRoutines (1)]", ""),
             java("com.example.Handlers.lookup", "Handlers.java:12"), java("sun.net.httpserver.ServerImpl$Exchange.run", "")};
  name_runnable_from_runtime(r);
  CHECK(r.runnable_name == "com.example.Handlers.lookup");
  // The JDK's own frames only (java., jdk., sun., com.sun.): the innermost.
  TaskRecord j;
  j.stack = {java("jdk.internal.misc.Unsafe.park", "Native Method"), java("java.lang.Thread.run", "Thread.java:840")};
  name_runnable_from_runtime(j);
  CHECK(j.runnable_name == "jdk.internal.misc.Unsafe.park");
  // Unreadable: no name rather than an outer frame's.
  TaskRecord u;
  u.stack = {java(kJavaUnreadable, ""), java("com.example.Main.main", "Main.java:3")};
  name_runnable_from_runtime(u);
  CHECK(u.runnable_name.empty());
}

TEST_CASE("hotspot: flame graphs, Perfetto and reports name Java frames as the stack log does", "[hotspot][report]") {
  stack::Frame f;
  f.runtime = "java";
  f.symbol = "com.example.Handlers.render";
  f.file = "Handlers.java";
  f.line = 42;
  CHECK(report::frame_name(f) == "at com.example.Handlers.render(Handlers.java:42)");
  f.file = "Native Method";
  f.line = 0;
  CHECK(report::frame_name(f) == "at com.example.Handlers.render(Native Method)");
  f.file.clear();  // a hidden class's lambda: no source file
  CHECK(report::frame_name(f) == "at com.example.Handlers.render(Unknown Source)");
  // After the fact, from the stack log's text: the same names.
  for (const char* text : {"at com.example.Handlers.render(Handlers.java:42)", "at java.lang.Thread.sleep(Native Method)",
                           "at Main$$Lambda$14/0x0000000800c01200.run(Unknown Source)", "at [java: unreadable]",
                           "at [stub: I2C/C2I adapters]"}) {
    SampledFrame sf;
    char wait = 0;
    REQUIRE(report::parse_log_frame(text, &sf, &wait));
    CHECK(sf.name == text);
    CHECK(sf.module == "[java]");
  }
  // JavaScript's forms stay theirs.
  SampledFrame js;
  char wait = 0;
  REQUIRE(report::parse_log_frame("at (anonymous) (/srv/app.js:11:34)", &js, &wait));
  CHECK(js.name == "(anonymous)");
  REQUIRE(report::parse_log_frame("at (anonymous)", &js, &wait));
  CHECK(js.module == "[jit]");
}

#if defined(__x86_64__)
namespace {

// Walks one sample of `tid` 5,000 times against the live JVM and prints
// the cost the ring thread pays for it.
void bench_line(const char* label, JvmChild& jvm, pid_t tid, double find_ms, const HotSpotTarget& t) {
  jvm.tid = tid;
  jvm.stop_and_sample();
  jvm.resume();
  ProcessMemory mem(jvm.pid);
  HotSpotWalker w(t.layout, t.syms, false);
  auto t0 = std::chrono::steady_clock::now();
  JavaCapture first = w.walk(mem, static_cast<uint64_t>(tid), jvm.sample);
  double cold_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(first.status == JavaCapture::Status::Ok);
  REQUIRE(first.frames() >= 2);
  size_t interp = 0, compiled = 0, unreadable = 0;
  for (const auto& s : first.segments)
    for (const auto& f : s.frames)
      (f.kind == JavaFrame::Kind::Unreadable ? unreadable : f.jit ? compiled : interp)++;
  constexpr int kRuns = 5000;
  std::vector<double> us;
  uint64_t reads0 = mem.reads();
  for (int i = 0; i < kRuns; ++i) {
    auto a = std::chrono::steady_clock::now();
    JavaCapture c = w.walk(mem, static_cast<uint64_t>(tid), jvm.sample);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
    REQUIRE(c.frames() == first.frames());
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) { return us[static_cast<size_t>(p * (us.size() - 1))]; };
  std::printf("[%s] /usr/bin/java, %zu frames: runtime found in %.2f ms; cold first read %.1f us; "
              "warm p50 %.1f us, p99 %.1f us, max %.1f us; %.1f reads per capture; "
              "%zu interpreted, %zu compiled, %zu unreadable\n",
              label, first.frames(), find_ms, cold_us, pct(0.5), pct(0.99), us.back(),
              static_cast<double>(mem.reads() - reads0) / kRuns, interp, compiled, unreadable);
}

}  // namespace

// Not run by default: `build/jankbpf-unit "[hotspot-bench]"` prints the cost
// of reading one sample's Java frames (what the ring thread pays): a
// compiled leaf (registers), then a thread in native code (its anchor:
// the JVM's thread list looked up, Thread.sleep's frames), then -Xint.
TEST_CASE("bench: Java frame read per sample", "[.][hotspot-bench]") {
  SKIP_UNLESS(!java_bin("java").empty() && !java_bin("javac").empty(), "no java/javac");
  const std::string& cp = hsspin_classes();
  {
    JvmChild jvm({java_bin("java"), "-cp", cp, "HsSpin", "3000"});
    RuntimeFinder finder;
    auto t0 = std::chrono::steady_clock::now();
    auto found = finder.find(jvm.pid, nullptr);
    double find_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(found.java);
    bench_line("hotspot-bench", jvm, jvm.tid, find_ms, *found.java);
    bench_line("hotspot-bench:native-leaf", jvm, thread_named(jvm.pid, "java"), find_ms, *found.java);
  }
  JvmChild jvm({java_bin("java"), "-Xint", "-cp", cp, "HsSpin", "300"});
  RuntimeFinder finder;
  auto found = finder.find(jvm.pid, nullptr);
  REQUIRE(found.java);
  bench_line("hotspot-bench:interpreted", jvm, jvm.tid, 0, *found.java);
}
#endif

// --- captured samples, replayed offline ------------------------------------
//
// A fixture holds, per sample, the JVM's tables (the entries the layout
// reads), the registers and stack copy of one thread, every read of the
// process's memory the walk made, and the frames it found. Replayed with
// no JVM (and under qemu by `make arm64-check`): the same frames from the
// same bytes, cold and then warm.
namespace {

constexpr const char* kHotspotFixtures[] = {"tests/fixtures/hotspot/jdk17-x86_64.json",
                                            "tests/fixtures/hotspot/jdk17-aarch64.json"};



const char* kind_name(JavaFrame::Kind k) {
  switch (k) {
    case JavaFrame::Kind::Interpreted: return "interpreted";
    case JavaFrame::Kind::Compiled: return "compiled";
    case JavaFrame::Kind::Inlined: return "inlined";
    case JavaFrame::Kind::Native: return "native";
    case JavaFrame::Kind::Stub: return "stub";
    default: return "unreadable";
  }
}

// The table entries hotspot_layout_from() can ask for: the types it names.
bool layout_entry(const std::string& name) {
  static const char* const kPrefixes[] = {
      "CodeCache::", "CodeHeap::", "VirtualSpace::", "HeapBlock", "StubQueue::", "CodeBlob", "CompiledMethod::",
      "nmethod", "PcDesc", "Method::", "Method", "ConstMethod", "ConstantPool", "InstanceKlass::_source",
      "Klass::_name", "Symbol::", "ThreadsSMRSupport::", "ThreadsList::", "JavaThread::", "Thread::_osthread",
      "OSThread::", "JavaFrameAnchor::", "JavaCallWrapper::", "GrowableArray", "GenericGrowableArray",
      "AbstractInterpreter::", "StubRoutines::_call_stub_return_address", "Abstract_VM_Version::_vm_major_version",
      "Universe::_collectedHeap", "frame::", "_thread_", "InvocationEntryBci", "CodeBlobKind::"};
  for (const char* p : kPrefixes)
    if (name.starts_with(p)) return true;
  return false;
}

[[maybe_unused]] nlohmann::json tables_json(const VmTables& t) {
  nlohmann::json j;
  for (const auto& [k, f] : t.fields)
    if (layout_entry(k)) j["fields"][k] = {f.offset, f.address, f.is_static};
  for (const auto& [k, v] : t.sizes)
    if (layout_entry(k)) j["sizes"][k] = v;
  for (const auto& [k, v] : t.constants)
    if (layout_entry(k)) j["constants"][k] = v;
  return j;
}

VmTables tables_from(const nlohmann::json& j) {
  VmTables t;
  for (auto& [k, v] : j["fields"].items())
    t.fields[k] = {v[0].get<uint64_t>(), v[1].get<uint64_t>(), v[2].get<bool>()};
  for (auto& [k, v] : j["sizes"].items()) t.sizes[k] = v.get<uint64_t>();
  for (auto& [k, v] : j["constants"].items()) t.constants[k] = v.get<int64_t>();
  return t;
}

nlohmann::json frames_json(const JavaCapture& c) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : c.segments)
    for (const auto& f : s.frames)
      out.push_back({{"kind", kind_name(f.kind)}, {"name", f.name}, {"file", f.file}, {"line", f.line}, {"bci", f.bci}});
  return out;
}

}  // namespace

#if defined(__x86_64__)

// Not run by default: `build/jankbpf-unit "[hotspot-capture]"` writes
// tests/fixtures/hotspot/jdk17-x86_64.json from live JVMs (Debian's
// OpenJDK 17, no flags but -Xint for the interpreted sample): a compiled
// leaf, a thread in native code (Thread.sleep), an interpreted leaf.
TEST_CASE("capture: live JVM samples as a fixture", "[.][hotspot-capture]") {
  SKIP_UNLESS(!java_bin("java").empty() && !java_bin("javac").empty(), "no java/javac");
  const std::string& cp = hsspin_classes();
  nlohmann::json doc;
  doc["what"] = "Debian's OpenJDK 17 (x86_64) running tests/apps/java/HsSpin.java, threads stopped once with ptrace";
  doc["arch"] = "x86_64";
  auto add = [&](JvmChild& jvm, pid_t tid, const char* what) {
    std::string path;
    {
      std::ifstream in("/proc/" + std::to_string(jvm.pid) + "/maps");
      std::string line;
      while (std::getline(in, line))
        if (line.ends_with("/libjvm.so")) path = line.substr(line.find('/'));
    }
    RuntimeFinder finder;
    auto found = finder.find(jvm.pid, nullptr);
    REQUIRE(found.java);
    // The tables again, through the exports (as the finder read them).
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    auto syms = runtime_symbols_of(fd);
    ::close(fd);
    REQUIRE(syms);
    uint64_t base = 0;
    {
      std::ifstream in("/proc/" + std::to_string(jvm.pid) + "/maps");
      std::string line;
      while (std::getline(in, line))
        if (line.ends_with("/libjvm.so") && line.find(" 00000000 ") != std::string::npos) {
          base = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
          break;
        }
    }
    REQUIRE(base);
    HotSpotExports ex;
    for (const auto& [n, a] : syms->hotspot) ex[n] = a + base - syms->loads.front().vaddr;
    ProcessMemory live(jvm.pid);
    auto tables = read_vm_tables(live, ex, nullptr);
    REQUIRE(tables);
    jvm.tid = tid;
    jvm.stop_and_sample();
    RecordingMemory rec(live);
    HotSpotWalker w(found.java->layout, {}, false);
    JavaCapture c = w.walk(rec, static_cast<uint64_t>(tid), jvm.sample);
    jvm.resume();
    REQUIRE(c.status == JavaCapture::Status::Ok);
    nlohmann::json s;
    s["what"] = what;
    s["tables"] = tables_json(*tables);
    s["tid"] = tid;
    s["pc"] = jvm.sample.pc;
    s["sp"] = jvm.sample.sp;
    s["fp"] = jvm.sample.fp;
    s["lr"] = jvm.sample.lr;
    s["bcp"] = jvm.sample.interp_bcp;
    s["stack"] = hex(jvm.stack.data(), jvm.stack.size());
    for (const auto& [a, b] : rec.reads) s["reads"].push_back({{"addr", a}, {"bytes", hex(b.data(), b.size())}});
    s["frames"] = frames_json(c);
    doc["samples"].push_back(s);
  };
  {
    JvmChild jvm({java_bin("java"), "-cp", cp, "HsSpin", "3000"});
    add(jvm, jvm.tid, "compiled: hs-spin in work() <- helper() (inlined) <- middle(), by its registers");
    add(jvm, thread_named(jvm.pid, "java"), "native: the main thread in Thread.sleep, from its last Java frame");
  }
  {
    JvmChild jvm({java_bin("java"), "-Xint", "-cp", cp, "HsSpin", "300"});
    add(jvm, jvm.tid, "interpreted (-Xint): hs-spin in work(), its bcp in r13");
  }
  std::ofstream(kHotspotFixtures[0]) << doc.dump(1) << "\n";
}
#endif

TEST_CASE("hotspot: captured JVM samples replayed: the same frames from the same bytes", "[hotspot][fixture]") {
  size_t replayed = 0;
  for (const char* path : kHotspotFixtures) {
    std::ifstream in(path);
    REQUIRE(in);  // checked in: tests/fixtures/hotspot/
    auto doc = nlohmann::json::parse(in);
    const bool arm64 = doc["arch"] == "aarch64";
    for (const auto& s : doc["samples"]) {
      INFO(path << ": " << s["what"].get<std::string>());
      std::string why;
      auto layout = hotspot_layout_from(tables_from(s["tables"]), arm64, &why);
      INFO(why);
      REQUIRE(layout);
      FakeMemory mem;
      for (const auto& r : s["reads"]) {
        auto bytes = unhex(r["bytes"].get<std::string>());
        auto& region = mem.region(r["addr"].get<uint64_t>(), bytes.size());
        std::copy(bytes.begin(), bytes.end(), region.begin());
      }
      auto stack = unhex(s["stack"].get<std::string>());
      NativeStack ns{s["pc"].get<uint64_t>(), s["sp"].get<uint64_t>(), s["fp"].get<uint64_t>(), stack,
                     s["lr"].get<uint64_t>(), s["bcp"].get<uint64_t>()};
      HotSpotWalker w(*layout, {}, arm64);
      for (int warm = 0; warm < 2; ++warm) {
        INFO((warm ? "warm" : "cold"));
        JavaCapture c = w.walk(mem, s["tid"].get<uint64_t>(), ns);
        REQUIRE(c.status == JavaCapture::Status::Ok);
        CHECK(frames_json(c) == s["frames"]);
      }
      CHECK(s["frames"].size() >= 2);
      ++replayed;
    }
  }
  CHECK(replayed == 5);  // x86_64: compiled, native, interpreted; aarch64: compiled, interpreted
}

#if defined(__x86_64__)
// Not run by default: scripts/capture-aarch64-fixtures.sh --jvm runs it
// (`build/jankbpf-unit "[hotspot-capture-arm64]"` with the JANKBPF_ARM64_*
// paths it sets) to write tests/fixtures/hotspot/jdk17-aarch64.json:
// Debian's arm64 OpenJDK 17 under qemu-aarch64 (which maps the guest at
// the host's addresses), each sample taken by the thread itself
// (HsCapture.java, hs_capture.c) in native code called from compiled
// frames, then from interpreted ones (-Xint).
TEST_CASE("capture: an arm64 JVM's samples, under qemu-aarch64, as a fixture", "[.][hotspot-capture-arm64]") {
  const char* java = std::getenv("JANKBPF_ARM64_JAVA");
  const char* libs = std::getenv("JANKBPF_ARM64_LIBS");
  const char* jni = std::getenv("JANKBPF_ARM64_CAPTURE_LIB");
  const char* classes = std::getenv("JANKBPF_ARM64_CLASSES");
  const char* qemu = "/usr/bin/qemu-aarch64-static";
  REQUIRE(java);
  REQUIRE(libs);
  REQUIRE(jni);
  REQUIRE(classes);
  nlohmann::json doc;
  doc["what"] = "Debian's arm64 OpenJDK 17 under qemu-aarch64 running tests/apps/java/HsCapture.java, each sample "
                "taken by the thread itself in native code (hs_capture.c)";
  doc["arch"] = "aarch64";
  for (bool interpreted : {false, true}) {
    char dir[] = "/tmp/jankbpf-hs-arm64-XXXXXX";
    REQUIRE(mkdtemp(dir));
    std::string out = std::string(dir) + "/capture.bin";
    int in[2];
    REQUIRE(pipe(in) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      dup2(in[0], 0);
      close(in[1]);
      setenv("LD_LIBRARY_PATH", libs, 1);
      std::vector<std::string> argv{qemu, "-L", "/", java};
      if (interpreted) argv.push_back("-Xint");
      argv.insert(argv.end(), {"-cp", classes, "HsCapture", jni, interpreted ? "10" : "20000", out});
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      execv(qemu, a.data());
      _exit(127);
    }
    close(in[0]);
    for (int i = 0; i < 3000 && access((out + ".ready").c_str(), F_OK) != 0; ++i) usleep(100 * 1000);
    REQUIRE(access((out + ".ready").c_str(), F_OK) == 0);
    std::ifstream f(out, std::ios::binary);
    uint64_t tid = 0, pc = 0, sp = 0, fp = 0, lr = 0, bcp = 0;
    f >> tid >> pc >> sp >> fp >> lr >> bcp;
    f.get();
    std::vector<uint8_t> stack((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    REQUIRE(stack.size() >= 4096);
    // libjvm.so as qemu mapped it (guest addresses are the host's: its
    // guest base is 0 for an aarch64 guest on x86_64).
    std::string path;
    uint64_t base = 0;
    {
      std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
      std::string line;
      while (std::getline(maps, line))
        if (line.ends_with("/libjvm.so") && line.find(" 00000000 ") != std::string::npos) {
          base = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
          path = line.substr(line.find('/'));
          break;
        }
    }
    REQUIRE(base);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    auto syms = runtime_symbols_of(fd);
    ::close(fd);
    REQUIRE(syms);
    HotSpotExports ex;
    for (const auto& [n, a] : syms->hotspot) ex[n] = a + base - syms->loads.front().vaddr;
    ProcessMemory live(pid);
    std::string why;
    auto tables = read_vm_tables(live, ex, &why);
    INFO(why);
    REQUIRE(tables);
    auto layout = hotspot_layout_from(*tables, true, &why);
    INFO(why);
    REQUIRE(layout);
    RecordingMemory rec(live);
    HotSpotWalker w(*layout, {}, true);
    NativeStack ns{pc, sp, fp, stack, lr, bcp};
    JavaCapture c = w.walk(rec, tid, ns);
    (void)!write(in[1], "x", 1);
    close(in[1]);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    unlink(out.c_str());
    unlink((out + ".ready").c_str());
    rmdir(dir);
    INFO(frames_json(c).dump());
    REQUIRE(c.status == JavaCapture::Status::Ok);
    REQUIRE(c.frames() >= 4);
    nlohmann::json s;
    s["what"] = interpreted ? "interpreted (-Xint): HsCapture.capture (native) <- work <- helper <- middle <- outer"
                            : "compiled after a warm-up: HsCapture.capture (native) <- work <- helper <- middle <- outer";
    s["tables"] = tables_json(*tables);
    s["tid"] = tid;
    s["pc"] = pc;
    s["sp"] = sp;
    s["fp"] = fp;
    s["lr"] = lr;
    s["bcp"] = bcp;
    s["stack"] = hex(stack.data(), stack.size());
    for (const auto& [a, b] : rec.reads) s["reads"].push_back({{"addr", a}, {"bytes", hex(b.data(), b.size())}});
    s["frames"] = frames_json(c);
    doc["samples"].push_back(s);
  }
  std::ofstream(kHotspotFixtures[1]) << doc.dump(1) << "\n";
}
#endif
