// Unit tests for marker files: the identity check of a mapped file, the
// descriptor a planned site is attached through (which a symlink swapped in
// afterwards cannot redirect), and the caps and release of MarkerFiles.
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "markers/marker_file.h"
#include "markers/marker_files.h"
#include "markers/marker_spec.h"
#include "markers/markers.h"
#include "stack/elf_image.h"
#include "stack/maps.h"

using namespace jankbpf;
namespace fs = std::filesystem;


namespace {

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : "";
}

// This process's executable mapping of `path`.
stack::MapEntry exec_mapping_of(pid_t pid, const std::string& path) {
  std::string text;
  stack::read_small_file("/proc/" + std::to_string(pid) + "/maps", text);
  const auto maps = stack::ProcMaps::parse(text);
  for (const auto& m : maps.entries())
    if (m.x && m.path == path) return m;
  return {};
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/jankbpf-marker-files-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A child that maps `file` executable and waits to be killed.
pid_t child_mapping(const std::string& file) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(file.c_str(), O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 ||
        mmap(nullptr, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
      _exit(1);
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char c;
  bool ok = read(ready[0], &c, 1) == 1;
  close(ready[0]);
  return ok ? pid : -1;
}

}  // namespace

TEST_CASE("a mapped file is the one maps names: same inode, and device unless through map_files",
          "[markers]") {
  stack::MapEntry m;
  m.dev_major = 8;
  m.dev_minor = 1;
  m.inode = 1234;
  struct stat st {};
  st.st_mode = S_IFREG | 0755;
  st.st_dev = makedev(8, 1);
  st.st_ino = 1234;
  CHECK(same_mapped_file(st, m, false));
  CHECK(same_mapped_file(st, m, true));
  st.st_ino = 1235;  // remapped since maps was read, or another file at that name
  CHECK_FALSE(same_mapped_file(st, m, false));
  CHECK_FALSE(same_mapped_file(st, m, true));
  st.st_ino = 1234;
  st.st_dev = makedev(0, 45);  // overlayfs or a btrfs subvolume: stat's own device
  CHECK_FALSE(same_mapped_file(st, m, false));
  CHECK(same_mapped_file(st, m, true));
  st.st_dev = makedev(8, 1);
  st.st_mode = S_IFIFO | 0644;
  CHECK_FALSE(same_mapped_file(st, m, true));
}

TEST_CASE("a mapped marker file is opened as the very file mapped", "[markers]") {
  const std::string exe = self_exe();
  stack::MapEntry m = exec_mapping_of(getpid(), exe);
  REQUIRE(m.end > m.start);
  std::string why;
  auto f = open_mapped_marker_file(getpid(), m, &why);
  REQUIRE(f);
  struct stat st;
  REQUIRE(stat(exe.c_str(), &st) == 0);
  CHECK(f->id().ino == st.st_ino);
  CHECK(f->attach_path() == "/proc/self/fd/" + std::to_string(f->fd()));
  CHECK(f->parse() != nullptr);
  // Maps says another inode (the range was remapped since it was read).
  m.inode += 1;
  CHECK_FALSE(open_mapped_marker_file(getpid(), m, &why));
  CHECK(why.find("not the file it maps") != std::string::npos);
}

TEST_CASE("a planned site stays on the file parsed when its path becomes a symlink", "[markers]") {
  TempDir dir;
  const std::string path = (dir.path / "marked").string(), other = (dir.path / "other").string();
  fs::copy_file(self_exe(), path);
  std::string err;
  auto spec = parse_marker(path + ":jankbpf_unit_marker_target," + path + ":jankbpf_unit_marker_target%return",
                           &err);
  REQUIRE(spec);
  MarkerTable t;
  REQUIRE(t.plan({*spec}, &err));
  // The path now holds another copy (a binary replaced on disk), which a
  // process maps: a file no probe covers.
  fs::copy_file(self_exe(), path + ".new");
  fs::rename(path + ".new", path);
  struct stat mapped;
  REQUIRE(stat(path.c_str(), &mapped) == 0);
  pid_t child = child_mapping(path);
  REQUIRE(child > 0);
  std::vector<std::string> notes;
  ProcessPlan plan = t.plan_for_process(child, &notes);
  REQUIRE(plan.attach.size() == 2);
  CHECK(plan.watch_exit);
  // Between parsing and attaching the name is swapped for a symlink to
  // another file: the descriptor still names the file parsed.
  fs::copy_file(self_exe(), other);
  fs::rename(path, path + ".orig");
  fs::create_symlink(other, path);
  struct stat via_fd, swapped;
  REQUIRE(stat(plan.attach[0].attach_path().c_str(), &via_fd) == 0);
  REQUIRE(stat(path.c_str(), &swapped) == 0);
  CHECK(via_fd.st_ino == mapped.st_ino);
  CHECK(swapped.st_ino != mapped.st_ino);
  CHECK(plan.attach[0].file_id.ino == mapped.st_ino);
  CHECK(plan.attach[0].offset == plan.attach[1].offset);
  // Tracked again (its next wait after an exec): known, nothing new.
  CHECK(t.plan_for_process(child, &notes).attach.empty());
  for (const auto& a : plan.attach) t.add_link(a, a.begin ? 11 : 12);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto links = t.process_gone(child);
  std::sort(links.begin(), links.end());
  CHECK(links == std::vector<uint64_t>{11, 12});
  CHECK(t.files().live() == 0);
  CHECK(t.process_gone(child).empty());
}

TEST_CASE("marker files are capped per process and in all, and released with their last user",
          "[markers]") {
  MarkerFiles files(2, 3);
  const FileId a{1, 1}, b{1, 2}, c{1, 3}, d{1, 4}, e{1, 5};
  using A = MarkerFiles::Admit;
  CHECK(files.admit(100, a) == A::New);
  CHECK(files.admit(100, b) == A::New);
  CHECK(files.admit(100, c) == A::Capped);  // a third for one process
  CHECK(files.take_cap_notice());
  CHECK_FALSE(files.take_cap_notice());  // said once
  CHECK(files.admit(200, a) == A::Known);
  CHECK(files.admit(200, d) == A::New);
  CHECK(files.admit(300, e) == A::Capped);  // a fourth in all
  CHECK(files.capped_count() == 2);
  CHECK(files.live() == 3);
  files.add_link(a, 1);
  files.add_link(b, 2);
  files.add_link(d, 3);
  files.planned(a, {7}, {});
  // 100 exits: b was only its own; a is 200's too.
  auto gone = files.drop(100);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].id == b);
  CHECK(gone[0].links == std::vector<uint64_t>{2});
  // 200 execs into something mapping only a: d goes.
  gone = files.drop(200, {a});
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].id == d);
  gone = files.drop(200);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].id == a);
  CHECK(gone[0].marker_ids == std::vector<uint32_t>{7});
  CHECK(files.live() == 0);
  CHECK_FALSE(files.has_user(200));
  // Room again.
  CHECK(files.admit(300, e) == A::New);
}

TEST_CASE("a fork/exec loop of fresh marked copies does not grow the markers", "[markers]") {
  TempDir dir;
  const std::string path = (dir.path / "marked").string();
  fs::copy_file(self_exe(), path);
  std::string err;
  auto spec = parse_marker(path + ":jankbpf_unit_marker_target," + path + ":jankbpf_unit_marker_target%return",
                           &err);
  REQUIRE(spec);
  MarkerTable t;
  REQUIRE(t.plan({*spec}, &err));
  size_t markers = 0;
  for (int round = 0; round < 3; round++) {
    fs::copy_file(self_exe(), path + ".new");
    fs::rename(path + ".new", path);
    pid_t child = child_mapping(path);
    REQUIRE(child > 0);
    std::vector<std::string> notes;
    auto plan = t.plan_for_process(child, &notes);
    CHECK(plan.attach.size() == 2);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    t.process_gone(child);
    if (round == 0) markers = t.markers().size();
    CHECK(t.markers().size() == markers);  // the released file's marker id is reused
    CHECK(t.files().live() == 0);
  }
}
