// Reads a run back from its JSON lines (jank, hang, exit, summary) and the
// stack logs the records name, for `jankbpf report`: the same pictures
// after the fact, from a fleet's records copied to a laptop.
#pragma once

#include <istream>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "report/run.h"

namespace jankbpf::report {

struct ReadOptions {
  // Where to look for a stack log or trace whose recorded path is missing
  // (logs copied elsewhere): each of these dirs, by the file's name.
  std::vector<std::string> log_dirs;
  bool read_logs = true;  // false: the records alone (the fuzz target)
};

// The input is untrusted (records copied from a fleet): lines past 4 MiB
// or nested past 16 are bad lines; a record names at most 8 files; a stack
// log is a regular file of at most 64 MiB, read once however many records
// name it, parsed within StackLogLimits; the run within Run's bounds.
struct ReadStats {
  size_t lines = 0, records = 0, bad_lines = 0, stack_logs = 0, logs_missing = 0;
  size_t lines_too_long = 0;   // of bad_lines
  size_t logs_refused = 0;     // not a regular file, too large, unreadable
  size_t logs_truncated = 0;   // past StackLogLimits: the rest left out
  size_t logs_repeated = 0;    // named by more than one record: read once
  uint64_t samples_dropped = 0;  // past Run::kMaxSamples or the stack table's bound
  std::vector<std::string> refusals;  // the first few reasons
};

// One record line into the typed model; false when it is not a task record.
bool task_from_json(const std::string& line, TaskRecord* rec, std::string* error);

Run read_jsonl(std::istream& in, const ReadOptions& opts, ReadStats* stats);

// A `frame` record into the typed model (report/jsonl_frames.cpp); false
// when it is not one, or its timelines make no sense.
bool frame_from_json(const nlohmann::json& j, FrameRecord* rec);

}  // namespace jankbpf::report
