// JIT symbol maps in perf's /tmp/perf-PID.map format ("START SIZE NAME",
// hex, one per line), as Node (--perf-basic-prof), the JVM agents, LuaJIT
// and others write them. Untrusted text: junk lines are counted, skipped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jankbpf::stack {

struct JitSymbol {
  std::string function;  // "busy", "(anonymous)", or the raw name
  std::string file;      // script path/URL when the name carries one
  uint32_t line = 0, column = 0;
};

// Splits a perf-map name into function and location. Understands V8's
// "JS:*name /path/file.js:3:18" (and LazyCompile:, Function:,
// InterpretedFunction:, Script: kinds; the *~^+ tier markers); anything
// else is returned whole as the function.
JitSymbol parse_jit_name(std::string_view name);

class PerfMap {
 public:
  struct Entry {
    uint64_t start = 0, size = 0;
    std::string name;
  };
  static PerfMap parse(std::string_view text);

  // The entry covering addr (a later line wins over an earlier one at the
  // same start: JIT code gets reused), or nullptr.
  const Entry* lookup(uint64_t addr) const;
  size_t size() const { return entries_.size(); }
  size_t bad_lines() const { return bad_lines_; }

 private:
  std::vector<Entry> entries_;
  size_t bad_lines_ = 0;
};

// The namespace pid of `pid` (last field of NSpid: in /proc/PID/status),
// or pid itself when there is no such line.
pid_t namespace_pid(const std::string& proc_root, pid_t pid);

}  // namespace jankbpf::stack
