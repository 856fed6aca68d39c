// What one watched process can make jankbpf hold (issue 26), at the unit
// level: the ledger's limits, an ELF image copying only the sections it
// reads (a sparse 1 GiB file with a claimed 900 MiB .symtab costs its
// headers), a build-id note claiming a sparse 4 GiB file read by headers,
// and a perf map parsed as a stream within its entry and byte limits. The
// end-to-end attacks are in tests/e2e/test_budgets.py.
#include <elf.h>
#include <sched.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "elf/build_id.h"
#include "stack/elf_image.h"
#include "stack/module.h"
#include "stack/perf_map.h"
#include "util/budget.h"
#include "util/own_clock.h"

using namespace jankbpf;
using namespace jankbpf::stack;

namespace {

long peak_rss_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

struct TempFile {
  std::string path;
  Fd fd;
  TempFile() {
    char tmpl[] = "/var/tmp/jankbpf-budget-XXXXXX";
    fd.reset(::mkstemp(tmpl));
    path = tmpl;
  }
  ~TempFile() { ::unlink(path.c_str()); }
  void pwrite_at(const void* p, size_t n, uint64_t off) {
    REQUIRE(::pwrite(fd.get(), p, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n));
  }
};

// A 64-bit ELF whose one PT_LOAD is real and whose section headers (at the
// end of a `size`-byte sparse file) claim a `symtab_bytes` .symtab and a
// `debug_bytes` .debug_info in the holes: nothing the file holds is large.
void write_sparse_elf(TempFile& f, uint64_t size, uint64_t symtab_bytes, uint64_t debug_bytes) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof eh;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 1;
  eh.e_ehsize = sizeof eh;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  const char names[] = "\0.symtab\0.strtab\0.shstrtab\0.debug_info\0.debug_abbrev";
  const uint64_t names_off = 4096, shoff = size - 6 * sizeof(Elf64_Shdr);
  eh.e_shoff = shoff;
  eh.e_shnum = 6;
  eh.e_shstrndx = 3;
  Elf64_Phdr ph{};
  ph.p_type = PT_LOAD;
  ph.p_flags = PF_R | PF_X;
  ph.p_filesz = ph.p_memsz = 4096;
  ph.p_align = 4096;
  std::vector<Elf64_Shdr> sh(6);
  sh[1] = {1, SHT_SYMTAB, 0, 0, 8192, symtab_bytes, 2, 1, 8, sizeof(Elf64_Sym)};
  sh[2] = {9, SHT_STRTAB, 0, 0, 8192 + symtab_bytes, 16, 0, 0, 1, 0};
  sh[3] = {17, SHT_STRTAB, 0, 0, names_off, sizeof names, 0, 0, 1, 0};
  sh[4] = {27, SHT_PROGBITS, 0, 0, 8192 + symtab_bytes + 4096, debug_bytes, 0, 0, 1, 0};
  sh[5] = {39, SHT_PROGBITS, 0, 0, 8192 + symtab_bytes + 4096 + debug_bytes, 16, 0, 0, 1, 0};
  f.pwrite_at(&eh, sizeof eh, 0);
  f.pwrite_at(&ph, sizeof ph, sizeof eh);
  f.pwrite_at(names, sizeof names, names_off);
  f.pwrite_at(sh.data(), sh.size() * sizeof(Elf64_Shdr), shoff);
  REQUIRE(::ftruncate(f.fd.get(), static_cast<off_t>(size)) == 0);
}

}  // namespace

TEST_CASE("budget ledger: per process, per uid, overall; released with the charge", "[budget]") {
  BudgetLedger l({100, 150, 200});
  CHECK(l.headroom(1, 10) == 100);
  bool ok = false;
  auto a = l.charge(1, 10, 80, &ok);
  CHECK(ok);
  CHECK(l.headroom(1, 10) == 20);   // its process
  CHECK(l.headroom(2, 10) == 70);   // its uid
  CHECK(l.headroom(3, 20) == 100);  // a new process: its own limit (the total has 120)
  auto b = l.charge(2, 10, 80, &ok);
  CHECK_FALSE(ok);  // the uid's 150
  CHECK(b.bytes() == 0);
  auto c = l.charge(3, 20, 100, &ok);
  CHECK(ok);
  CHECK(l.headroom(4, 30) == 20);
  CHECK_FALSE(c.resize(150));  // the process's 100
  CHECK(c.bytes() == 100);
  c.release();
  CHECK(l.held() == 80);
  { auto d = std::move(a); }
  CHECK(l.held() == 0);
  CHECK(l.high_water() == 180);
}

TEST_CASE("a sparse 1 GiB ELF costs its headers, not 1 GiB: claimed sections are left out", "[budget][elf]") {
  TempFile f;
  write_sparse_elf(f, 1ull << 30, 900ull << 20, 64ull << 20);
  const long before = peak_rss_kb();
  auto t0 = std::chrono::steady_clock::now();
  BudgetLedger ledger({512ull << 20, 512ull << 20, 1ull << 30});
  ElfCopyLimits limits;
  limits.ledger = &ledger;
  limits.pid = 42;
  auto img = ElfImage::open(Fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC)), limits);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(img);
  INFO("copied " << img->copied_bytes() << " bytes in " << ms << " ms; peak RSS +" << peak_rss_kb() - before << " kB");
  CHECK(img->copied_bytes() <= 64 * 1024);
  CHECK(ledger.held_by(42) < (1u << 20));
  // The 900 MiB .symtab does not fit the 256 MiB a file may copy: left out,
  // said so; the DWARF (64 MiB claimed) waits for load_dwarf().
  CHECK(img->budget_cut() & kBudgetElfBytes);
  CHECK_FALSE(img->has_symtab());
  CHECK(img->symbols().empty());
  CHECK(img->has_dwarf());
  CHECK(peak_rss_kb() - before < 16 * 1024);
  // What is left out reads as nothing to libelf: the section is NOBITS.
  size_t shnum = 0;
  REQUIRE(elf_getshdrnum(img->elf(), &shnum) == 0);
  GElf_Shdr sh;
  REQUIRE(gelf_getshdr(elf_getscn(img->elf(), 1), &sh));
  CHECK(sh.sh_type == SHT_NOBITS);
  // Loading the DWARF is charged: 64 MiB of holes is copied (zeros), and
  // released with the image.
  CHECK(img->load_dwarf(std::chrono::steady_clock::time_point::max()));
  CHECK(img->has_debug_info());
  CHECK(ledger.held_by(42) >= (64u << 20));
  img.reset();
  CHECK(ledger.held() == 0);
}

TEST_CASE("an ELF over what its process has left is refused or cut, and counted", "[budget][elf]") {
  TempFile f;
  write_sparse_elf(f, 64ull << 20, 8ull << 20, 0);
  BudgetLedger ledger({24ull << 20, 0, 0});
  ElfCopyLimits limits;
  limits.ledger = &ledger;
  limits.pid = 7;
  auto a = ElfImage::open(Fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC)), limits);
  REQUIRE(a);
  CHECK(a->has_symtab());  // 8 MiB (and 11 MiB of ElfSymbols for it) fit the 24
  CHECK(a->budget_cut() == 0);
  auto b = ElfImage::open(Fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC)), limits);
  REQUIRE(b);  // its headers fit, its symbol table no longer does
  CHECK_FALSE(b->has_symtab());
  CHECK(b->budget_cut() & kBudgetElfBytes);
  CHECK(ledger.held_by(7) <= (24u << 20));
  // Another process is not charged for it.
  limits.pid = 8;
  auto c = ElfImage::open(Fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC)), limits);
  REQUIRE(c);
  CHECK(c->has_symtab());
}

TEST_CASE("a module holds no descriptor: libdwfl reads its copy", "[budget][elf]") {
  auto fds = [] {
    size_t n = 0;
    for (int fd = 0; fd < 4096; ++fd) n += ::fcntl(fd, F_GETFD) >= 0;
    return n;
  };
  const size_t before = fds();
  std::vector<std::unique_ptr<Module>> modules;
  // 2 x kMaxElfSourceFds files: the pool keeps at most kMaxElfSourceFds open.
  std::vector<TempFile> files(2 * kMaxElfSourceFds);
  const uint32_t magic = 0xfeedface;
  for (auto& f : files) {
    write_sparse_elf(f, 1u << 20, 4096, 0);
    f.pwrite_at(&magic, sizeof magic, 300);  // code, say: never copied
    f.fd.reset();
    auto img = ElfImage::open_path(f.path);
    REQUIRE(img);
    modules.push_back(std::make_unique<Module>(std::move(img), f.path, DebugSearch{}));
    modules.back()->symbolize(0x100, true);
  }
  CHECK(fds() <= before + kMaxElfSourceFds);
  CHECK(elf_source_fds_open() <= kMaxElfSourceFds);
  // A file whose descriptor the pool closed is read again through its path.
  uint32_t word = 0;
  CHECK(modules.front()->elf().read(300, &word, 4));
  CHECK(word == magic);
  CHECK(fds() <= before + kMaxElfSourceFds);
}

TEST_CASE("a build-id note claiming a sparse 4 GiB file is read by its header", "[budget][elf]") {
  TempFile f;
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_type = ET_EXEC;
  eh.e_machine = EM_X86_64;
  eh.e_phoff = sizeof eh;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 2;
  Elf64_Phdr ph[2]{};
  const uint64_t size = 4ull << 30;
  // The first note segment claims the rest of the file; the second holds
  // the real build-id.
  ph[0] = {PT_NOTE, PF_R, 4096, 0, 0, size - 4096, size - 4096, 4};
  ph[1] = {PT_NOTE, PF_R, 512, 0, 0, 36, 36, 4};
  Elf64_Nhdr huge{4, static_cast<Elf64_Word>(size - 8192), NT_GNU_BUILD_ID};
  struct {
    Elf64_Nhdr h{4, 20, NT_GNU_BUILD_ID};
    char name[4] = {'G', 'N', 'U', 0};
    unsigned char id[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  } real;
  f.pwrite_at(&eh, sizeof eh, 0);
  f.pwrite_at(ph, sizeof ph, sizeof eh);
  f.pwrite_at(&real, sizeof real, 512);
  f.pwrite_at(&huge, sizeof huge, 4096);
  REQUIRE(::ftruncate(f.fd.get(), static_cast<off_t>(size)) == 0);
  const long before = peak_rss_kb();
  auto t0 = std::chrono::steady_clock::now();
  std::string id = read_build_id(f.fd.get());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  INFO(ms << " ms, peak RSS +" << peak_rss_kb() - before << " kB");
  CHECK(id == "deadbeef0102030405060708090a0b0c0d0e0f10");
  CHECK(ms < 100);
  CHECK(peak_rss_kb() - before < 4 * 1024);
}

TEST_CASE("a perf map is parsed as a stream, within its entries and bytes", "[budget][perf_map]") {
  // 6-byte lines, as the attack's 256 MiB map: 16 MiB of them here.
  std::string chunk;
  for (int i = 0; i < 65536 / 8; ++i) {
    char line[16];
    std::snprintf(line, sizeof line, "%x 1 a\n", i & 0xfff);
    chunk += line;
  }
  const long before = peak_rss_kb();
  PerfMap m(PerfMapLimits{100000, 4u << 20});
  for (size_t fed = 0; fed < (16u << 20); fed += chunk.size()) m.feed(chunk);
  m.finish();
  INFO(m.size() << " entries, " << m.held_bytes() << " bytes held; peak RSS +" << peak_rss_kb() - before << " kB");
  CHECK(m.cut());
  CHECK(m.size() <= 100000);
  CHECK(m.held_bytes() <= (4u << 20));
  CHECK(peak_rss_kb() - before < 16 * 1024);
  CHECK(m.lookup(0x10));
  // A ledger's charge stops it as well (the uid's or everyone's share).
  BudgetLedger ledger({0, 0, 1u << 20});
  PerfMap small(PerfMapLimits{}, ledger.charge(1, 1, 0));
  for (int i = 0; i < 64; ++i) small.feed(chunk);
  small.finish();
  CHECK(small.cut());
  CHECK(ledger.held() <= (1u << 20));
  // Lines split across chunks, and one too long to be a line, are handled.
  PerfMap split;
  split.feed("10 2");
  split.feed("0 named\n" + std::string(10000, 'x'));
  split.feed(std::string(10000, 'y') + "\n30 4 after\n");
  split.finish();
  REQUIRE(split.lookup(0x10));
  CHECK(split.lookup(0x10)->name == "named");
  CHECK(split.lookup(0x30)->name == "after");
  CHECK(split.bad_lines() == 1);
}

// ---- own time: budgets of jankbpf's own work do not count the host's load ----

TEST_CASE("schedstat's run delay is its second field; anything else is refused", "[budgets][own-time]") {
  uint64_t v = 0;
  const std::string ok = "2163073 1043019 2\n";
  CHECK(jankbpf::util::parse_run_delay(ok.data(), ok.size(), &v));
  CHECK(v == 1043019);
  for (std::string bad : {"", "12", "12 ", "x 1 2", "1 -2 3", "1 99999999999999999999999 2"})
    CHECK_FALSE(jankbpf::util::parse_run_delay(bad.data(), bad.size(), &v));
}

TEST_CASE("own time counts sleep and work, not the time another thread held the CPU", "[budgets][own-time]") {
  using clock = std::chrono::steady_clock;
  // Alone: a sleep is the thread's own time (a slow filesystem is its cost).
  auto w0 = clock::now();
  auto o0 = jankbpf::util::own_now();
  usleep(100'000);
  const double slept = std::chrono::duration<double>(jankbpf::util::own_now() - o0).count();
  CHECK(slept >= 0.09);
  CHECK(slept <= std::chrono::duration<double>(clock::now() - w0).count() + 0.001);
  // Sharing one CPU with a spinner: about half the wall time is its own.
  cpu_set_t one, old;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  REQUIRE(sched_getaffinity(0, sizeof old, &old) == 0);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  std::atomic<bool> stop{false};
  std::thread hog([&] {
    sched_setaffinity(0, sizeof one, &one);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  usleep(20'000);
  w0 = clock::now();
  o0 = jankbpf::util::own_now();
  while (clock::now() - w0 < std::chrono::milliseconds(400)) {
  }
  const double wall = std::chrono::duration<double>(clock::now() - w0).count();
  const double own = std::chrono::duration<double>(jankbpf::util::own_now() - o0).count();
  stop = true;
  hog.join();
  sched_setaffinity(0, sizeof old, &old);
  INFO("wall " << wall << " s, own " << own << " s");
  CHECK(own < 0.8 * wall);
  CHECK(own > 0.2 * wall);
}
