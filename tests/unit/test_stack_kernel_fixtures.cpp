// Real perf samples from a real arm64 kernel (Debian 12's 6.1 under
// qemu-system-aarch64 -cpu max: pointer authentication, BTI, SVE), replayed
// offline. tests/fixtures/aarch64/kernel-6.1/{nopac,pac} were made by
// `scripts/capture-aarch64-fixtures.sh --kernel`: tests/apps/stack_vdso_loop
// (main -> top_work -> mid_work -> leaf_spin, spinning on clock_gettime)
// sampled by tests/apps/stack_perf_sampler as jankbpf's sampler samples
// (cpu-clock, every user register, 16 KiB of stack), dynamically linked
// against Debian's libc6:arm64, with the vDSO dumped from the process and
// perf's own --call-graph dwarf chains of the same tasks as the reference
// (where perf gets them right: see reference_chains()).
//
// The libc is not shipped: the replay maps the multiarch
// /usr/lib/aarch64-linux-gnu/libc.so.6 of this machine (libc6:arm64, from
// `make deps ARCH=arm64`) and refuses it unless its build-id is the
// captured one.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "arch/regs.h"
#include "stack/arm64_code.h"
#include "stack/elf_image.h"
#include "stack/maps.h"
#include "stack/perf_sample.h"
#include "stack/resolver.h"
#include "stack/tree.h"

using namespace jankbpf;
using namespace jankbpf::stack;
namespace fs = std::filesystem;

namespace {

constexpr pid_t kPid = 4343;
constexpr const char* kDir = "tests/fixtures/aarch64/kernel-6.1/";
constexpr const char* kMultiarch = "/usr/lib/aarch64-linux-gnu/";

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct KernelCapture {
  std::string dir;
  uint64_t sample_type = 0, regs_mask = 0;
  std::string maps;
  std::vector<uint64_t> words;  // samples.bin, 8-byte aligned
  size_t bytes = 0;
  std::vector<std::pair<uint64_t, uint64_t>> tasks;
  // perf's chains of the same tasks that reach main ("leaf;...;main" ->
  // samples), and how many samples perf had in all.
  std::map<std::string, int> perf_chains;
  int perf_samples = 0;
  std::string libc_build_id;

  explicit KernelCapture(const std::string& variant) : dir(kDir + variant) {
    std::istringstream attr(slurp(dir + "/attr.txt"));
    for (std::string k, v; attr >> k >> v;) {
      if (k == "sample_type") sample_type = std::stoull(v, nullptr, 16);
      if (k == "regs_mask") regs_mask = std::stoull(v, nullptr, 16);
    }
    maps = slurp(dir + "/maps");
    std::string s = slurp(dir + "/samples.bin");
    bytes = s.size();
    words.resize((s.size() + 7) / 8);
    std::memcpy(words.data(), s.data(), s.size());
    std::istringstream t(slurp(dir + "/tasks.txt"));
    for (std::string w; t >> w;) {
      uint64_t b = 0, e = 0;
      t >> b >> e;
      tasks.push_back({b, e});
    }
    // perf's chains, leaf first, cut after main (the C runtime below it is
    // named differently by perf and has no symbol in a stripped libc).
    std::istringstream pc(slurp(dir + "/perf-chains.txt"));
    for (std::string line; std::getline(pc, line);) {
      std::istringstream ls(line);
      int n = 0;
      std::string chain;
      ls >> n >> chain;
      perf_samples += n;
      auto at = chain.find(";main");
      if (at == std::string::npos) continue;
      perf_chains[chain.substr(0, at + 5)] += n;
    }
    std::istringstream readme(slurp(dir + "/README"));
    for (std::string line; std::getline(readme, line);)
      if (auto at = line.find("build-id "); line.rfind("libc:", 0) == 0 && at != std::string::npos)
        libc_build_id = line.substr(at + 9);
  }

  template <typename F>
  void for_each_sample(F&& f) const {
    const auto* b = reinterpret_cast<const uint8_t*>(words.data());
    size_t off = 0;
    while (off + 8 <= bytes) {
      uint16_t size = 0;
      std::memcpy(&size, b + off + 6, 2);
      if (size < 8 || off + size > bytes) break;
      PerfSampleView v;
      REQUIRE(parse_perf_sample({b + off, size}, sample_type, regs_mask, v));
      f(v);
      off += size;
    }
  }
};

// PID/maps and PID/root/<path> for the captured process: the target from
// the fixture, libc and ld.so from this machine's multiarch folder.
struct KernelProc {
  std::string root;
  KernelProc(const KernelCapture& c, const std::string& variant) {
    char tmpl[] = "/tmp/jankbpf-kernelproc-XXXXXX";
    root = ::mkdtemp(tmpl);
    std::string pid_dir = root + "/" + std::to_string(kPid);
    fs::create_directories(pid_dir + "/root");
    std::ofstream(pid_dir + "/maps") << c.maps;
    const ProcMaps maps = ProcMaps::parse(c.maps);
    for (const auto& m : maps.entries()) {
      if (!m.file_backed()) continue;
      fs::path p = pid_dir + "/root" + m.path;
      if (fs::exists(fs::symlink_status(p))) continue;
      fs::create_directories(p.parent_path());
      std::string name = fs::path(m.path).filename();
      std::string target = name == "stack_vdso_loop" ? fs::absolute(kDir + variant + "/" + name).string()
                                                     : std::string(kMultiarch) + name;
      // Hard links (copies across filesystems), not symlinks: jankbpf never
      // follows a link out of a process's root.
      std::error_code ec;
      fs::create_hard_link(target, p, ec);
      if (ec) fs::copy_file(target, p);
    }
  }
  ~KernelProc() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  ResolverOptions options(const KernelCapture& c) const {
    ResolverOptions o;
    o.proc_root = root;
    o.kallsyms_path = "/dev/null";
    o.host_root = "";
    o.verify_inode = false;
    o.vdso_path = fs::absolute(c.dir + "/vdso.so").string();  // open_untrusted takes absolute paths
    return o;
  }
};

std::string dump(const ResolvedStack& s, const UserRegs& r) {
  char head[160];
  std::snprintf(head, sizeof head, "pc=%#llx sp=%#llx lr=%#llx x29=%#llx stop=%s ",
                static_cast<unsigned long long>(r.pc), static_cast<unsigned long long>(r.sp),
                static_cast<unsigned long long>(r.lr), static_cast<unsigned long long>(r.fp),
                std::string(to_string(s.stop)).c_str());
  std::string out = head + s.error + "\n";
  for (const auto& f : s.frames)
    out += "  " + StackTree::format_frame(f, true) + (f.inlined() ? " [inlined]" : "") + "\n";
  return out;
}

// Our chain as perf names it: physical frames only (perf script shows no
// inlined ones), leaf first, up to main; "" when main is not reached.
std::string chain_to_main(const ResolvedStack& s) {
  std::string c;
  for (const auto& f : s.frames) {
    if (f.kernel() || f.inlined()) continue;
    if (!c.empty()) c += ';';
    c += f.symbol.empty() ? "[unknown]" : f.symbol;
    if (f.symbol == "main") return c;
  }
  return "";
}

// What perf says the true chains are. perf 6.1 itself cannot unwind a
// sample in the vDSO (it stops at "__kernel_clock_gettime;[unknown]") nor,
// in the PAC build, past the leaf ("leaf_spin;leaf_spin": it does not strip
// the signed return addresses), so its complete chains come from the build
// without PAC; the PAC build is the same source and compiler. A vDSO
// sample's chain is __kernel_clock_gettime on top of a chain perf gives
// for samples in libc's clock_gettime.
std::set<std::string> reference_chains() {
  std::set<std::string> ref;
  for (const char* v : {"nopac", "pac"})
    for (const auto& [k, n] : KernelCapture(v).perf_chains) ref.insert(k);
  std::set<std::string> vdso;
  for (const auto& k : ref)
    if (k.rfind("clock_gettime;", 0) == 0) vdso.insert("__kernel_clock_gettime;" + k);
  ref.insert(vdso.begin(), vdso.end());
  return ref;
}

bool libc_matches(const KernelCapture& c, std::string* why) {
  auto img = ElfImage::open_path(std::string(kMultiarch) + "libc.so.6");
  if (!img) {
    *why = std::string(kMultiarch) + "libc.so.6 missing: make deps ARCH=arm64 (libc6:arm64)";
    return false;
  }
  if (img->build_id() != c.libc_build_id) {
    *why = std::string(kMultiarch) + "libc.so.6 has build-id " + img->build_id() + ", the fixture was captured with " +
           c.libc_build_id + " (see its README): recapture with scripts/capture-aarch64-fixtures.sh --kernel";
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("arm64 kernel 6.1 samples unwind to main like perf's, with and without PAC", "[stack][aarch64][kernel]") {
  for (const char* variant : {"nopac", "pac"}) {
    DYNAMIC_SECTION("variant " << variant) {
      KernelCapture c(variant);
      REQUIRE(c.regs_mask == reg_table(Arch::Arm64).sample_regs_user);
      REQUIRE(c.tasks.size() == 3);
      REQUIRE(c.perf_samples >= 20);
      std::string why;
      const bool libc_ok = libc_matches(c, &why);
      INFO(why);
      REQUIRE(libc_ok);
      const std::set<std::string> ref = reference_chains();
      REQUIRE(ref.count("leaf_spin;mid_work;top_work;main") == 1);
      REQUIRE(ref.count("clock_gettime;leaf_spin;mid_work;top_work;main") == 1);
      KernelProc proc(c, variant);
      Resolver r(proc.options(c));
      int samples = 0, to_main = 0, in_vdso = 0, vdso_to_main = 0, signed_lr = 0;
      std::map<std::string, int> ours;
      c.for_each_sample([&](const PerfSampleView& v) {
        SampleInput in = to_sample_input(v, c.regs_mask, Arch::Arm64);
        in.pid = in.tid = kPid;
        auto regs = decode_user_regs(Arch::Arm64, c.regs_mask, in.regs);
        REQUIRE(regs);
        ResolvedStack s = r.resolve(in);
        INFO(dump(s, *regs));
        ++samples;
        bool vdso = !s.frames.empty() && s.frames[0].module == "[vdso]";
        in_vdso += vdso;
        signed_lr += (regs->lr >> 48) != 0;
        std::string chain = chain_to_main(s);
        if (chain.empty()) {
          UNSCOPED_INFO("not to main: " << dump(s, *regs));
          return;
        }
        ++to_main;
        vdso_to_main += vdso;
        ++ours[chain];
        // The leaf function is there, and the frames are perf's.
        CHECK(chain.find("leaf_spin;mid_work;top_work;main") != std::string::npos);
        CHECK(ref.count(chain) == 1);
        CHECK(s.stop == UnwindStop::Complete);
      });
      std::string summary;
      for (const auto& [k, n] : ours) summary += "  ours " + std::to_string(n) + " " + k + "\n";
      for (const auto& [k, n] : c.perf_chains) summary += "  perf " + std::to_string(n) + " " + k + "\n";
      INFO(summary);
      int perf_to_main = 0;
      for (const auto& [k, n] : c.perf_chains) perf_to_main += n;
      std::printf("[stack] arm64 kernel 6.1 %s: %d/%d samples unwind to main (%d in the vDSO, %d of them); "
                  "perf: %d/%d\n",
                  variant, to_main, samples, in_vdso, vdso_to_main, perf_to_main, c.perf_samples);
      REQUIRE(samples >= 30);
      CHECK(to_main * 100 >= samples * 95);
      // The case issue 9 found broken: the samples include pcs in the
      // vDSO's __kernel_clock_gettime, whose LR the vDSO has signed even
      // in the build without PAC.
      CHECK(in_vdso >= 3);
      CHECK(vdso_to_main == in_vdso);
      CHECK(signed_lr >= 1);
      // All three places a task spends its time in are there.
      CHECK(ours.count("leaf_spin;mid_work;top_work;main") == 1);
      CHECK(ours.count("clock_gettime;leaf_spin;mid_work;top_work;main") == 1);
      CHECK(ours.count("__kernel_clock_gettime;clock_gettime;leaf_spin;mid_work;top_work;main") == 1);
    }
  }
}

TEST_CASE("a vDSO sample: leaf from LR, then libc's CFI, then the program's", "[stack][aarch64][kernel]") {
  KernelCapture c("nopac");
  std::string why;
  const bool libc_ok = libc_matches(c, &why);
  INFO(why);
  REQUIRE(libc_ok);
  KernelProc proc(c, "nopac");
  Resolver r(proc.options(c));
  const ProcMaps maps = ProcMaps::parse(c.maps);
  bool seen = false;
  c.for_each_sample([&](const PerfSampleView& v) {
    if (seen) return;
    SampleInput in = to_sample_input(v, c.regs_mask, Arch::Arm64);
    in.pid = in.tid = kPid;
    auto regs = decode_user_regs(Arch::Arm64, c.regs_mask, in.regs);
    REQUIRE(regs);
    const MapEntry* m = maps.find(regs->pc);
    if (!m || !m->is_vdso() || regs->pc == m->start + 0x2d0) return;  // past the entry: LR signed
    seen = true;
    ResolvedStack s = r.resolve(in);
    INFO(dump(s, *regs));
    REQUIRE(s.frames.size() >= 6);
    CHECK(s.frames[0].symbol == "__kernel_clock_gettime");
    CHECK(s.frames[1].symbol == "clock_gettime");
    CHECK(s.frames[1].pc == (regs->lr & ((uint64_t{1} << 48) - 1)));  // LR, authentication bits gone
    size_t i = 2;
    if (s.frames[i].inlined()) ++i;  // now_ns
    CHECK(s.frames[i].symbol == "leaf_spin");
    CHECK(s.frames[i + 1].symbol == "mid_work");
    CHECK(s.frames[i + 2].symbol == "top_work");
    CHECK(s.frames[i + 3].symbol == "main");
    CHECK(s.stop == UnwindStop::Complete);
  });
  CHECK(seen);
}

TEST_CASE("A64 frameless-leaf test: the vDSO's functions yes, framed or calling code no", "[stack][aarch64][kernel]") {
  auto vdso = ElfImage::open_path(fs::absolute(std::string(kDir) + "nopac/vdso.so").string());
  REQUIRE(vdso);
  int funcs = 0;
  for (const ElfSymbol& s : vdso->symbols()) {
    if (s.size < 16) continue;  // __kernel_rt_sigreturn: two instructions
    std::vector<uint32_t> code(s.size / 4);
    REQUIRE(vdso->read(s.addr, code.data(), code.size() * 4));  // vaddr == offset in the vDSO
    INFO(s.name);
    CHECK(a64_frameless_leaf(code));
    ++funcs;
  }
  CHECK(funcs == 3);  // clock_gettime, gettimeofday, clock_getres

  auto no = [](std::vector<uint32_t> code) { return !a64_frameless_leaf(code); };
  constexpr uint32_t paciasp = 0xd503233f, autiasp = 0xd50323bf, ret = 0xd65f03c0, nop = 0xd503201f;
  CHECK(a64_frameless_leaf(std::vector<uint32_t>{paciasp, nop, autiasp, ret}));
  CHECK(a64_frameless_leaf(std::vector<uint32_t>{0x71003c1f /* cmp w0, #15 */, ret}));
  CHECK(a64_frameless_leaf(std::vector<uint32_t>{0x8b2463e4 /* add x4, sp, x4 */, 0xf940009f /* ldr xzr, [x4] */}));
  CHECK(no({paciasp, 0xa9bf7bfd /* stp x29, x30, [sp, #-16]! */, 0x910003fd /* mov x29, sp */, ret}));
  CHECK(no({0xf81f0ffe /* str x30, [sp, #-16]! */, ret}));
  CHECK(no({0xd10083ff /* sub sp, sp, #32 */, ret}));
  CHECK(no({0x9100001f /* mov sp, x0 */, ret}));
  CHECK(no({0x94000010 /* bl */, ret}));
  CHECK(no({0xd63f0200 /* blr x16 */, ret}));
  CHECK(no({0xd63f081f /* blraaz x0 */, ret}));
  CHECK(no({0xa8c17bfd /* ldp x29, x30, [sp], #16 */, ret}));
  CHECK(no({0xaa0003fe /* mov x30, x0 */, ret}));
  CHECK(no({}));

  // PLT stubs, as ld lays them out (stack_loop_pac's .plt): the header,
  // then one 16-byte stub per import. A lane sample inside
  // clock_gettime@plt lost its caller when this was not recognized.
  const std::vector<uint32_t> plt = {
      0xa9bf7bf0 /* stp x16, x30, [sp, #-16]! (the header) */, 0xf00000f0, 0xf947fe11, 0x913fe210, 0xd61f0220,
      nop, nop, nop,
      0x90000110 /* adrp x16, ... */, 0xf9400211 /* ldr x17, [x16] */, 0x91000210 /* add x16, x16, #0 */,
      0xd61f0220 /* br x17 */,
      0x90000110, 0xf9400611 /* ldr x17, [x16, #8] */, 0x91002210 /* add x16, x16, #8 */, 0xd61f0220};
  for (size_t at = 8; at < 12; ++at) CHECK(a64_plt_stub_at(plt, at) == 8);
  for (size_t at = 12; at < 16; ++at) CHECK(a64_plt_stub_at(plt, at) == 12);
  CHECK(a64_plt_stub_at(plt, 0) == -1);  // the header pushes x30: not a leaf
  CHECK(a64_plt_stub_at(plt, 5) == -1);
  CHECK(a64_plt_stub_at(plt, 99) == -1);
  CHECK(a64_plt_stub_at(std::vector<uint32_t>{0x90000110, 0xf9400211, 0x91000210}, 0) == -1);  // cut short
  CHECK(a64_plt_stub_at(std::vector<uint32_t>{0x90000110, 0xf9400211, 0x91000210, 0xd61f0200 /* br x16 */}, 0) == -1);
}
