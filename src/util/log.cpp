#include "util/log.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace jankbpf::log {
namespace {

int g_verbosity = 0;

void vwrite(Level level, const char* prefix, const char* fmt, va_list ap) {
  if (!enabled(level)) return;
  // One fprintf per line keeps lines whole when threads log concurrently.
  char buf[2048];
  vsnprintf(buf, sizeof buf, fmt, ap);
  fprintf(stderr, "jankbpf: %s%s\n", prefix, escape_control(buf).c_str());
}

}  // namespace

std::string escape_control(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

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
