#include "bpf/libbpf_log.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "util/log.h"

namespace jankbpf {
namespace {

std::mutex g_mu;
std::string g_last;  // libbpf's non-debug output since the last clear, at most 4 KB

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list ap) {
  // libbpf says something for every relocation: thousands of debug lines
  // at load, not worth formatting unless they are shown.
  if (level == LIBBPF_DEBUG && !log::enabled(log::Level::Debug)) return 0;
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  if (level != LIBBPF_DEBUG) {
    std::lock_guard lk(g_mu);
    g_last += buf;
    if (g_last.size() > 4096) g_last.erase(0, g_last.size() - 4096);
  }
  if (log::enabled(log::Level::Debug) || (level == LIBBPF_WARN && log::enabled(log::Level::Info))) {
    std::string line(buf);
    while (!line.empty() && line.back() == '\n') line.pop_back();
    log::debug("libbpf: %s", line.c_str());
  }
  return 0;
}

}  // namespace

void capture_libbpf_log() { libbpf_set_print(libbpf_print); }

void clear_libbpf_log() {
  std::lock_guard lk(g_mu);
  g_last.clear();
}

std::string libbpf_log_text() {
  std::lock_guard lk(g_mu);
  return g_last;
}

std::string last_libbpf_line() {
  std::string why = libbpf_log_text();
  while (!why.empty() && why.back() == '\n') why.pop_back();
  auto nl = why.rfind('\n');
  if (nl != std::string::npos) why = why.substr(nl + 1);
  return why;
}

}  // namespace jankbpf
