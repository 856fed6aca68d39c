// The unwinder on captured samples replayed offline: aarch64 fixtures
// (tests/fixtures/aarch64/, made by scripts/capture-aarch64-fixtures.sh
// under qemu-aarch64-static, one of them with pointer authentication) and
// an x86_64 self-capture run here, each replayed through a fake /proc tree
// (PID/maps + PID/root/<path> -> the binary). Then the same samples
// damaged: truncated stack, garbage registers, a broken ELF.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "arch/regs.h"
#include "stack/elf_image.h"
#include "stack/maps.h"
#include "stack/resolver.h"
#include "stack/tree.h"
#include "skip.h"

using namespace jankbpf;
using namespace jankbpf::stack;
namespace fs = std::filesystem;

namespace {

constexpr pid_t kFakePid = 4242;

struct Capture {
  Arch arch = Arch::X86_64;
  uint64_t abi = 0, mask = 0, dyn_size = 0;
  std::vector<uint64_t> regs;
  std::vector<uint8_t> stack;
  std::string maps;
  std::string binary;  // the captured program, as a file here
  std::string binary_path_in_maps;

  SampleInput input() const {
    SampleInput in;
    in.pid = kFakePid;
    in.tid = kFakePid;
    in.arch = arch;
    in.regs_abi = abi;
    in.regs_mask = mask;
    in.regs = regs;
    in.stack = stack;
    in.stack_dyn_size = dyn_size;
    return in;
  }
  uint64_t reg(int perf_index) const {
    int i = 0;
    for (int b = 0; b < perf_index; ++b)
      if (mask & (uint64_t{1} << b)) ++i;
    return regs.at(static_cast<size_t>(i));
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool load_capture(const std::string& dir, const std::string& binary, Capture& c) {
  std::ifstream f(dir + "/regs.txt");
  if (!f) return false;
  std::string key;
  while (f >> key) {
    if (key == "arch") {
      std::string a;
      f >> a;
      c.arch = a == "aarch64" ? Arch::Arm64 : Arch::X86_64;
    } else if (key == "abi") {
      f >> c.abi;
    } else if (key == "mask") {
      std::string m;
      f >> m;
      c.mask = std::stoull(m, nullptr, 16);
    } else if (key == "dyn_size") {
      f >> c.dyn_size;
    } else if (key == "regs") {
      std::string v;
      while (f >> v) c.regs.push_back(std::stoull(v, nullptr, 16));
    }
  }
  std::string st = slurp(dir + "/stack.bin");
  c.stack.assign(st.begin(), st.end());
  c.maps = slurp(dir + "/maps");
  c.binary = fs::absolute(binary).string();
  // The captured program is the first executable file mapping.
  std::istringstream ms(c.maps);
  std::string line;
  while (std::getline(ms, line)) {
    std::istringstream ls(line);
    std::string range, perms, off, dev, inode, path;
    ls >> range >> perms >> off >> dev >> inode >> path;
    if (perms.size() == 4 && perms[2] == 'x' && !path.empty() && path[0] == '/') {
      c.binary_path_in_maps = path;
      break;
    }
  }
  return !c.regs.empty() && c.stack.size() == 16384 && !c.binary_path_in_maps.empty();
}

// A /proc look-alike for one fake process: PID/maps and PID/root/<path>
// symlinked to the real files.
struct FakeProc {
  std::string root;
  explicit FakeProc(const std::string& maps, const std::vector<std::pair<std::string, std::string>>& files) {
    char tmpl[] = "/tmp/jankbpf-fakeproc-XXXXXX";
    root = ::mkdtemp(tmpl);
    std::string pid_dir = root + "/" + std::to_string(kFakePid);
    fs::create_directories(pid_dir + "/root");
    std::ofstream(pid_dir + "/maps") << maps;
    for (const auto& [path, target] : files) {
      fs::path p = pid_dir + "/root" + path;
      fs::create_directories(p.parent_path());
      // Hard links (copies across filesystems), not symlinks: jankbpf never
      // follows a link out of a process's root.
      std::error_code ec;
      fs::create_hard_link(target, p, ec);
      if (ec) fs::copy_file(target, p);
    }
  }
  ~FakeProc() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  ResolverOptions options() const {
    ResolverOptions o;
    o.proc_root = root;
    o.kallsyms_path = "/dev/null";
    o.host_root = "";
    o.verify_inode = false;  // the files are copies of the captured ones
    return o;
  }
};

std::vector<std::string> symbols(const ResolvedStack& s) {
  std::vector<std::string> v;
  for (const auto& f : s.frames) v.push_back(f.symbol);
  return v;
}

std::string dump(const ResolvedStack& s) {
  std::string out = "stop=" + std::string(to_string(s.stop)) + " " + s.error + "\n";
  for (const auto& f : s.frames) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%#llx ", static_cast<unsigned long long>(f.pc));
    out += "  " + std::string(buf) + StackTree::format_frame(f, true) + (f.inlined() ? " [inlined]" : "") + "\n";
  }
  return out;
}

// The frames the self-capture target must unwind to, leaf first.
void check_deep_chain(const ResolvedStack& s) {
  INFO(dump(s));
  auto names = symbols(s);
  std::vector<std::string> want = {"capture", "inner", "helper", "middle", "outer", "main"};
  size_t at = 0;
  std::vector<size_t> pos;
  for (const auto& w : want) {
    while (at < names.size() && names[at] != w) ++at;
    REQUIRE(at < names.size());
    pos.push_back(at++);
  }
  CHECK(pos[0] == 0);  // the leaf is capture itself
  // helper is inlined into middle: same pc, flagged, right before it.
  const Frame& helper = s.frames[pos[2]];
  const Frame& middle = s.frames[pos[3]];
  CHECK(helper.inlined());
  CHECK(pos[3] == pos[2] + 1);
  CHECK(helper.pc == middle.pc);
  CHECK(!middle.inlined());
  CHECK(middle.symbol_offset > 0);
  // Source lines from DWARF; the inlined call site is in middle's line.
  CHECK(s.frames[pos[1]].file.find("stack_selfcapture.c") != std::string::npos);
  CHECK(s.frames[pos[1]].line > 0);
  CHECK(helper.line > 0);
  CHECK(middle.line > 0);
  CHECK(middle.line != helper.line);
  // Outermost: the C runtime's entry point, and the unwind is complete.
  CHECK(names.back() == "_start");
  CHECK(s.stop == UnwindStop::Complete);
  CHECK_FALSE(s.truncated);
  for (const auto& f : s.frames) {
    CHECK(!f.build_id.empty());
    CHECK(!f.module.empty());
    CHECK_FALSE(f.jit());
  }
}

struct FixtureCase {
  const char* name;
};

}  // namespace

TEST_CASE("aarch64 fixtures from qemu unwind main -> outer -> middle -> inner", "[stack][aarch64]") {
  for (const char* name : {"static", "static-pie", "pac"}) {
    DYNAMIC_SECTION("fixture " << name) {
      std::string dir = std::string("tests/fixtures/aarch64/") + name;
      Capture c;
      REQUIRE(load_capture(dir, dir + "/stack_selfcapture", c));
      REQUIRE(c.arch == Arch::Arm64);
      REQUIRE(c.mask == reg_table(Arch::Arm64).sample_regs_user);
      FakeProc proc(c.maps, {{c.binary_path_in_maps, c.binary}});
      Resolver r(proc.options());
      ResolvedStack s = r.resolve(c.input());
      check_deep_chain(s);

      const ProcMaps maps = ProcMaps::parse(c.maps);
      const MapEntry* text = maps.find(s.frames[0].pc);
      REQUIRE(text);
      if (std::string(name) == "static-pie") {
        // ET_DYN loaded at the mapping: module offsets are pc - load bias.
        CHECK(text->start == 0x5500000000);
        for (const auto& f : s.frames) CHECK(f.module_offset == f.pc - text->start);
      } else {
        for (const auto& f : s.frames) CHECK(f.module_offset == f.pc);  // ET_EXEC: bias 0
      }
      if (std::string(name) == "pac") {
        // The fixture really holds signed return addresses: LR and saved
        // x30 slots carry bits above the VA size; no frame pc does.
        uint64_t lr = c.reg(30);
        CHECK((lr >> 48) != 0);
        for (const auto& f : s.frames) CHECK((f.pc >> 40) == 0);
      }
    }
  }
}

TEST_CASE("aarch64 fixture: stack window cut short gives a truncated stack, never invented frames",
          "[stack][aarch64]") {
  std::string dir = "tests/fixtures/aarch64/pac";
  Capture c;
  REQUIRE(load_capture(dir, dir + "/stack_selfcapture", c));
  FakeProc proc(c.maps, {{c.binary_path_in_maps, c.binary}});
  Resolver r(proc.options());
  ResolvedStack full = r.resolve(c.input());
  REQUIRE(full.stop == UnwindStop::Complete);
  auto full_names = symbols(full);
  size_t shorter = 0;
  for (uint64_t window : {0ull, 8ull, 16ull, 64ull, 128ull, 256ull, 512ull, 1024ull, 2048ull}) {
    if (window >= c.dyn_size) continue;
    Capture cut = c;
    cut.dyn_size = window;
    ResolvedStack s = r.resolve(cut.input());
    INFO("window " << window << "\n" << dump(s));
    REQUIRE(!s.frames.empty());
    if (s.stop == UnwindStop::Complete) {
      // The window held every frame's CFA: the same stack as with all of it.
      CHECK(symbols(s) == full_names);
      continue;
    }
    CHECK(s.truncated);
    CHECK(s.stop == UnwindStop::StackTruncated);
    CHECK((s.frames.back().flags & kFrameTruncated) != 0);
    // A prefix of the real stack: nothing made up past the window.
    REQUIRE(s.frames.size() <= full.frames.size());
    for (size_t i = 0; i < s.frames.size(); ++i) {
      CHECK(s.frames[i].pc == full.frames[i].pc);
      CHECK(s.frames[i].symbol == full_names[i]);
    }
    if (s.frames.size() < full.frames.size()) ++shorter;
  }
  CHECK(shorter >= 3);
}

TEST_CASE("garbage registers and stacks give partial stacks, no crash", "[stack][corrupt]") {
  std::string dir = "tests/fixtures/aarch64/static";
  Capture c;
  REQUIRE(load_capture(dir, dir + "/stack_selfcapture", c));
  FakeProc proc(c.maps, {{c.binary_path_in_maps, c.binary}});
  Resolver r(proc.options());
  std::mt19937_64 rng(12345);
  for (int round = 0; round < 300; ++round) {
    Capture g = c;
    switch (round % 4) {
      case 0:  // every register random
        for (auto& v : g.regs) v = rng();
        break;
      case 1:  // random registers but a plausible pc inside the text
        for (auto& v : g.regs) v = rng();
        g.regs[32] = 0x400000 + rng() % 0x8f000;
        g.regs[31] = c.regs[31] + (rng() % 64) * 8;
        break;
      case 2:  // real registers, stack bytes scrambled
        for (auto& b : g.stack) b = static_cast<uint8_t>(rng());
        break;
      case 3:  // real stack, scrambled stack words pointing back into the stack
        for (size_t i = 0; i + 8 <= g.stack.size(); i += 8) {
          uint64_t v = rng() % 3 == 0 ? c.regs[31] + rng() % 4096 : 0x400000 + rng() % 0x8f000;
          std::memcpy(&g.stack[i], &v, 8);
        }
        break;
    }
    ResolvedStack s = r.resolve(g.input());
    REQUIRE(!s.frames.empty());
    CHECK(s.frames.size() <= r.options().max_frames);
    if (s.stop != UnwindStop::Complete) CHECK(s.truncated);
  }
  // Mask/values mismatch and odd ABIs are refused cleanly.
  Capture bad = c;
  bad.regs.pop_back();
  CHECK(r.resolve(bad.input()).stop == UnwindStop::BadRegisters);
  bad = c;
  bad.abi = 1;
  CHECK(r.resolve(bad.input()).stop == UnwindStop::Unsupported);
  bad.abi = 0;
  CHECK(r.resolve(bad.input()).stop == UnwindStop::NoUserRegs);
  bad = c;
  bad.stack.clear();
  bad.dyn_size = 99999;  // dyn_size larger than the data: only the data counts
  ResolvedStack s = r.resolve(bad.input());
  CHECK(!s.frames.empty());
  CHECK(s.truncated);
}

TEST_CASE("damaged ELF files give partial stacks, no crash", "[stack][corrupt]") {
  std::string dir = "tests/fixtures/aarch64/static";
  Capture c;
  REQUIRE(load_capture(dir, dir + "/stack_selfcapture", c));
  std::string good = slurp(c.binary);
  std::mt19937_64 rng(777);
  char tmpl[] = "/tmp/jankbpf-badelf-XXXXXX";
  std::string tmp = ::mkdtemp(tmpl);
  std::vector<std::pair<std::string, std::string>> variants;
  variants.push_back({"empty", ""});
  variants.push_back({"header-only", good.substr(0, 64)});
  variants.push_back({"half", good.substr(0, good.size() / 2)});
  variants.push_back({"no-section-headers", good.substr(0, good.size() - 4096)});
  {
    std::string v = good;  // section header offset pointing past the end
    uint64_t shoff = ~uint64_t{0} - 100;
    std::memcpy(&v[0x28], &shoff, 8);
    variants.push_back({"bad-shoff", v});
  }
  {
    std::string v = good;  // program header table garbage
    for (size_t i = 64; i < 64 + 56 * 6 && i < v.size(); ++i) v[i] = static_cast<char>(rng());
    variants.push_back({"bad-phdrs", v});
  }
  for (int k = 0; k < 6; ++k) {
    std::string v = good;  // random bytes everywhere past the ELF header
    for (int i = 0; i < 4000; ++i) v[64 + rng() % (v.size() - 64)] = static_cast<char>(rng());
    variants.push_back({"scrambled-" + std::to_string(k), v});
  }
  {
    std::string v = good;  // whole blocks wiped (eh_frame, symtab, strings, DWARF...)
    for (size_t off = 4096; off + 8192 < v.size(); off += 65536) std::memset(&v[off], 0xff, 8192);
    variants.push_back({"wiped-blocks", v});
  }
  for (const auto& [name, bytes] : variants) {
    DYNAMIC_SECTION("variant " << name) {
      std::string path = tmp + "/" + name;
      std::ofstream(path, std::ios::binary) << bytes;
      FakeProc proc(c.maps, {{c.binary_path_in_maps, path}});
      Resolver r(proc.options());
      ResolvedStack s = r.resolve(c.input());
      INFO(dump(s));
      REQUIRE(!s.frames.empty());
      CHECK(s.frames[0].pc == c.reg(32));
      // Unnamed frames still say where they are: module + offset.
      CHECK(s.frames[0].module == c.binary_path_in_maps);
      StackTree t;
      t.add(s);
      CHECK(!t.render().empty());
    }
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

TEST_CASE("x86_64 self-capture replayed offline: inlined frames, lines, complete stack", "[stack][x86]") {
  SKIP_UNLESS(host_arch().arch == Arch::X86_64, "captures itself: an x86_64 host only");
  std::string src = "tests/apps/stack_selfcapture.c";
  char tmpl[] = "/tmp/jankbpf-selfcap-XXXXXX";
  std::string tmp = ::mkdtemp(tmpl);
  std::string bin = tmp + "/stack_selfcapture";
  REQUIRE(std::system(("gcc -O2 -g -fomit-frame-pointer -pthread -Wall " + src + " -o " + bin + " -lm").c_str()) == 0);
  REQUIRE(std::system((bin + " " + tmp + "/out").c_str()) == 0);
  Capture c;
  REQUIRE(load_capture(tmp + "/out", bin, c));
  // Every file the process mapped is reachable through root/ as on the host.
  std::vector<std::pair<std::string, std::string>> files;
  const ProcMaps maps = ProcMaps::parse(c.maps);
  for (const auto& m : maps.entries())
    if (m.file_backed() && std::none_of(files.begin(), files.end(), [&](auto& f) { return f.first == m.path; }))
      files.push_back({m.path, m.path});
  FakeProc proc(c.maps, files);
  Resolver r(proc.options());
  ResolvedStack s = r.resolve(c.input());
  check_deep_chain(s);
  // Speed on this offline sample (the live test measures the real thing).
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) r.resolve(c.input());
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 1000;
  std::printf("[stack] warm resolve (x86_64 self-capture, %zu frames): %.1f us\n", s.frames.size(), us);
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

TEST_CASE("maps re-read on an unknown pc (dlopen, exec) and on invalidate()", "[stack][aarch64]") {
  std::string dir = "tests/fixtures/aarch64/static";
  Capture c;
  REQUIRE(load_capture(dir, dir + "/stack_selfcapture", c));
  // The same process before its text was mapped (as if dlopen'ed later).
  std::string partial;
  std::istringstream ms(c.maps);
  for (std::string line; std::getline(ms, line);)
    if (line.find(" r-xp ") == std::string::npos || line.find('/') == std::string::npos) partial += line + "\n";
  FakeProc proc(partial, {{c.binary_path_in_maps, c.binary}});
  std::string maps_file = proc.root + "/" + std::to_string(kFakePid) + "/maps";
  Resolver r(proc.options());
  ResolvedStack before = r.resolve(c.input());
  CHECK(before.stop != UnwindStop::Complete);
  CHECK(before.frames.front().symbol.empty());
  std::ofstream(maps_file) << c.maps;
  ::usleep(static_cast<useconds_t>(r.options().maps_refresh_interval.count() * 1000 + 20000));
  ResolvedStack after = r.resolve(c.input());
  INFO(dump(after));
  CHECK(after.stop == UnwindStop::Complete);
  CHECK(after.frames.front().symbol == "capture");
  // Back to the partial maps: only an explicit invalidate() notices at once
  // (the pc is still covered by what we had).
  std::ofstream(maps_file) << partial;
  CHECK(r.resolve(c.input()).stop == UnwindStop::Complete);
  r.invalidate(kFakePid);
  CHECK(r.resolve(c.input()).stop != UnwindStop::Complete);
  CHECK(r.stats().maps_reloads >= 3);
}

TEST_CASE("an exiting process's empty maps never replace the maps its samples were taken with",
          "[stack][aarch64]") {
  std::string dir = "tests/fixtures/aarch64/static";
  Capture c;
  REQUIRE(load_capture(dir, dir + "/stack_selfcapture", c));
  FakeProc proc(c.maps, {{c.binary_path_in_maps, c.binary}});
  std::string maps_file = proc.root + "/" + std::to_string(kFakePid) + "/maps";
  Resolver r(proc.options());
  r.prepare(kFakePid, Arch::Arm64);
  // A zombie's /proc/PID/maps reads empty; its queued samples are older.
  std::ofstream(maps_file, std::ios::trunc).flush();
  // An address in no mapping makes the resolver look at the maps again.
  ::usleep(static_cast<useconds_t>(r.options().maps_refresh_interval.count() * 1000 + 20000));
  const uint64_t nowhere[] = {0x10};
  r.symbolize_user(kFakePid, Arch::Arm64, nowhere);
  CHECK(r.stats().maps_reloads >= 2);
  ResolvedStack s = r.resolve(c.input());
  INFO(dump(s));
  CHECK(s.stop == UnwindStop::Complete);
  CHECK(s.frames.front().symbol == "capture");
}

TEST_CASE("separate debug files: .build-id in the target's root, .gnu_debuglink, none", "[stack][x86]") {
  SKIP_UNLESS(host_arch().arch == Arch::X86_64, "captures itself: an x86_64 host only");
  SKIP_UNLESS(std::system("command -v objcopy >/dev/null 2>&1") == 0, "needs objcopy (binutils)");
  std::string src = "tests/apps/stack_selfcapture.c";
  char tmpl[] = "/tmp/jankbpf-debuglink-XXXXXX";
  std::string tmp = ::mkdtemp(tmpl);
  std::string bin = tmp + "/stack_selfcapture";
  REQUIRE(std::system(("gcc -O2 -g -fomit-frame-pointer -pthread -Wall " + src + " -o " + bin + " -lm").c_str()) == 0);
  REQUIRE(std::system((bin + " " + tmp + "/out").c_str()) == 0);
  // As distributions ship it: the binary stripped of everything, the
  // symbols and DWARF in a separate file named by build-id and debuglink.
  std::string dbg = tmp + "/stack_selfcapture.debug";
  std::string stripped = tmp + "/stripped";
  REQUIRE(std::system(("objcopy --only-keep-debug " + bin + " " + dbg).c_str()) == 0);
  REQUIRE(std::system(("objcopy --strip-all --add-gnu-debuglink=" + dbg + " " + bin + " " + stripped).c_str()) == 0);
  auto img = ElfImage::open_path(stripped);
  REQUIRE(img);
  CHECK_FALSE(img->has_symtab());
  CHECK(img->debuglink() == "stack_selfcapture.debug");
  std::string bid = img->build_id();
  REQUIRE(bid.size() > 2);
  Capture c;
  REQUIRE(load_capture(tmp + "/out", bin, c));
  const ProcMaps maps = ProcMaps::parse(c.maps);
  auto files_with = [&](std::vector<std::pair<std::string, std::string>> extra) {
    std::vector<std::pair<std::string, std::string>> files = {{c.binary_path_in_maps, stripped}};
    for (const auto& m : maps.entries())
      if (m.file_backed() && m.path != c.binary_path_in_maps &&
          std::none_of(files.begin(), files.end(), [&](auto& f) { return f.first == m.path; }))
        files.push_back({m.path, m.path});
    for (auto& e : extra) files.push_back(std::move(e));
    return files;
  };
  SECTION("no debug file: module, build-id and offset, no names") {
    FakeProc proc(c.maps, files_with({}));
    Resolver r(proc.options());
    ResolvedStack s = r.resolve(c.input());
    INFO(dump(s));
    CHECK(s.stop == UnwindStop::Complete);  // .eh_frame stays in stripped binaries
    const Frame& leaf = s.frames.front();
    CHECK(leaf.symbol.empty());
    CHECK(leaf.module == c.binary_path_in_maps);
    CHECK(leaf.build_id == bid);
    CHECK(leaf.module_offset > 0);
    StackTree t;
    t.add(s);
    CHECK(t.render().find(c.binary_path_in_maps + "(" + bid + ")") != std::string::npos);
  }
  SECTION("build-id path under the target's root") {
    FakeProc proc(c.maps,
                  files_with({{"/usr/lib/debug/.build-id/" + bid.substr(0, 2) + "/" + bid.substr(2) + ".debug", dbg}}));
    Resolver r(proc.options());
    check_deep_chain(r.resolve(c.input()));
  }
  SECTION(".gnu_debuglink in .debug/ next to the binary") {
    std::string d = c.binary_path_in_maps.substr(0, c.binary_path_in_maps.rfind('/'));
    FakeProc proc(c.maps, files_with({{d + "/.debug/stack_selfcapture.debug", dbg}}));
    Resolver r(proc.options());
    check_deep_chain(r.resolve(c.input()));
  }
  SECTION("a debug file of another build is refused") {
    std::string other = tmp + "/other.debug";
    REQUIRE(std::system(("objcopy --only-keep-debug /bin/true " + other + " 2>/dev/null").c_str()) == 0);
    FakeProc proc(c.maps,
                  files_with({{"/usr/lib/debug/.build-id/" + bid.substr(0, 2) + "/" + bid.substr(2) + ".debug", other}}));
    Resolver r(proc.options());
    CHECK(r.resolve(c.input()).frames.front().symbol.empty());
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

namespace {

// capture <- jit_target <- [JIT: jitTrampoline] <- run_jit <- main ... _start
void check_jit_chain(const ResolvedStack& s) {
  INFO(dump(s));
  auto names = symbols(s);
  REQUIRE(names.size() >= 6);
  CHECK(names[0] == "capture");
  CHECK(names[1] == "jit_target");
  CHECK(names[2] == "jitTrampoline");
  CHECK(names[3] == "run_jit");
  CHECK(names[4] == "main");
  CHECK(names.back() == "_start");
  const Frame& j = s.frames[2];
  CHECK(j.jit());
  CHECK(j.module.empty());
  CHECK(j.file == "/srv/app/jit.js");
  CHECK(j.line == 3);
  CHECK(j.column == 5);
  CHECK(s.stop == UnwindStop::Complete);
  StackTree t;
  t.add(s);
  CHECK(t.render().find("#0" + std::to_string(names.size() - 3) + " at jitTrampoline (/srv/app/jit.js:3:5)") !=
        std::string::npos);
}

}  // namespace

TEST_CASE("aarch64 fixtures through JIT code: frame records, then CFI again", "[stack][aarch64]") {
  for (const char* name : {"static", "static-pie", "pac"}) {
    DYNAMIC_SECTION("fixture " << name) {
      std::string dir = std::string("tests/fixtures/aarch64/") + name;
      Capture c;
      REQUIRE(load_capture(dir + "/jit", dir + "/stack_selfcapture", c));
      FakeProc proc(c.maps, {{c.binary_path_in_maps, c.binary},
                             {"/tmp/perf-" + std::to_string(kFakePid) + ".map", fs::absolute(dir + "/jit/perf.map")}});
      Resolver r(proc.options());
      check_jit_chain(r.resolve(c.input()));
      // Without the perf map the JIT frame is still there, unnamed.
      FakeProc bare(c.maps, {{c.binary_path_in_maps, c.binary}});
      Resolver r2(bare.options());
      ResolvedStack s = r2.resolve(c.input());
      REQUIRE(s.frames.size() >= 6);
      CHECK(s.frames[2].jit());
      CHECK(s.frames[2].symbol.empty());
      CHECK(s.frames[3].symbol == "run_jit");
      CHECK(s.stop == UnwindStop::Complete);
    }
  }
}

TEST_CASE("x86_64 self-capture through JIT code replayed offline", "[stack][x86]") {
  SKIP_UNLESS(host_arch().arch == Arch::X86_64, "captures itself: an x86_64 host only");
  std::string src = "tests/apps/stack_selfcapture.c";
  char tmpl[] = "/tmp/jankbpf-selfjit-XXXXXX";
  std::string tmp = ::mkdtemp(tmpl);
  std::string bin = tmp + "/stack_selfcapture";
  REQUIRE(std::system(("gcc -O2 -g -fomit-frame-pointer -pthread -Wall " + src + " -o " + bin + " -lm").c_str()) == 0);
  REQUIRE(std::system((bin + " " + tmp + "/out jit").c_str()) == 0);
  Capture c;
  REQUIRE(load_capture(tmp + "/out", bin, c));
  std::vector<std::pair<std::string, std::string>> files = {
      {"/tmp/perf-" + std::to_string(kFakePid) + ".map", tmp + "/out/perf.map"}};
  const ProcMaps maps = ProcMaps::parse(c.maps);
  for (const auto& m : maps.entries())
    if (m.file_backed() && std::none_of(files.begin(), files.end(), [&](auto& f) { return f.first == m.path; }))
      files.push_back({m.path, m.path});
  FakeProc proc(c.maps, files);
  {
    Resolver r(proc.options());
    check_jit_chain(r.resolve(c.input()));
  }
  {
    // Prepared while the process lived; unwound after it exited (its
    // /proc/PID is gone): the perf map is read through the held descriptor.
    Resolver r(proc.options());
    r.prepare(kFakePid, Arch::X86_64);
    const std::string pid_dir = proc.root + "/" + std::to_string(kFakePid);
    fs::rename(pid_dir, proc.root + "/exited");
    check_jit_chain(r.resolve(c.input()));
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
}
