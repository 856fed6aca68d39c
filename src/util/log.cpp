#include "util/log.h"

#include <cstdarg>
#include <cstdio>

namespace jankbpf::log {
namespace {

int g_verbosity = 0;

void vwrite(Level level, const char* prefix, const char* fmt, va_list ap) {
  if (!enabled(level)) return;
  // One fprintf per line keeps lines whole when threads log concurrently.
  char buf[2048];
  vsnprintf(buf, sizeof buf, fmt, ap);
  fprintf(stderr, "jankbpf: %s%s\n", prefix, buf);
}

}  // namespace

void set_verbosity(int v) { g_verbosity = v; }
bool enabled(Level level) { return static_cast<int>(level) <= g_verbosity + 1; }

#define JB_LOG_FN(name, level, prefix)   \
  void name(const char* fmt, ...) {      \
    va_list ap;                          \
    va_start(ap, fmt);                   \
    vwrite(level, prefix, fmt, ap);      \
    va_end(ap);                          \
  }

JB_LOG_FN(error, Level::Error, "error: ")
JB_LOG_FN(warn, Level::Status, "warning: ")
JB_LOG_FN(status, Level::Status, "")
JB_LOG_FN(info, Level::Info, "")
JB_LOG_FN(debug, Level::Debug, "debug: ")

}  // namespace jankbpf::log
