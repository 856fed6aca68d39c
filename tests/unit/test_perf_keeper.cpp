// The perf event keeper (src/bpf/perf_keeper.h): an event it keeps outlives
// jankbpf's fd of it, and goes once the keeper lets it go. Seen through a
// uprobe on a function of this binary: while the event lives its
// breakpoint is in our own text, and the kernel takes it out when the
// event closes.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "bpf/perf_keeper.h"
#include "skip.h"

namespace {

extern "C" __attribute__((noinline, used)) int jb_keeper_probe_site(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}

struct Site {
  std::string path;
  uint64_t file_offset = 0;
  const unsigned char* mem = nullptr;
};

// Where jb_keeper_probe_site is in its file, from /proc/self/maps.
bool find_site(Site* site) {
  const auto addr = reinterpret_cast<uintptr_t>(&jb_keeper_probe_site);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long start, end, off;
    char perms[8], path[512] = "";
    if (sscanf(line.c_str(), "%lx-%lx %7s %lx %*s %*s %511s", &start, &end, perms, &off, path) < 4) continue;
    if (addr < start || addr >= end || path[0] != '/') continue;
    site->path = path;
    site->file_offset = addr - start + off;
    site->mem = reinterpret_cast<const unsigned char*>(addr);
    return true;
  }
  return false;
}

// Whether the function's first bytes in memory differ from the file's: a
// registered uprobe's breakpoint.
bool probed(const Site& s) {
  std::ifstream f(s.path, std::ios::binary);
  char bytes[4] = {};
  f.seekg(static_cast<std::streamoff>(s.file_offset));
  f.read(bytes, sizeof bytes);
  return memcmp(bytes, s.mem, sizeof bytes) != 0;
}

bool unprobed_within(const Site& s, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (probed(s) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return !probed(s);
}

}  // namespace

TEST_CASE("a kept perf event outlives its fd and closes once let go; a full keeper or a non-perf fd is refused",
          "[bpf][tracefs]") {
  SKIP_UNLESS(geteuid() == 0, "needs root (a BPF map, perf events)");
  using namespace jankbpf;
  std::string err;
  auto keeper = PerfKeeper::create(2, &err);
  REQUIRE(keeper);
  Site site;
  REQUIRE(find_site(&site));
  REQUIRE(jb_keeper_probe_site(1) == 4);
  REQUIRE_FALSE(probed(site));

  int ufd = open_uprobe_event(site.path, site.file_offset, false, -1, &err);
  REQUIRE(ufd >= 0);
  CHECK(probed(site));
  auto slot = keeper->keep(ufd);
  REQUIRE(slot);
  close(ufd);  // the keeper's reference holds the event
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(probed(site));
  CHECK(jb_keeper_probe_site(2) == 7);  // the breakpoint is stepped over

  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  CHECK_FALSE(keeper->keep(pipefd[0]));  // not a perf event
  CHECK(keeper->refused() == 1);
  close(pipefd[0]);
  close(pipefd[1]);

  int tfd = open_tracepoint_event("syscalls", "sys_enter_getppid", &err);
  REQUIRE(tfd >= 0);
  CHECK(keeper->keep(tfd));
  CHECK(keeper->kept() == 2);
  int tfd2 = open_tracepoint_event("syscalls", "sys_enter_getppid", &err);
  REQUIRE(tfd2 >= 0);
  CHECK_FALSE(keeper->keep(tfd2));  // full
  close(tfd);
  close(tfd2);

  keeper->release(*slot);
  CHECK(keeper->kept() == 1);
  CHECK(unprobed_within(site, std::chrono::seconds(20)));

  // The keeper's own end: what it still holds closes after it, too.
  ufd = open_uprobe_event(site.path, site.file_offset, false, -1, &err);
  REQUIRE(ufd >= 0);
  REQUIRE(keeper->keep(ufd));
  close(ufd);
  CHECK(probed(site));
  keeper.reset();
  CHECK(unprobed_within(site, std::chrono::seconds(20)));
}

TEST_CASE("opening a tracepoint the kernel lacks says which", "[bpf][tracefs]") {
  SKIP_UNLESS(geteuid() == 0, "needs root (perf events)");
  std::string err;
  CHECK(jankbpf::open_tracepoint_event("syscalls", "sys_enter_no_such_call", &err) == -1);
  CHECK(err.find("syscalls:sys_enter_no_such_call") != std::string::npos);
}
