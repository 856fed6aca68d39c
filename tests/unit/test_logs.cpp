// LogDir: names, modes, the cap and its aging (oldest first, never more than
// 100 per write), links that must not be followed, and disks that refuse
// writes (read-only, full), which must give error results and no throw.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "logs/log_dir.h"
#include "skip.h"

using jankbpf::LogDir;
using jankbpf::LogDirOptions;
using jankbpf::LogKind;
using jankbpf::LogWrite;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  std::string path;
  Scratch() {
    char tmpl[] = "/tmp/jankbpf-logs-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);  // removes links, never follows them
  }
};

// A tmpfs mounted on a fresh dir, unmounted at scope end; root only.
struct Tmpfs {
  Scratch dir;
  bool mounted = false;
  explicit Tmpfs(const char* opts = "size=8m") {
    mounted = ::mount("jankbpf-test", dir.path.c_str(), "tmpfs", 0, opts) == 0;
  }
  bool remount_ro() {
    return ::mount(nullptr, dir.path.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }
  ~Tmpfs() {
    if (mounted) ::umount2(dir.path.c_str(), MNT_DETACH);
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void put(const std::string& path, size_t bytes, char fill = 'x') {
  std::ofstream out(path, std::ios::binary);
  out << std::string(bytes, fill);
}

mode_t mode_of(const std::string& path) {
  struct stat st{};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

LogDirOptions opts(const std::string& path, uint64_t cap, int64_t now) {
  LogDirOptions o;
  o.path = path;
  o.cap_bytes = cap;
  o.clock_ms = [now] { return now; };
  return o;
}

bool is_root() { return geteuid() == 0; }

}  // namespace

TEST_CASE("log file names sort by time and parse back", "[logs]") {
  CHECK(LogDir::file_name(LogKind::Stack, 4242, 1700000000123) == "stack-4242-1700000000123.txt");
  CHECK(LogDir::file_name(LogKind::Trace, 7, 5) == "trace-7-0000000000005.dat");
  CHECK(LogDir::file_name(LogKind::TraceText, 7, 5, 2) == "trace-7-0000000000005-2.txt");
  LogDir::Entry e;
  REQUIRE(LogDir::parse_name("trace-7-0000000000005-2.txt", e));
  CHECK(e.timestamp_ms == 5);
  CHECK(e.seq == 2);
  REQUIRE(LogDir::parse_name("stack-1-1700000000123.txt", e));
  CHECK(e.timestamp_ms == 1700000000123);
  for (const char* foreign : {"stack-1-17.txt", "stack-1-1700000000123.dat", "stack-x-1700000000123.txt",
                              "notes.txt", ".stack-1-1700000000123.txt", "stack-1-1700000000123.txt~",
                              "trace--1700000000123.dat", "stack-1-1700000000123-.txt"}) {
    CAPTURE(foreign);
    CHECK_FALSE(LogDir::parse_name(foreign, e));
  }
}

TEST_CASE("the directory is created 0750 with its parents, files 0640", "[logs]") {
  Scratch s;
  mode_t old = umask(0);  // modes must not depend on the caller's umask
  LogDir d(opts(s.path + "/a/b/logs", 1 << 20, 1700000000000));
  LogWrite w = d.write(LogKind::Stack, 12, "hello\n");
  umask(old);
  REQUIRE(w.ok());
  CHECK(w.error.empty());
  CHECK_FALSE(w.over_limit);
  CHECK(w.path == s.path + "/a/b/logs/stack-12-1700000000000.txt");
  CHECK(w.bytes == 6);
  CHECK(slurp(w.path) == "hello\n");
  CHECK(mode_of(s.path + "/a/b/logs") == 0750);
  CHECK(mode_of(s.path + "/a") == 0750);
  CHECK(mode_of(w.path) == 0640);
  CHECK(d.used_bytes() == 6);
}

TEST_CASE("a name already taken gets the next free suffix, in time order", "[logs]") {
  Scratch s;
  LogDir d(opts(s.path, 1 << 20, 1700000000000));
  LogWrite a = d.write(LogKind::Stack, 5, "a");
  LogWrite b = d.write(LogKind::Stack, 5, "b");
  LogWrite c = d.write(LogKind::Stack, 5, "c");
  CHECK(fs::path(a.path).filename() == "stack-5-1700000000000.txt");
  CHECK(fs::path(b.path).filename() == "stack-5-1700000000000-1.txt");
  CHECK(fs::path(c.path).filename() == "stack-5-1700000000000-2.txt");
  auto list = d.list();
  REQUIRE(list.size() == 3);
  CHECK(list[0].name == "stack-5-1700000000000.txt");
  CHECK(list[2].name == "stack-5-1700000000000-2.txt");
}

TEST_CASE("aging past the cap removes the oldest first, at most 100 per write", "[logs]") {
  Scratch s;
  // 250 files of 100 bytes, mixed kinds and pids so that plain name order
  // (all stack- before trace-, pid before time) is not time order.
  std::set<std::string> all;
  std::vector<std::string> by_time;
  for (int i = 0; i < 250; ++i) {
    LogKind kind = i % 3 == 0 ? LogKind::Trace : LogKind::Stack;
    pid_t pid = 1000 - i;  // later files get smaller pids
    std::string name = LogDir::file_name(kind, pid, 1600000000000 + i * 1000);
    put(s.path + "/" + name, 100);
    by_time.push_back(name);
  }
  // Files that are not jankbpf's: neither counted nor ever deleted.
  put(s.path + "/notes.txt", 50000);
  put(s.path + "/stack-1-17.txt", 100);
  symlink("/etc/passwd", (s.path + "/stack-1-0000000000001.txt").c_str());  // "oldest" name

  LogDir d(opts(s.path, 10000, 1700000000000));
  CHECK(d.used_bytes() == 25000);

  // 25000 + 100 needs 151 deletions to fit under 10000: only 100 are
  // allowed, so it still does not fit, and nothing is written.
  LogWrite w = d.write(LogKind::Stack, 77, std::string(100, 's'));
  CHECK(w.over_limit);
  CHECK(w.error.empty());
  CHECK_FALSE(w.ok());
  REQUIRE(w.aged.size() == 100);
  CHECK(std::vector<std::string>(by_time.begin(), by_time.begin() + 100) == w.aged);
  CHECK(d.used_bytes() == 15000);
  CHECK_FALSE(fs::exists(s.path + "/" + by_time[99]));
  CHECK(fs::exists(s.path + "/" + by_time[100]));

  // The next write needs 51 more: it deletes exactly those and fits.
  w = d.write(LogKind::Stack, 77, std::string(100, 's'));
  CHECK_FALSE(w.over_limit);
  REQUIRE(w.ok());
  REQUIRE(w.aged.size() == 51);
  CHECK(w.aged.front() == by_time[100]);
  CHECK(w.aged.back() == by_time[150]);
  CHECK(d.used_bytes() == 10000);

  CHECK(fs::file_size(s.path + "/notes.txt") == 50000);
  CHECK(fs::exists(s.path + "/stack-1-17.txt"));
  CHECK(fs::is_symlink(s.path + "/stack-1-0000000000001.txt"));
  CHECK(fs::exists("/etc/passwd"));
}

TEST_CASE("a file larger than the cap is refused without aging anything", "[logs]") {
  Scratch s;
  put(s.path + "/" + LogDir::file_name(LogKind::Stack, 1, 1600000000000), 100);
  LogDir d(opts(s.path, 1000, 1700000000000));
  LogWrite w = d.write(LogKind::Trace, 1, std::string(1001, 't'));
  CHECK(w.over_limit);
  CHECK(w.aged.empty());
  CHECK(d.used_bytes() == 100);
}

TEST_CASE("a symlink planted under the next file name is not followed", "[logs]") {
  Scratch s;
  Scratch elsewhere;
  const std::string victim = elsewhere.path + "/victim";
  put(victim, 10, 'v');
  const int64_t now = 1700000000000;
  const std::string planted = s.path + "/" + LogDir::file_name(LogKind::Stack, 42, now);
  REQUIRE(symlink(victim.c_str(), planted.c_str()) == 0);
  // A dangling link must not be followed either (O_CREAT would create its target).
  const std::string dangling_target = elsewhere.path + "/created";
  REQUIRE(symlink(dangling_target.c_str(),
                  (s.path + "/" + LogDir::file_name(LogKind::Stack, 42, now, 1)).c_str()) == 0);

  LogDir d(opts(s.path, 1 << 20, now));
  LogWrite w = d.write(LogKind::Stack, 42, "stack data");
  REQUIRE(w.ok());
  CHECK(fs::path(w.path).filename() == LogDir::file_name(LogKind::Stack, 42, now, 2));
  CHECK(slurp(victim) == std::string(10, 'v'));
  CHECK_FALSE(fs::exists(fs::symlink_status(dangling_target)));
  CHECK(fs::is_symlink(planted));
}

TEST_CASE("a log dir that is a symlink is refused", "[logs]") {
  Scratch s;
  Scratch elsewhere;
  REQUIRE(symlink(elsewhere.path.c_str(), (s.path + "/logs").c_str()) == 0);

  LogDir d(opts(s.path + "/logs", 1 << 20, 1700000000000));
  CHECK_FALSE(d.open());
  CHECK(d.error() == "log dir " + s.path + "/logs: \"logs\" is a symlink; jankbpf follows no links here, give the real path");
  LogWrite w = d.write(LogKind::Stack, 1, "x");
  CHECK_FALSE(w.ok());
  CHECK(w.error.find("is a symlink") != std::string::npos);

  // A link as a parent component is refused the same way.
  LogDir d2(opts(s.path + "/logs/sub", 1 << 20, 1700000000000));
  CHECK_FALSE(d2.write(LogKind::Stack, 1, "x").ok());
  CHECK(fs::is_empty(elsewhere.path));
}

TEST_CASE("a log dir that cannot be created gives an error, no throw", "[logs]") {
  Scratch s;
  put(s.path + "/file", 1);
  LogDir d(opts(s.path + "/file/logs", 1 << 20, 1));
  LogWrite w = d.write(LogKind::Stack, 1, "x");
  CHECK_FALSE(w.ok());
  CHECK(w.error == "log dir " + s.path + "/file/logs: \"file\": Not a directory");
  LogDir dots(opts(s.path + "/../x", 1 << 20, 1));
  CHECK_FALSE(dots.open());
  CHECK(dots.error().find("\"..\" is not allowed") != std::string::npos);
}

TEST_CASE("a directory that appears later is picked up", "[logs]") {
  Scratch s;
  put(s.path + "/blocker", 1);
  LogDir d(opts(s.path + "/blocker", 1 << 20, 1700000000000));
  CHECK_FALSE(d.write(LogKind::Stack, 1, "x").ok());
  fs::remove(s.path + "/blocker");
  CHECK(d.write(LogKind::Stack, 1, "x").ok());
}

TEST_CASE("a log dir removed while in use is recreated", "[logs]") {
  Scratch s;
  LogDir d(opts(s.path + "/logs", 1 << 20, 1700000000000));
  REQUIRE(d.write(LogKind::Stack, 1, "x").ok());
  fs::remove_all(s.path + "/logs");
  LogWrite w = d.write(LogKind::Stack, 1, "y");
  REQUIRE(w.ok());
  CHECK(slurp(w.path) == "y");
  CHECK(mode_of(s.path + "/logs") == 0750);
}

TEST_CASE("a read-only log dir gives error and over-limit results, no throw", "[logs]") {
  SKIP_UNLESS(is_root(), "mounting a read-only tmpfs needs root (chmod does not stop root)");
  Tmpfs t;
  REQUIRE(t.mounted);
  const std::string dir = t.dir.path + "/logs";
  LogDir d(opts(dir, 1000, 1700000000000));
  REQUIRE(d.write(LogKind::Stack, 9, std::string(600, 'a')).ok());
  REQUIRE(t.remount_ro());

  LogWrite fits = d.write(LogKind::Stack, 9, std::string(100, 'b'));
  CHECK_FALSE(fits.ok());
  CHECK_FALSE(fits.over_limit);
  CHECK(fits.error.find("Read-only file system") != std::string::npos);

  // Past the cap, aging cannot delete on a read-only disk: over the limit.
  LogWrite over = d.write(LogKind::Stack, 9, std::string(600, 'c'));
  CHECK_FALSE(over.ok());
  CHECK(over.over_limit);
  CHECK(over.aged.empty());

  // A fresh LogDir on the read-only mount cannot create its directory.
  LogDir fresh(opts(t.dir.path + "/other", 1000, 1));
  LogWrite w = fresh.write(LogKind::Stack, 1, "x");
  CHECK_FALSE(w.ok());
  CHECK(w.error == "log dir " + t.dir.path + "/other: cannot create \"other\": Read-only file system");
}

TEST_CASE("a full disk gives an error result and leaves no partial file", "[logs]") {
  SKIP_UNLESS(is_root(), "mounting a small tmpfs needs root");
  Tmpfs t("size=64k");
  REQUIRE(t.mounted);
  LogDir d(opts(t.dir.path, 10 << 20, 1700000000000));
  LogWrite w = d.write(LogKind::Trace, 3, std::string(256 * 1024, 'z'));
  CHECK_FALSE(w.ok());
  CHECK_FALSE(w.over_limit);
  CHECK(w.error == "log dir " + t.dir.path + ": cannot write trace-3-1700000000000.dat: No space left on device");
  CHECK(fs::is_empty(t.dir.path));
}

TEST_CASE("adopting a file renames it on the same filesystem", "[logs]") {
  Scratch s;
  fs::create_directory(s.path + "/private");
  const std::string src = s.path + "/private/t.dat";
  put(src, 3000, 'd');
  chmod(src.c_str(), 0644);
  LogDir d(opts(s.path + "/logs", 1 << 20, 1700000000000));
  LogWrite w = d.adopt(LogKind::Trace, 55, src);
  REQUIRE(w.ok());
  CHECK(w.path == s.path + "/logs/trace-55-1700000000000.dat");
  CHECK(w.bytes == 3000);
  CHECK(slurp(w.path) == std::string(3000, 'd'));
  CHECK(mode_of(w.path) == 0640);
  CHECK_FALSE(fs::exists(src));
}

TEST_CASE("adopting a file from another filesystem copies it", "[logs]") {
  SKIP_UNLESS(is_root(), "a second filesystem (tmpfs) needs root");
  Tmpfs t;
  REQUIRE(t.mounted);
  Scratch s;  // on /tmp's filesystem, not the tmpfs
  const std::string src = s.path + "/t.dat";
  put(src, 5000, 'e');
  LogDir d(opts(t.dir.path + "/logs", 1 << 20, 1700000000000));
  LogWrite w = d.adopt(LogKind::Trace, 56, src);
  REQUIRE(w.ok());
  CHECK(slurp(w.path) == std::string(5000, 'e'));
  CHECK(mode_of(w.path) == 0640);
  CHECK_FALSE(fs::exists(src));
}

TEST_CASE("adopting counts against the cap and refuses links", "[logs]") {
  Scratch s;
  put(s.path + "/big.dat", 2000);
  LogDir d(opts(s.path + "/logs", 1000, 1700000000000));
  LogWrite w = d.adopt(LogKind::Trace, 1, s.path + "/big.dat");
  CHECK(w.over_limit);
  CHECK_FALSE(w.ok());
  CHECK(fs::exists(s.path + "/big.dat"));  // left for the caller to clean up

  symlink("/etc/passwd", (s.path + "/link.dat").c_str());
  w = d.adopt(LogKind::Trace, 1, s.path + "/link.dat");
  CHECK_FALSE(w.ok());
  CHECK(w.error == "adopt " + s.path + "/link.dat: Too many levels of symbolic links");
  CHECK(fs::exists("/etc/passwd"));
}
