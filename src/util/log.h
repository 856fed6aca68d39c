// Human-facing status on stderr; stdout carries JSON lines only.
#pragma once

#include <string>
#include <string_view>

namespace jankbpf::log {

// Names from watched processes (comm, paths, symbols) are arbitrary bytes:
// control characters become \n, \t or \xNN so one process cannot forge or
// garble lines of stderr or of a log file. Every log line goes through it.
std::string escape_control(std::string_view s);

enum class Level { Error = 0, Status = 1, Info = 2, Debug = 3 };

// Set once from -v: by default errors, warnings and the essential status
// lines (attached, detached); each -v adds a level.
void set_verbosity(int v);
bool enabled(Level level);

void error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void status(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace jankbpf::log
