// util/lazy_pages: a private copy of a file filled at first touch, and the
// DWARF of a -g binary read that way (issue 30: peak RSS with stacks).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "stack/elf_image.h"
#include "stack/inflate_index.h"
#include "stack/module.h"
#include "util/lazy_pages.h"
#include "util/self_status.h"
#include "skip.h"

using namespace jankbpf;

namespace {

struct PatternFile {
  std::string path;
  int fd = -1;
  explicit PatternFile(size_t bytes) {
    char tmpl[] = "/tmp/jankbpf-lazy-XXXXXX";
    fd = mkstemp(tmpl);
    path = tmpl;
    std::vector<uint32_t> words(bytes / 4);
    for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint32_t>(i * 4) ^ 0x5a5a5a5au;
    REQUIRE(::pwrite(fd, words.data(), bytes, 0) == static_cast<ssize_t>(bytes));
  }
  ~PatternFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
};

uint32_t expected(uint64_t off) { return static_cast<uint32_t>(off) ^ 0x5a5a5a5au; }

size_t resident_pages(void* p, size_t len) {
  const size_t ps = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((len + ps - 1) / ps);
  if (mincore(p, len, v.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

size_t kb(const std::string& field) { return std::strtoul(self_status(field).c_str(), nullptr, 10); }

std::string lazy_missing() {
  std::string why;
  return util::LazyPages::get().available(&why) ? std::string() : why;
}

// Eight functions spread over `path`'s symbols, symbolized through a
// Module with the DWARF copied whole or read lazily: one line of frames
// each, the RSS the symbolizing grew by, the DWARF bytes copied, and how
// many compressed sections were inflated page by page.
struct EightLines {
  std::vector<std::string> lines;
  size_t rss_growth_kb = 0;
  uint64_t dwarf_bytes = 0;
  size_t inflated = 0;
};

EightLines symbolize_eight(const std::string& path, bool lazy) {
  OpenPolicy policy;
  policy.max_size = stack::ElfImage::kMaxFileBytes;
  stack::ElfCopyLimits limits;
  limits.lazy_dwarf = lazy;
  auto img = stack::ElfImage::open_path(path, policy, limits);
  REQUIRE(img);
  REQUIRE(img->has_dwarf());
  std::vector<uint64_t> addrs;
  const auto& syms = img->symbols();
  REQUIRE(syms.size() > 100);
  // A stack's worth: a few functions, here 8 spread over the binary.
  for (size_t i = 0; i < syms.size() && addrs.size() < 8; i += syms.size() / 8)
    if (syms[i].size > 8) addrs.push_back(syms[i].addr + 4);
  const uint64_t before_copy = img->copied_bytes();
  const size_t rss0 = kb("VmRSS");
  stack::Module mod(std::move(img), path, stack::DebugSearch{});
  EightLines out;
  for (uint64_t a : addrs) {
    const auto& s = mod.symbolize(a, true);
    std::string line;
    for (const auto& fr : s.frames) line += fr.function + "@" + fr.file + ":" + std::to_string(fr.line) + ";";
    out.lines.push_back(line);
  }
  out.rss_growth_kb = kb("VmRSS") - rss0;
  out.dwarf_bytes = mod.elf().copied_bytes() - before_copy;
  out.inflated = mod.elf().sections_inflated_lazily();
  return out;
}

}  // namespace

TEST_CASE("lazy pages: read from the file at first touch, only the pages touched", "[lazy]") {
  SKIP_UNLESS(lazy_missing().empty(), "userfaultfd is not available here (" << lazy_missing() << ")");
  const size_t len = 8u << 20;
  PatternFile f(len);
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(m != MAP_FAILED);
  auto* p = static_cast<char*>(m);
  const int fd = f.fd;
  auto fill = [fd](uint64_t off, char* buf, size_t n) -> size_t {
    ssize_t r = ::pread(fd, buf, n, static_cast<off_t>(off));
    return r > 0 ? static_cast<size_t>(r) : 0;
  };
  const uint64_t before = util::LazyPages::get().pages_filled();
  REQUIRE(util::LazyPages::get().add(p, len, 0, fill));
  for (uint64_t off : {uint64_t{0}, uint64_t{1} << 20, uint64_t{(3u << 20) + 4092}, uint64_t{len - 4}}) {
    uint32_t w;
    std::memcpy(&w, p + off, 4);
    CHECK(w == expected(off));
  }
  const size_t res = resident_pages(p, len);
  INFO(res << " of " << len / 4096 << " pages resident");
  CHECK(res >= 4);
  CHECK(res <= 4 * 16);  // at most 16 pages read per fault
  // Counted by the serving thread after its fill woke this one: the last
  // fill's count may come a moment later.
  const uint64_t filled = util::LazyPages::get().pages_filled() - before;
  CHECK(filled <= res);
  CHECK(filled + 16 >= res);
  util::LazyPages::get().remove(p);
  // Unregistered: the rest reads as the zeros of anonymous memory.
  uint32_t w = 1;
  std::memcpy(&w, p + (6u << 20), 4);
  CHECK(w == 0);
  munmap(m, len);
}

TEST_CASE("lazy pages: what the file no longer has reads as zeros, never a fault", "[lazy]") {
  SKIP_UNLESS(lazy_missing().empty(), "userfaultfd is not available here (" << lazy_missing() << ")");
  const size_t len = 1u << 20;
  PatternFile f(len);
  REQUIRE(ftruncate(f.fd, 100000) == 0);  // shrank after the copy was planned
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(m != MAP_FAILED);
  auto* p = static_cast<char*>(m);
  const int fd = f.fd;
  REQUIRE(util::LazyPages::get().add(p, len, 0, [fd](uint64_t off, char* buf, size_t n) -> size_t {
    ssize_t r = ::pread(fd, buf, n, static_cast<off_t>(off));
    return r > 0 ? static_cast<size_t>(r) : 0;
  }));
  uint32_t w;
  std::memcpy(&w, p + 99996, 4);
  CHECK(w == expected(99996));
  std::memcpy(&w, p + 100000, 4);
  CHECK(w == 0);
  std::memcpy(&w, p + len - 4, 4);
  CHECK(w == 0);
  util::LazyPages::get().remove(p);
  munmap(m, len);
}

TEST_CASE("lazy pages: past the resident budget filled pages are dropped and read again, the image's own kept", "[lazy]") {
  SKIP_UNLESS(lazy_missing().empty(), "userfaultfd is not available here (" << lazy_missing() << ")");
  const size_t budget = util::LazyPages::resident_budget_bytes();
  const size_t len = 4 * budget;
  PatternFile f(len);
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(m != MAP_FAILED);
  auto* p = static_cast<char*>(m);
  // A page the image wrote before the region was added (a patched header):
  // not the file's bytes, and never to be dropped.
  const uint32_t patch = 0xfeedf00d;
  std::memcpy(p + 8192, &patch, 4);
  const int fd = f.fd;
  auto fill = [fd](uint64_t off, char* buf, size_t n) -> size_t {
    ssize_t r = ::pread(fd, buf, n, static_cast<off_t>(off));
    return r > 0 ? static_cast<size_t>(r) : 0;
  };
  auto& lazy = util::LazyPages::get();
  const uint64_t trims_before = lazy.trims();
  REQUIRE(lazy.add(p, len, 0, fill));
  size_t wrong = 0;
  for (int pass = 0; pass < 2; ++pass)  // the second pass reads pages the first one's trims dropped
    for (uint64_t off = 0; off < len; off += 4096) {
      if (off == 8192) continue;
      uint32_t w;
      std::memcpy(&w, p + off + 40, 4);
      wrong += w != expected(off + 40);
    }
  CHECK(wrong == 0);
  const size_t res = resident_pages(p, len);
  INFO(res << " pages resident of " << len / 4096 << ", budget " << budget / 4096);
  CHECK(res <= budget / 4096 + 1);
  CHECK(lazy.trims() - trims_before >= 6);
  uint32_t w;
  std::memcpy(&w, p + 8192, 4);
  CHECK(w == patch);
  lazy.remove(p);
  munmap(m, len);
}

TEST_CASE("a -g binary's DWARF read lazily names the same lines, and costs a fraction of its size", "[lazy][stack]") {
  // This test binary: -O2 -g, tens of MB of DWARF.
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(n > 0);
  self[n] = 0;
  const auto eager_run = symbolize_eight(self, false);
  const auto& eager = eager_run.lines;
  const size_t eager_kb = eager_run.rss_growth_kb;
  const uint64_t eager_bytes = eager_run.dwarf_bytes;
  const bool lazy_ok = util::LazyPages::get().available();
  const uint64_t filled_before = util::LazyPages::get().pages_filled(), trims_before = util::LazyPages::get().trims();
  const auto lazy_run = symbolize_eight(self, true);
  const auto& lazy = lazy_run.lines;
  const size_t lazy_kb = lazy_run.rss_growth_kb;
  const uint64_t lazy_bytes = lazy_run.dwarf_bytes;
  INFO("DWARF " << eager_bytes / 1024 << " kB; RSS growth eager " << eager_kb << " kB, lazy " << lazy_kb
                 << " kB; pages read lazily " << util::LazyPages::get().pages_filled());
  REQUIRE(eager.size() == lazy.size());
  size_t with_lines = 0;
  for (size_t i = 0; i < eager.size(); ++i) {
    CHECK(lazy[i] == eager[i]);
    with_lines += eager[i].find(".cpp:") != std::string::npos || eager[i].find(".h:") != std::string::npos;
  }
  CHECK(with_lines >= eager.size() / 2);
  CHECK(lazy_bytes == eager_bytes);  // charged alike: the most it may hold
  if (lazy_ok) CHECK(lazy_kb * 3 < eager_bytes / 1024);
  // What it read past the resident budget was dropped again as it went
  // (and the lines above are the same all the same).
  const uint64_t read = util::LazyPages::get().pages_filled() - filled_before;
  if (lazy_ok && read * 4096 > util::LazyPages::resident_budget_bytes())
    CHECK(util::LazyPages::get().trims() > trims_before);
}

namespace {

// A zlib stream of `data`, as an ELF compressed section holds it.
std::vector<uint8_t> zlib_of(const std::vector<uint8_t>& data, int level) {
  uLongf n = compressBound(static_cast<uLong>(data.size()));
  std::vector<uint8_t> out(n);
  REQUIRE(compress2(out.data(), &n, data.data(), static_cast<uLong>(data.size()), level) == Z_OK);
  out.resize(n);
  return out;
}

stack::InflateIndex::Reader reader_of(const std::vector<uint8_t>& z) {
  return [&z](uint64_t off, uint8_t* buf, size_t n) -> size_t {
    if (off >= z.size()) return 0;
    n = std::min<size_t>(n, z.size() - off);
    std::memcpy(buf, z.data() + off, n);
    return n;
  };
}

}  // namespace

TEST_CASE("inflate index: any range of a zlib stream, inflated from the nearest access point", "[lazy][inflate]") {
  // 3 MB of text that compresses like DWARF does (repeats at all distances).
  std::vector<uint8_t> data;
  uint32_t x = 12345;
  while (data.size() < (3u << 20)) {
    x = x * 1103515245u + 12345u;
    const std::string word = "_ZN7jankbpf5stack" + std::to_string((x >> 16) % 4000) + "E\n";
    data.insert(data.end(), word.begin(), word.end());
  }
  for (int level : {1, 9}) {
    const auto z = zlib_of(data, level);
    stack::InflateIndex index;
    REQUIRE(index.build(reader_of(z), z.size(), data.size()));
    CHECK(index.points() >= data.size() / stack::InflateIndex::kSpan / 2);
    CHECK(index.memory_bytes() < data.size() / 4);
    std::vector<uint8_t> got(70000);
    size_t wrong = 0;
    for (uint64_t off : {uint64_t{0}, uint64_t{1}, uint64_t{4095}, uint64_t{300000}, uint64_t{(1u << 20) + 17},
                         uint64_t{data.size() - 70000}, uint64_t{data.size() - 10}}) {
      const size_t want = std::min<size_t>(got.size(), data.size() - off);
      REQUIRE(index.read(reader_of(z), off, got.data(), want) == want);
      wrong += std::memcmp(got.data(), data.data() + off, want) != 0;
    }
    CHECK(wrong == 0);
    CHECK(index.read(reader_of(z), data.size(), got.data(), 10) == 0);  // past the end: nothing
  }
}

TEST_CASE("inflate index: a stream that lies about its size, or is corrupt, is refused", "[lazy][inflate]") {
  std::vector<uint8_t> data(1u << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * 7) ^ (i >> 9));
  auto z = zlib_of(data, 6);
  stack::InflateIndex index;
  CHECK_FALSE(index.build(reader_of(z), z.size(), data.size() - 1));  // holds more than it claims
  CHECK_FALSE(index.build(reader_of(z), z.size(), data.size() + 1));  // holds less
  CHECK_FALSE(index.build(reader_of(z), z.size() / 2, data.size()));  // cut short
  auto bad = z;
  for (size_t i = bad.size() / 3; i < bad.size() / 3 + 64; ++i) bad[i] ^= 0x5a;
  CHECK_FALSE(index.build(reader_of(bad), bad.size(), data.size()));
  // Built on the good stream, then read from a corrupted one (the file
  // changed under it): short output, never a crash or an overrun.
  REQUIRE(index.build(reader_of(z), z.size(), data.size()));
  std::vector<uint8_t> got(1u << 20);
  CHECK(index.read(reader_of(bad), 0, got.data(), got.size()) < got.size());
}

TEST_CASE("a compressed debug file's DWARF is inflated page by page and names the same lines", "[lazy][stack]") {
  SKIP_UNLESS(lazy_missing().empty(), "userfaultfd is not available here (" << lazy_missing() << ")");
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(n > 0);
  self[n] = 0;
  // The unit binary's DWARF, zlib-compressed in a debug file the way
  // Debian's -dbg and -dbgsym packages ship it.
  char tmpl[] = "/tmp/jankbpf-zdebug-XXXXXX";
  int tfd = mkstemp(tmpl);
  REQUIRE(tfd >= 0);
  ::close(tfd);
  const std::string zpath = tmpl;
  pid_t pid = fork();
  if (pid == 0) {
    execlp("objcopy", "objcopy", "--only-keep-debug", "--compress-debug-sections=zlib", self, zpath.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  const auto plain_run = symbolize_eight(self, true);
  const auto whole_run = symbolize_eight(zpath, false);  // libelf inflates it
  const auto lazy_run = symbolize_eight(zpath, true);
  const auto &plain = plain_run.lines, &whole = whole_run.lines, &lazy = lazy_run.lines;
  const size_t inflated_plain = plain_run.inflated, inflated_whole = whole_run.inflated,
               inflated_lazy = lazy_run.inflated;
  const size_t kb_plain = plain_run.rss_growth_kb, kb_whole = whole_run.rss_growth_kb, kb_lazy = lazy_run.rss_growth_kb;
  ::unlink(zpath.c_str());
  INFO("RSS growth: uncompressed " << kb_plain << " kB, compressed inflated whole " << kb_whole
                                   << " kB, inflated page by page " << kb_lazy << " kB");
  REQUIRE(plain.size() == lazy.size());
  size_t with_lines = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    CHECK(lazy[i] == plain[i]);
    CHECK(whole[i] == plain[i]);
    with_lines += plain[i].find(".cpp:") != std::string::npos || plain[i].find(".h:") != std::string::npos;
  }
  CHECK(with_lines >= plain.size() / 2);
  CHECK(inflated_plain == 0);
  CHECK(inflated_whole == 0);
  CHECK(inflated_lazy >= 4);  // info, abbrev, line, str at least
  CHECK(kb_lazy * 2 < kb_whole);
}
