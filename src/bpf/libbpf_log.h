// libbpf's messages: to jankbpf's debug log, and the last warnings kept so
// a failed load or attach can say why without -v.
#pragma once

#include <string>

namespace jankbpf {

// Routes libbpf's output here (libbpf_set_print).
void capture_libbpf_log();
// Forgets what was kept, before an operation whose failure should quote it.
void clear_libbpf_log();
// The last line libbpf printed (not debug), without its newline; "" if none.
std::string last_libbpf_line();
// Everything kept since the last clear (at most the last 4 KB).
std::string libbpf_log_text();

}  // namespace jankbpf
