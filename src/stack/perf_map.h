// JIT symbol maps in perf's /tmp/perf-PID.map format ("START SIZE NAME",
// hex, one per line), as Node (--perf-basic-prof), the JVM agents, LuaJIT
// and others write them. Untrusted text: junk lines are counted, skipped.
//
// Parsed as a stream (a chunk at a time, the map never held as text) into
// compact entries whose names live in fixed blocks, within limits on the
// entries and bytes kept (issue 26: a 256 MiB map of 6-byte lines once
// cost 3.3 GiB); what is past them is left out and cut() says so. A map
// that grows is read from where the last read stopped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/budget.h"

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

struct PerfMapLimits {
  size_t max_entries = 1u << 20;
  uint64_t max_bytes = 64ull << 20;  // entries and names kept
};

class PerfMap {
 public:
  struct Entry {
    uint64_t start = 0, size = 0;
    std::string_view name;  // in the map's name blocks: valid while it lives
  };
  explicit PerfMap(PerfMapLimits limits = {}, BudgetLedger::Charge charge = {})
      : limits_(limits), charge_(std::move(charge)) {}
  PerfMap(PerfMap&&) = default;
  PerfMap& operator=(PerfMap&&) = default;
  // The whole text at once (tests, fuzzing).
  static PerfMap parse(std::string_view text, PerfMapLimits limits = {});

  // Streaming: the complete lines of `chunk` are taken (a partial last
  // line waits for the next chunk), then finish() makes them findable.
  // false once a limit (or the charge) stops taking entries.
  bool feed(std::string_view chunk);
  void finish();

  // The entry covering addr (a later line wins over an earlier one at the
  // same start: JIT code gets reused), or nullptr.
  const Entry* lookup(uint64_t addr) const;
  size_t size() const { return entries_.size(); }
  size_t bad_lines() const { return bad_lines_; }
  // A limit left entries out (or the reader stopped reading: mark_cut()).
  bool cut() const { return cut_; }
  void mark_cut() { cut_ = true; }
  uint64_t held_bytes() const { return held_; }

 private:
  void take_line(std::string_view line);
  std::string_view keep_name(std::string_view name);

  PerfMapLimits limits_;
  BudgetLedger::Charge charge_;  // held_, charged to the process (empty: not charged)
  std::vector<Entry> entries_;
  size_t sorted_ = 0;  // entries_[0, sorted_) are sorted; the rest came since
  std::deque<std::unique_ptr<char[]>> blocks_;
  size_t block_used_ = 0;
  std::string partial_;  // a line split by the chunk boundary
  bool skipping_ = false;  // inside an over-long line, until its newline
  size_t bad_lines_ = 0;
  uint64_t held_ = 0;
  bool cut_ = false;
};

// The namespace pid of `pid` (last field of NSpid: in /proc/PID/status),
// or pid itself when there is no such line.
pid_t namespace_pid(const std::string& proc_root, pid_t pid);

}  // namespace jankbpf::stack
