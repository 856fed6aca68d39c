// The stack library's parsers and output formats, on hand-made input:
// /proc/PID/maps, perf-PID.map (with junk), JIT names, /proc/kallsyms,
// ELF notes, the register table, demangling, the seed's tree text, the
// heaviest stack and the Firefox modules table. Plus the library on its
// own process (a C++ binary: demangled names, map_files).
#include <linux/perf_event.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "arch/regs.h"
#include "app/stack_text.h"
#include "stack/kallsyms.h"
#include "stack/maps.h"
#include "stack/module.h"
#include "stack/perf_map.h"
#include "stack/perf_sample.h"
#include "stack/resolver.h"
#include "stack/tree.h"
#include "skip.h"

using namespace jankbpf;
using namespace jankbpf::stack;

TEST_CASE("maps parser: fields, deleted files, junk lines", "[stack][parse]") {
  const char* text =
      "55d0c0a00000-55d0c0a01000 r--p 00000000 fe:00 1234   /usr/bin/app\n"
      "55d0c0a01000-55d0c0a05000 r-xp 00001000 fe:00 1234   /usr/bin/app\n"
      "7f0000000000-7f0000001000 r-xp 00000000 00:00 0 \n"
      "7f0000001000-7f0000002000 rwxp 00000000 00:01 77   /memfd:v8-code (deleted)\n"
      "7f0000002000-7f0000003000 r-xp 00002000 fe:00 99   /opt/lib/libgone.so (deleted)\n"
      "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0    [stack]\n"
      "7ffc000fe000-7ffc00100000 r-xp 00000000 00:00 0    [vdso]\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]\n"
      "garbage\n"
      "1000-0 r-xp 0 0:0 0\n"                          // end before start
      "zz-yy r-xp 00000000 00:00 0\n"                  // not hex
      "2000-3000 r-\n"                                 // short perms
      "55d0c0a00800-55d0c0a00900 r-xp 0 00:00 0 /x\n"  // overlaps the first
      "4000-5000 r-xp 00000000 fe:00 12 /usr/lib/with spaces in name.so\n";
  ProcMaps m = ProcMaps::parse(text);
  CHECK(m.bad_lines() == 5);
  REQUIRE(m.entries().size() == 9);
  const MapEntry* app = m.find(0x55d0c0a01234);
  REQUIRE(app);
  CHECK(app->path == "/usr/bin/app");
  CHECK(app->x);
  CHECK(app->pgoff == 0x1000);
  CHECK(app->inode == 1234);
  CHECK(app->file_backed());
  CHECK_FALSE(app->anon_exec());
  const MapEntry* anon = m.find(0x7f0000000010);
  REQUIRE(anon);
  CHECK(anon->anon_exec());
  const MapEntry* memfd = m.find(0x7f0000001010);
  REQUIRE(memfd);
  CHECK(memfd->deleted);
  CHECK(memfd->anon_exec());  // JIT through a memfd is still JIT
  const MapEntry* gone = m.find(0x7f0000002010);
  REQUIRE(gone);
  CHECK(gone->deleted);
  CHECK(gone->path == "/opt/lib/libgone.so");
  CHECK(gone->file_backed());
  CHECK(m.find(0x7ffc000fe100)->is_vdso());
  CHECK(m.find(0x4100)->path == "/usr/lib/with spaces in name.so");
  CHECK(m.find(0x55d0c0a05000) == nullptr);
  CHECK(m.find(0) == nullptr);
  CHECK(m.highest_user_end() == 0x7ffc00100000);
  // Nothing but junk.
  std::string junk(4096, '\xff');
  junk += "\n-\n--\n0-\n-0\n";
  CHECK(ProcMaps::parse(junk).empty());
}

TEST_CASE("perf map: Node names, junk lines tolerated, later entries win", "[stack][parse]") {
  const char* text =
      "7f1000000000 40 JS:*busyLoop /srv/app/main.js:10:3\n"
      "this line is junk\n"
      "\n"
      "0x7f1000000100 0x20 LazyCompile:~handler file:///srv/app/mod.mjs:2:15\r\n"
      "7f1000000200 zz Builtin:BadSize\n"
      "7f1000000300 0 ZeroSize\n"
      "7f1000000400\n"
      "7f1000000400 10\n"
      "7f1000000500 100 Function:~ /srv/app/anon.js:7:1\n"
      "7f1000000500 80 JS:^reused /srv/app/new.js:1:1\n"
      "7f1000000600 10 java.lang.String::hashCode\n"
      "ffffffffffffffff 10 Wraps\n";
  PerfMap pm = PerfMap::parse(text);
  CHECK(pm.size() == 5);
  CHECK(pm.bad_lines() == 6);
  auto e = pm.lookup(0x7f1000000010);
  REQUIRE(e);
  JitSymbol j = parse_jit_name(e->name);
  CHECK(j.function == "busyLoop");
  CHECK(j.file == "/srv/app/main.js");
  CHECK(j.line == 10);
  CHECK(j.column == 3);
  e = pm.lookup(0x7f1000000110);
  REQUIRE(e);
  j = parse_jit_name(e->name);
  CHECK(j.function == "handler");
  CHECK(j.file == "file:///srv/app/mod.mjs");
  CHECK(j.line == 2);
  CHECK(j.column == 15);
  // Two entries at one start: the later line is the code there now.
  e = pm.lookup(0x7f1000000510);
  REQUIRE(e);
  CHECK(parse_jit_name(e->name).function == "reused");
  // Past the newer (shorter) entry, the older one still covers.
  e = pm.lookup(0x7f10000005f0);
  REQUIRE(e);
  CHECK(parse_jit_name(e->name).function == "(anonymous)");
  CHECK(pm.lookup(0x7f1000000040) == nullptr);
  CHECK(pm.lookup(0x7f1000000300) == nullptr);
  j = parse_jit_name(pm.lookup(0x7f1000000600)->name);
  CHECK(j.function == "java.lang.String::hashCode");
  CHECK(j.file.empty());
  CHECK(parse_jit_name("JS:*get value /a.js:3:9").function == "get value");
  CHECK(parse_jit_name("Builtin:ArgumentsAdaptorTrampoline").function == "ArgumentsAdaptorTrampoline");
  CHECK(parse_jit_name("Script:~ /srv/x.js:1:1").function == "(anonymous)");
  CHECK(parse_jit_name("weird: name with colon").function == "weird: name with colon");
  CHECK(parse_jit_name("").function == "(anonymous)");
}

TEST_CASE("namespace pid from /proc/PID/status", "[stack][parse]") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/jankbpf-nspid-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  fs::create_directories(root + "/100");
  fs::create_directories(root + "/200");
  fs::create_directories(root + "/300");
  std::ofstream(root + "/100/status") << "Name:\tnode\nTgid:\t100\nNSpid:\t100\t7\t1\nPPid:\t1\n";
  std::ofstream(root + "/200/status") << "Name:\tx\nPid:\t200\n";
  std::ofstream(root + "/300/status") << "Name:\tx\nNSpid:\tjunk\n";
  CHECK(namespace_pid(root, 100) == 1);
  CHECK(namespace_pid(root, 200) == 200);
  CHECK(namespace_pid(root, 300) == 300);
  CHECK(namespace_pid(root, 400) == 400);
  fs::remove_all(root);
}

TEST_CASE("kallsyms: sorted lookup, modules, junk, hidden addresses", "[stack][parse]") {
  const char* text =
      "ffffffff81000000 T _text\n"
      "ffffffff81000100 T _stext\n"
      "ffffffff81200000 t schedule\n"
      "ffffffff81100000 T __schedule\n"
      "ffffffff81300000 D some_data\n"
      "junk line\n"
      "ffffffffzz T bad\n"
      "ffffffffc0000000 t ext4_read\t[ext4]\n"
      "ffffffffc0000400 t ext4_write\t[ext4]\n"
      "ffffffff81400000 T\n";
  Kallsyms k = Kallsyms::parse(text);
  CHECK(k.size() == 6);
  CHECK(k.bad_lines() == 3);
  auto h = k.lookup(0xffffffff81200010);
  REQUIRE(h);
  CHECK(h->name == "schedule");
  CHECK(h->offset == 0x10);
  CHECK(h->module.empty());
  CHECK(h->module_offset == 0x200010);
  h = k.lookup(0xffffffff81100005);
  REQUIRE(h);
  CHECK(h->name == "__schedule");
  h = k.lookup(0xffffffffc0000410);
  REQUIRE(h);
  CHECK(h->name == "ext4_write");
  CHECK(h->module == "ext4");
  CHECK(h->module_offset == 0x410);
  CHECK_FALSE(k.lookup(0x1000));
  CHECK_FALSE(k.lookup(0xffffffff81200000 + (2 << 20)));  // too far past any symbol
  Kallsyms hidden = Kallsyms::parse("0000000000000000 T _text\n0000000000000000 t schedule\n");
  CHECK(hidden.hidden());
  CHECK_FALSE(hidden.lookup(0x10));
  CHECK(Kallsyms::load("/nonexistent/kallsyms").size() == 0);
}

TEST_CASE("real /proc/kallsyms and kernel build-id", "[stack][parse]") {
  SKIP_UNLESS(::geteuid() == 0, "needs root (/proc/kallsyms shows addresses to root only)");
  Kallsyms k = Kallsyms::load("/proc/kallsyms");
  REQUIRE(k.size() > 1000);
  uint64_t addr = k.address_of("schedule");
  REQUIRE(addr != 0);
  auto h = k.lookup(addr + 4);
  REQUIRE(h);
  CHECK(h->name == "schedule");
  CHECK(h->offset == 4);
  std::string bid = kernel_build_id();
  if (!bid.empty()) CHECK(bid.size() >= 16);
}

TEST_CASE("ELF notes: build-id found, junk rejected", "[stack][parse]") {
  std::string notes;
  auto add = [&](uint32_t type, const std::string& name, const std::string& desc) {
    uint32_t h[3] = {static_cast<uint32_t>(name.size() + 1), static_cast<uint32_t>(desc.size()), type};
    notes.append(reinterpret_cast<char*>(h), 12);
    std::string n = name + '\0';
    n.resize((n.size() + 3) & ~size_t{3}, '\0');
    notes += n;
    std::string d = desc;
    d.resize((d.size() + 3) & ~size_t{3}, '\0');
    notes += d;
  };
  add(1, "Xen", "abcd");
  add(3, "GNU", std::string("\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67", 20));
  CHECK(build_id_from_notes(notes) == "0123456789abcdef0123456789abcdef01234567");
  CHECK(build_id_from_notes(notes.substr(0, notes.size() - 5)).empty());
  CHECK(build_id_from_notes(std::string(7, '\xff')).empty());
  std::string huge(12, '\0');
  uint32_t h[3] = {0xffffffff, 0xffffffff, 3};
  std::memcpy(huge.data(), h, 12);
  CHECK(build_id_from_notes(huge).empty());
}

TEST_CASE("register tables: masks and perf -> DWARF mapping", "[stack][parse]") {
  const RegTable& x = reg_table(Arch::X86_64);
  CHECK(x.sample_regs_user == 0xff01ff);
  CHECK(x.perf_to_dwarf[0] == 0);   // AX -> rax
  CHECK(x.perf_to_dwarf[1] == 3);   // BX -> rbx
  CHECK(x.perf_to_dwarf[2] == 2);   // CX -> rcx
  CHECK(x.perf_to_dwarf[3] == 1);   // DX -> rdx
  CHECK(x.perf_to_dwarf[6] == 6);   // BP -> rbp
  CHECK(x.perf_to_dwarf[7] == 7);   // SP -> rsp
  CHECK(x.perf_to_dwarf[8] == 16);  // IP -> return address column
  CHECK(x.perf_to_dwarf[9] == -1);  // FLAGS
  CHECK(x.perf_to_dwarf[23] == 15); // R15
  const RegTable& a = reg_table(Arch::Arm64);
  CHECK(a.sample_regs_user == 0x1ffffffff);
  CHECK(a.perf_to_dwarf[29] == 29);
  CHECK(a.perf_to_dwarf[30] == 30);  // LR = x30
  CHECK(a.perf_to_dwarf[31] == 31);  // SP
  CHECK(a.perf_to_dwarf[32] == -1);  // PC has no DWARF number
  CHECK(a.has_pac);

  std::vector<uint64_t> v(17);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 100 + i;
  auto r = decode_user_regs(Arch::X86_64, x.sample_regs_user, v);
  REQUIRE(r);
  CHECK(r->pc == 108);
  CHECK(r->sp == 107);
  CHECK(r->fp == 106);
  CHECK(r->dwarf[3] == 101);  // rbx from perf index 1
  CHECK(r->dwarf[8] == 109);  // r8 is the 10th value (after IP)
  CHECK_FALSE(decode_user_regs(Arch::X86_64, x.sample_regs_user, std::span(v).first(16)));
  // A mask without SP cannot start an unwind.
  CHECK_FALSE(decode_user_regs(Arch::X86_64, 0x100, std::span(v).first(1)));
  // Extra bits the table does not know (FLAGS, segments) are skipped.
  std::vector<uint64_t> w(20, 7);
  CHECK(decode_user_regs(Arch::X86_64, 0xff0fff, w));
}

TEST_CASE("demangling", "[stack][parse]") {
  CHECK(demangle("_ZN3foo3barEi") == "foo::bar(int)");
  CHECK(demangle("_ZN4OHOS3MMI9UDSSocket13OnReadPacketsERNS0_18CircleStreamBufferE") ==
        "OHOS::MMI::UDSSocket::OnReadPackets(OHOS::MMI::CircleStreamBuffer&)");
  CHECK(demangle("main") == "main");
  CHECK(demangle("_Zjunk!!") == "_Zjunk!!");
  CHECK(demangle("") == "");
}

namespace {

Frame native(const std::string& sym, uint64_t off, uint64_t sym_off, const std::string& mod = "/usr/bin/app") {
  Frame f;
  f.pc = 0x555500000000 + off;
  f.module = mod;
  f.build_id = "55679d09bcdea35bb1e0d4e1d9a3e58f";
  f.module_offset = off;
  f.symbol = sym;
  f.symbol_offset = sym_off;
  return f;
}

ResolvedStack stack_of(std::vector<Frame> leaf_first, char wait = 0) {
  ResolvedStack s;
  s.frames = std::move(leaf_first);
  s.wait_state = wait;
  return s;
}

}  // namespace

TEST_CASE("stack tree text follows the seed's format", "[stack][tree]") {
  Frame start = native("_start", 0x757c, 12);
  Frame main_f = native("main", 0x90a9, 396);
  Frame run = native("AppSpawnRun", 0xab5d, 100);
  Frame wait = native("__pthread_cond_timedwait", 0x107aec, 628, "/system/lib/ld-musl-aarch64.so.1");
  Frame nosym = native("", 0x731c0, 0, "/system/lib/ld-musl-aarch64.so.1");
  Frame js;
  js.pc = 0x7f0000001234;
  js.flags = kFrameJit;
  js.symbol = "wait2";
  js.file = "/entry/src/main/ets/pages/Index.js";
  js.line = 16;
  js.column = 12;
  Frame unknown_jit;
  unknown_jit.pc = 0x7f0000009999;
  unknown_jit.flags = kFrameJit;
  Frame k;
  k.pc = 0xffffffff811fb643;
  k.flags = kFrameKernel;
  k.module = "[kernel.kallsyms]";
  k.symbol = "schedule";
  k.symbol_offset = 35;
  k.build_id = "4a5a";

  StackTree t;
  for (int i = 0; i < 9; ++i) t.add(stack_of({wait, run, main_f, nosym, start}));
  t.add(stack_of({js, unknown_jit, run, main_f, nosym, start}));
  t.add(stack_of({k, wait, run, main_f, nosym, start}, 'S'));
  CHECK(t.samples() == 11);
  std::string text = t.render();
  INFO(text);
  const std::string expect =
      "11 #00 pc 0000757c /usr/bin/app(_start+12)(55679d09bcdea35bb1e0d4e1d9a3e58f)\n"
      "    11 #01 pc 000731c0 /system/lib/ld-musl-aarch64.so.1(55679d09bcdea35bb1e0d4e1d9a3e58f)\n"
      "        11 #02 pc 000090a9 /usr/bin/app(main+396)(55679d09bcdea35bb1e0d4e1d9a3e58f)\n"
      "            11 #03 pc 0000ab5d /usr/bin/app(AppSpawnRun+100)(55679d09bcdea35bb1e0d4e1d9a3e58f)\n"
      "                10 #04 pc 00107aec /system/lib/ld-musl-aarch64.so.1(__pthread_cond_timedwait+628)"
      "(55679d09bcdea35bb1e0d4e1d9a3e58f)\n"
      "                    1 #05 pc ffffffff811fb643 [kernel.kallsyms](schedule+35)(4a5a)\n"
      "                        1 #06 wait S (sleeping)\n"
      "                1 #04 pc 00007f0000009999 [jit]\n"
      "                    1 #05 at wait2 (/entry/src/main/ets/pages/Index.js:16:12)\n";
  CHECK(text == expect);
  // Heaviest: leaf first, the 9-sample path (it ends at the wait frame).
  std::string heavy = t.heaviest_stack();
  CHECK(heavy.rfind("#00 pc 00107aec /system/lib/ld-musl-aarch64.so.1(__pthread_cond_timedwait+628)", 0) == 0);
  CHECK(heavy.find("#04 pc 0000757c /usr/bin/app(_start+12)") != std::string::npos);
  CHECK(heavy.find("kernel") == std::string::npos);
  // Counts per level never exceed the samples.
  for (const auto& l : t.lines()) CHECK(l.count <= t.samples());
  // Source locations on request.
  Frame with_line = native("inner", 0x1234, 4);
  with_line.file = "/src/a.c";
  with_line.line = 42;
  CHECK(StackTree::format_frame(with_line, true) ==
        "pc 00001234 /usr/bin/app(inner+4)(55679d09bcdea35bb1e0d4e1d9a3e58f) [/src/a.c:42]");
  Frame inl = with_line;
  inl.flags |= kFrameInlined;
  CHECK(StackTree::format_frame(inl) == "pc 00001234 /usr/bin/app(inner)(55679d09bcdea35bb1e0d4e1d9a3e58f)");
  Frame lost;
  lost.pc = 0x1234;
  CHECK(StackTree::format_frame(lost) == "pc 0000000000001234 [unknown]");
}

TEST_CASE("stack tree: merge by pc or by function, heaviest follows the hot function", "[stack][tree]") {
  Frame main_f = native("main", 0x100, 10);
  Frame task = native("task", 0x200, 5);
  std::vector<Frame> leafs;
  for (int i = 0; i < 6; ++i) leafs.push_back(native("hot", 0x300 + static_cast<uint64_t>(i) * 4, static_cast<uint64_t>(i) * 4));
  Frame clock = native("clock_gettime", 0x20, 1, "[vdso]");
  Frame hot_call = native("hot", 0x340, 0x40);
  StackTree by_pc;
  StackTree by_fn(TreeOptions{TreeOptions::Merge::Function});
  for (int i = 0; i < 30; ++i) {
    auto s = stack_of({leafs[static_cast<size_t>(i) % 6], task, main_f});
    by_pc.add(s);
    by_fn.add(s);
  }
  for (int i = 0; i < 8; ++i) {
    auto s = stack_of({clock, hot_call, task, main_f});
    by_pc.add(s);
    by_fn.add(s);
  }
  // By pc: 6 leaf pcs of 5 samples, one call site of 8 -> still "hot".
  size_t hot_lines = 0;
  for (const auto& l : by_pc.lines())
    if (l.frame && l.frame->symbol == "hot") ++hot_lines;
  CHECK(hot_lines == 7);
  for (const auto& l : by_fn.lines())
    if (l.frame && l.frame->symbol == "hot") CHECK(l.count == 38);
  for (StackTree* t : {&by_pc, &by_fn}) {
    std::string h = t->heaviest_stack();
    INFO(h);
    CHECK(h.find("(hot+") < h.find("(task+"));
    CHECK(h.find("clock_gettime") == std::string::npos);
    CHECK(h.rfind("#00 ", 0) == 0);
    CHECK(h.substr(0, h.find('\n')).find("(hot+") != std::string::npos);
  }
  StackTree empty;
  CHECK(empty.render().empty());
  CHECK(empty.heaviest_stack().empty());
}

TEST_CASE("stack tree: an off-CPU capture weighs the samples its sleep stands for", "[stack][tree]") {
  // A frame that slept 800 ms in stalled_draw, then drew for two on-CPU
  // samples of 4 ms: counted once, the capture ties with the draw and the
  // heaviest path stops at their caller; weighed by its 200 periods, it
  // is the frame's heaviest path.
  Frame main_f = native("main", 0x100, 10);
  Frame draw = native("draw", 0x200, 5);
  Frame stalled = native("stalled_draw", 0x300, 8);
  Frame usleep_f = native("usleep", 0x40, 2, "/lib/libc.so.6");
  Frame fill = native("fill", 0x400, 4);
  ResolvedStack capture = stack_of({usleep_f, stalled, draw, main_f});
  capture.wait_state = 'S';
  for (uint32_t weight : {1u, 200u}) {
    StackTree t;
    t.add(capture, weight);
    t.add(stack_of({fill, draw, main_f}));
    t.add(stack_of({fill, draw, main_f}));
    INFO(weight << "\n" << t.heaviest_stack());
    CHECK(t.samples() == weight + 2);
    bool names_sleep = t.heaviest_stack().find("(stalled_draw+") != std::string::npos;
    CHECK(names_sleep == (weight > 1));
    for (const auto& l : t.lines()) CHECK(l.count <= t.samples());
  }
  StackTree none;
  none.add(capture, 0);  // weight 0 adds nothing
  CHECK(none.samples() == 0);
}

TEST_CASE("modules table: [path, build_id] and [index, hex offset] frames", "[stack][tree]") {
  ModuleTable mt;
  Frame a = native("main", 0xff0f, 1);
  Frame b = native("f", 0x10, 1, "/lib/libc.so.6");
  Frame inl = b;
  inl.flags |= kFrameInlined;
  Frame jit;
  jit.pc = 0x7f00000000ab;
  jit.flags = kFrameJit;
  auto frames = mt.frames(stack_of({inl, b, jit, a}));
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].module == 0);
  CHECK(frames[0].offset == "10");
  CHECK(frames[1].module == -1);
  CHECK(frames[1].offset == "7F00000000AB");
  CHECK(frames[2].module == 1);
  CHECK(frames[2].offset == "FF0F");
  REQUIRE(mt.modules().size() == 2);
  CHECK(mt.modules()[0].first == "/lib/libc.so.6");
  CHECK(mt.modules()[1].second == "55679d09bcdea35bb1e0d4e1d9a3e58f");
  CHECK(mt.index(a) == 1);
}

#if defined(__x86_64__)
namespace {

// Registers of this very thread in perf's x86_64 order (mask 0xff01ff),
// taken inside this noinline function.
__attribute__((noinline)) void capture_self(uint64_t* regs) {
  __asm__ volatile(
      "movq %%rax, 0(%0)\n\tmovq %%rbx, 8(%0)\n\tmovq %%rcx, 16(%0)\n\tmovq %%rdx, 24(%0)\n\t"
      "movq %%rsi, 32(%0)\n\tmovq %%rdi, 40(%0)\n\tmovq %%rbp, 48(%0)\n\tmovq %%rsp, 56(%0)\n\t"
      "movq %%r8, 72(%0)\n\tmovq %%r9, 80(%0)\n\tmovq %%r10, 88(%0)\n\tmovq %%r11, 96(%0)\n\t"
      "movq %%r12, 104(%0)\n\tmovq %%r13, 112(%0)\n\tmovq %%r14, 120(%0)\n\tmovq %%r15, 128(%0)\n\t"
      "leaq 0(%%rip), %%r11\n\tmovq %%r11, 64(%0)\n\t"
      :
      : "r"(regs)
      : "r11", "memory");
}

}  // namespace

TEST_CASE("this C++ process unwound live: demangled names, map_files, speed", "[stack][self]") {
  uint64_t regs[17];
  capture_self(regs);
  std::string maps_text;
  REQUIRE(read_small_file("/proc/self/maps", maps_text));
  ProcMaps maps = ProcMaps::parse(maps_text);
  const MapEntry* st = maps.find(regs[7]);
  REQUIRE(st);
  std::vector<uint8_t> stack(16384);
  uint64_t dyn = std::min<uint64_t>(stack.size(), st->end - regs[7]);
  std::memcpy(stack.data(), reinterpret_cast<const void*>(regs[7]), dyn);
  SampleInput in;
  in.pid = ::getpid();
  in.tid = ::getpid();
  in.regs_mask = reg_table(Arch::X86_64).sample_regs_user;
  in.regs = regs;
  in.stack = stack;
  in.stack_dyn_size = dyn;
  Resolver r;
  auto t0 = std::chrono::steady_clock::now();
  ResolvedStack s = r.resolve(in);
  auto t1 = std::chrono::steady_clock::now();
  std::string text;
  for (const auto& f : s.frames) text += StackTree::format_frame(f, true) + "\n";
  INFO(to_string(s.stop) << " " << s.error << "\n" << text);
  REQUIRE(s.frames.size() >= 5);
  CHECK(s.frames[0].symbol.find("capture_self") != std::string::npos);
  // Catch2's own C++ frames, demangled with their signatures.
  CHECK(text.find("Catch::RunContext::") != std::string::npos);
  CHECK(text.find("(main+") != std::string::npos);
  CHECK(s.frames.back().symbol == "_start");
  CHECK(s.stop == UnwindStop::Complete);
  for (int i = 0; i < 100; ++i) r.resolve(in);
  auto t2 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) r.resolve(in);
  auto t3 = std::chrono::steady_clock::now();
  // invalidate() ends the process's libdwfl session, which holds no
  // descriptor (libdwfl reads the modules' private copies); the modules'
  // files are held in a pool of at most kMaxElfSourceFds (issue 26).
  auto fds = [] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  size_t with_session = fds();
  r.invalidate(::getpid());
  size_t without = fds();
  CHECK(without == with_session);
  r.resolve(in);
  CHECK(fds() == with_session);
  CHECK(elf_source_fds_open() <= kMaxElfSourceFds);
  std::printf("[stack] self (%zu frames, %.0f MB C++ binary with DWARF): cold %.1f ms, warm %.1f us\n",
              s.frames.size(), static_cast<double>(std::filesystem::file_size("/proc/self/exe")) / 1e6,
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::micro>(t3 - t2).count() / 1000);
}
#endif

TEST_CASE("perf sample records: every field up to the user stack, cut records refused", "[stack][parse]") {
  const uint64_t type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                        PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW |
                        PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  const uint64_t mask = reg_table(Arch::X86_64).sample_regs_user;
  std::vector<uint64_t> words;
  words.push_back(0);  // header, filled below
  words.push_back(77);                                     // identifier
  words.push_back(0x401000);                               // ip
  words.push_back((uint64_t{1235} << 32) | 1234);          // pid, tid
  words.push_back(999);                                    // time
  words.push_back(3);                                      // cpu, res
  words.push_back(1000000);                                // period
  words.push_back(3);                                      // callchain nr
  words.push_back(static_cast<uint64_t>(PERF_CONTEXT_KERNEL));
  words.push_back(0xffffffff81000000);
  words.push_back(static_cast<uint64_t>(PERF_CONTEXT_USER));
  words.push_back(12);                                     // raw: u32 size (12) + 12 bytes = 16
  words.push_back(0);
  words.push_back(PERF_SAMPLE_REGS_ABI_64);
  for (int i = 0; i < 17; ++i) words.push_back(100 + static_cast<uint64_t>(i));
  words.push_back(32);                                     // stack size
  for (int i = 0; i < 4; ++i) words.push_back(0xabababababababab);
  words.push_back(24);                                     // dyn_size
  perf_event_header h{PERF_RECORD_SAMPLE, 0, static_cast<uint16_t>(words.size() * 8)};
  std::memcpy(&words[0], &h, sizeof h);
  std::span<const uint8_t> rec(reinterpret_cast<const uint8_t*>(words.data()), words.size() * 8);
  PerfSampleView v;
  REQUIRE(parse_perf_sample(rec, type, mask, v));
  CHECK(v.id == 77);
  CHECK(v.ip == 0x401000);
  CHECK(v.pid == 1234);
  CHECK(v.tid == 1235);
  CHECK(v.time == 999);
  CHECK(v.cpu == 3);
  CHECK(v.period == 1000000);
  REQUIRE(v.callchain.size() == 3);
  CHECK(v.callchain[1] == 0xffffffff81000000);
  CHECK(v.raw.size() == 12);
  CHECK(v.regs_abi == PERF_SAMPLE_REGS_ABI_64);
  REQUIRE(v.regs.size() == 17);
  CHECK(v.regs[16] == 116);
  CHECK(v.stack.size() == 32);
  CHECK(v.stack_dyn_size == 24);
  SampleInput in = to_sample_input(v, mask, Arch::X86_64);
  CHECK(in.pid == 1234);
  CHECK(in.regs.size() == 17);
  CHECK(in.kernel_callchain.size() == 3);
  // Any cut is refused, never over-read.
  for (size_t n = 0; n < rec.size(); n += 8) {
    std::vector<uint64_t> cut(words.begin(), words.begin() + static_cast<long>(n / 8));
    if (cut.empty()) cut.push_back(0);
    perf_event_header ch{PERF_RECORD_SAMPLE, 0, static_cast<uint16_t>(n)};
    std::memcpy(&cut[0], &ch, sizeof ch);
    CHECK_FALSE(parse_perf_sample({reinterpret_cast<const uint8_t*>(cut.data()), n}, type, mask, v));
  }
  // A lying callchain length, stack size or header size.
  std::vector<uint64_t> bad = words;
  bad[7] = 1ull << 40;
  CHECK_FALSE(parse_perf_sample({reinterpret_cast<const uint8_t*>(bad.data()), bad.size() * 8}, type, mask, v));
  bad = words;
  bad[13 + 1 + 17] = 1ull << 40;
  CHECK_FALSE(parse_perf_sample({reinterpret_cast<const uint8_t*>(bad.data()), bad.size() * 8}, type, mask, v));
  CHECK_FALSE(parse_perf_sample(rec.subspan(0, rec.size() - 8), type, mask, v));
  CHECK_FALSE(parse_perf_sample(rec.subspan(1), type, mask, v));  // misaligned
  CHECK_FALSE(parse_perf_sample(rec, type | PERF_SAMPLE_READ, mask, v));
  // abi NONE (a kernel thread): no registers follow.
  std::vector<uint64_t> kt = {0, (uint64_t{9} << 32) | 9, PERF_SAMPLE_REGS_ABI_NONE, 0};
  perf_event_header kh{PERF_RECORD_SAMPLE, 0, static_cast<uint16_t>(kt.size() * 8)};
  std::memcpy(&kt[0], &kh, sizeof kh);
  REQUIRE(parse_perf_sample({reinterpret_cast<const uint8_t*>(kt.data()), kt.size() * 8},
                            PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER, mask, v));
  CHECK(v.regs.empty());
  CHECK(v.stack.empty());
  CHECK(Resolver().resolve(to_sample_input(v, mask)).stop == UnwindStop::NoUserRegs);
}

TEST_CASE("stack fingerprint: the function path most samples agree on, no pcs", "[stack][tree]") {
  Frame main_f = native("main", 0x100, 10);
  Frame outer = native("outer", 0x200, 5);
  Frame clock = native("clock_gettime", 0x20, 1, "[vdso]");
  // Run 1: the hot loop in `inner` and the clock it calls, 11 to 9;
  // run 2: 9 to 11, at other pcs. Their heaviest paths end at different
  // leaves and differ in every pc; the fingerprint is the same.
  auto run = [&](int in_loop, int in_clock, uint64_t pc_shift) {
    StackTree t;
    for (int i = 0; i < in_loop; ++i)
      t.add(stack_of({native("inner", 0x300 + pc_shift + static_cast<uint64_t>(i % 3) * 4, 4 + pc_shift), outer, main_f}));
    for (int i = 0; i < in_clock; ++i)
      t.add(stack_of({clock, native("inner", 0x340 + pc_shift, 0x40), outer, main_f}));
    return t;
  };
  StackTree a = run(11, 9, 0), b = run(9, 11, 8);
  CHECK(a.heaviest_stack() != b.heaviest_stack());
  CHECK(a.fingerprint() == b.fingerprint());
  CHECK(a.fingerprint() == "/usr/bin/app!main\n/usr/bin/app!outer\n/usr/bin/app!inner");
  // Another freeze in the same process is another fingerprint.
  StackTree c;
  for (int i = 0; i < 10; ++i) c.add(stack_of({native("other", 0x500, 2), main_f}));
  CHECK(c.fingerprint() != a.fingerprint());
  // Blocked samples name the wait; no samples, no fingerprint.
  StackTree w;
  for (int i = 0; i < 3; ++i) w.add(stack_of({native("pipe_wait", 0x600, 1), main_f}, 'S'));
  CHECK(!w.fingerprint().empty());
  CHECK(StackTree().fingerprint().empty());
}

TEST_CASE("a waker's kernel stack tells an interrupt from a task", "[stack][parse]") {
  Kallsyms k = Kallsyms::parse(
      "ffffffff81000000 T try_to_wake_up\n"
      "ffffffff81001000 T hrtimer_wakeup\n"
      "ffffffff81002000 T __hrtimer_run_queues\n"
      "ffffffff81003000 T hrtimer_interrupt\n"
      "ffffffff81004000 T __sysvec_apic_timer_interrupt\n"
      "ffffffff81005000 T pipe_write\n"
      "ffffffff81006000 T vfs_write\n"
      "ffffffff81007000 T handle_softirqs\n"
      "ffffffff81008000 T el0_interrupt\n"
      "ffffffff81009000 T ksys_write\n");
  auto at = [](std::initializer_list<uint64_t> offs) {
    std::vector<uint64_t> v;
    for (uint64_t o : offs) v.push_back(0xffffffff81000000 + o + 0x10);
    v.push_back(0);
    return v;
  };
  // A timer's wakeup (x86_64 6.1 and 6.18 shape): the interrupt's task is no waker.
  auto timer = at({0x0, 0x1000, 0x2000, 0x3000, 0x4000});
  CHECK(jankbpf::interrupt_context(k, timer.data(), timer.size()));
  // A softirq (network receive) and an arm64 IRQ from user mode.
  auto soft = at({0x0, 0x7000});
  CHECK(jankbpf::interrupt_context(k, soft.data(), soft.size()));
  auto arm = at({0x0, 0x8000});
  CHECK(jankbpf::interrupt_context(k, arm.data(), arm.size()));
  // A thread writing to a pipe: a task's wakeup, its user stack is the waker's.
  auto pipe = at({0x0, 0x5000, 0x6000, 0x9000});
  CHECK_FALSE(jankbpf::interrupt_context(k, pipe.data(), pipe.size()));
  // Unknown addresses and an empty stack: nothing says interrupt.
  std::vector<uint64_t> none = {0x1234, 0};
  CHECK_FALSE(jankbpf::interrupt_context(k, none.data(), none.size()));
}
