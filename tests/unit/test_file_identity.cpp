// Unit tests for the module cache's key (issue 10, M3): a module is the
// file it was read from -- device, inode, size, times, and where its debug
// file is looked for -- never the build-id the file claims, which a
// container can copy from the host's libc to have host frames unwound with
// its .eh_frame and named with its symbols.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "stack/elf_image.h"
#include "stack/module.h"
#include "util/fd.h"

using namespace jankbpf;
using namespace jankbpf::stack;
namespace fs = std::filesystem;

namespace {

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : "";
}

std::unique_ptr<ElfImage> open_image(const std::string& path) {
  return ElfImage::open(Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)));
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/jankbpf-file-identity-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A copy of this test binary with one of its symbol names changed
// (everywhere it is spelled): the same build-id note, other contents.
void copy_altered(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string name = "jankbpf_unit_marker_target";
  size_t n = 0;
  for (auto at = bytes.find(name); at != std::string::npos; at = bytes.find(name, at + 1), n++) bytes[at] = 'J';
  REQUIRE(n > 0);
  std::ofstream(to, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("two files with the same build-id but different contents are different modules",
          "[stack][identity]") {
  TempDir dir;
  const std::string a = (dir.path / "a").string(), b = (dir.path / "b").string();
  fs::copy_file(self_exe(), a);
  copy_altered(self_exe(), b);
  auto ia = open_image(a), ib = open_image(b);
  REQUIRE((ia && ib));
  REQUIRE(!ia->build_id().empty());
  REQUIRE(ia->build_id() == ib->build_id());  // what each claims: the same
  DebugSearch where;
  where.roots = {"/"};
  CHECK(module_key(*ia, where) != module_key(*ib, where));
  ModuleCache cache;
  auto ma = cache.get(std::move(ia), a, where);
  auto mb = cache.get(std::move(ib), b, where);
  CHECK(ma != mb);
  CHECK(cache.size() == 2);
  CHECK(cache.misses() == 2);
  CHECK(cache.hits() == 0);
  // The altered symbol is the altered file's only.
  bool in_a = false, in_b = false;
  for (const auto& s : ma->elf().symbols()) in_a |= s.name == "jankbpf_unit_marker_target";
  for (const auto& s : mb->elf().symbols()) in_b |= s.name == "jankbpf_unit_marker_target";
  CHECK(in_a);
  CHECK_FALSE(in_b);
}

TEST_CASE("the same file read again is the same module; rewritten in place it is not",
          "[stack][identity]") {
  TempDir dir;
  const std::string a = (dir.path / "a").string();
  fs::copy_file(self_exe(), a);
  DebugSearch where;
  where.roots = {"/"};
  ModuleCache cache;
  auto m1 = cache.get(open_image(a), a, where);
  auto m2 = cache.get(open_image(a), a, where);
  CHECK(m1 == m2);
  CHECK(cache.hits() == 1);
  // Another root to search for its debug file: another module.
  DebugSearch other = where;
  other.roots = {dir.path.string()};
  CHECK(cache.get(open_image(a), a, other) != m1);
  // The same inode rewritten (same size): its times change, so does the key.
  auto before = open_image(a);
  REQUIRE(before);
  const std::string key = module_key(*before, where);
  usleep(20'000);
  copy_altered(self_exe(), a);  // truncates and rewrites the same inode
  auto after = open_image(a);
  REQUIRE(after);
  CHECK(after->inode() == before->inode());
  CHECK(module_key(*after, where) != key);
}

TEST_CASE("a root is keyed by the directory it names, not by its spelling", "[stack][identity]") {
  auto img = open_image(self_exe());
  REQUIRE(img);
  DebugSearch host, via_proc;
  host.roots = {"/"};
  via_proc.roots = {"/proc/" + std::to_string(getpid()) + "/root"};
  CHECK(module_key(*img, host) == module_key(*img, via_proc));
}
