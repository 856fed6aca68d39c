#include "util/own_clock.h"

#include <fcntl.h>
#include <unistd.h>

namespace jankbpf::util {

namespace {

// One descriptor a thread, opened on first use (thread-self names the
// thread that opens it) and closed with the thread.
struct SchedStat {
  int fd = -2;
  uint64_t last = 0;  // kept when a read fails: time never runs backwards
  ~SchedStat() {
    if (fd >= 0) ::close(fd);
  }
  uint64_t read() {
    if (fd == -2) fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return last;
    char buf[96];
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    uint64_t v;
    if (n > 0 && parse_run_delay(buf, static_cast<size_t>(n), &v) && v >= last) last = v;
    return last;
  }
};

thread_local SchedStat tl_stat;

}  // namespace

bool parse_run_delay(const char* text, size_t len, uint64_t* out) {
  size_t i = 0;
  auto number = [&](uint64_t* v) {
    while (i < len && text[i] == ' ') ++i;
    if (i >= len || text[i] < '0' || text[i] > '9') return false;
    uint64_t x = 0;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (x > (UINT64_MAX - 9) / 10) return false;
      x = x * 10 + static_cast<uint64_t>(text[i] - '0');
    }
    *v = x;
    return true;
  };
  uint64_t run, delay;
  if (!number(&run) || !number(&delay)) return false;
  *out = delay;
  return true;
}

uint64_t run_delay_ns() { return tl_stat.read(); }

std::chrono::steady_clock::time_point own_now() {
  const uint64_t delay = tl_stat.read();
  return std::chrono::steady_clock::now() - std::chrono::nanoseconds(delay);
}

}  // namespace jankbpf::util
