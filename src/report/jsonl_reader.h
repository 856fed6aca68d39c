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
};

struct ReadStats {
  size_t lines = 0, records = 0, bad_lines = 0, stack_logs = 0, logs_missing = 0;
};

// One record line into the typed model; false when it is not a task record.
bool task_from_json(const std::string& line, TaskRecord* rec, std::string* error);

Run read_jsonl(std::istream& in, const ReadOptions& opts, ReadStats* stats);

// A `frame` record into the typed model (report/jsonl_frames.cpp); false
// when it is not one, or its timelines make no sense.
bool frame_from_json(const nlohmann::json& j, FrameRecord* rec);

}  // namespace jankbpf::report
