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
#include "runtime/interleave.h"
#include "runtime/mem_reader.h"
#include "runtime/runtime_find.h"
#include "stack/tree.h"

#include "fake_memory.h"
#include "ready_child.h"
#include "skip.h"

using namespace jankbpf;
using namespace jankbpf::runtime;
using jankbpf::test::FakeMemory;

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
const std::string& hsspin_classes() {
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
    if (comm == name) found = static_cast<pid_t>(std::atoi(e->d_name));
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

std::vector<std::string> names(const JavaCapture& c) {
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
    // Compiled: sampled until middle() is (C2 compiles it in the background
    // after ~10,000 calls), at most 20 s.
    JavaCapture c;
    for (int tries = 0; tries < 100; ++tries) {
      jvm.stop_and_sample();
      c = w.walk(mem, static_cast<uint64_t>(jvm.tid), jvm.sample);
      jvm.resume();
      const JavaFrame* m = frame(c, 2);
      if (interpreted || (m && m->kind == JavaFrame::Kind::Compiled && m->name == "HsSpin.middle")) break;
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
      CHECK(frame(c, 1)->kind == JavaFrame::Kind::Inlined);  // helper() inlined into middle()
      CHECK(frame(c, 2)->kind == JavaFrame::Kind::Compiled);
    }
  }
}
#endif
