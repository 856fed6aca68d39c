// One sink for every record; the JSON-lines implementation is what stdout
// and --output carry.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/records.h"
#include "util/fd.h"

namespace jankbpf {

class Output {
 public:
  virtual ~Output() = default;
  virtual void emit(const TaskRecord& r) = 0;
  virtual void emit(const ExitRecord& r) = 0;
  virtual void emit(const SummaryRecord& r) = 0;
  // Frames (issue 28): a janky frame's record; every frame, in batches.
  virtual void emit(const FrameRecord&) {}
  virtual void emit(const FrameBatch&) {}
};

// Hands every record to each of several sinks, in order (JSON lines, and
// whatever else the options ask for: reports, traces, metrics).
class TeeOutput final : public Output {
 public:
  void add(Output& sink) { sinks_.push_back(&sink); }
  void emit(const TaskRecord& r) override { for (auto* s : sinks_) s->emit(r); }
  void emit(const ExitRecord& r) override { for (auto* s : sinks_) s->emit(r); }
  void emit(const SummaryRecord& r) override { for (auto* s : sinks_) s->emit(r); }
  void emit(const FrameRecord& r) override { for (auto* s : sinks_) s->emit(r); }
  void emit(const FrameBatch& r) override { for (auto* s : sinks_) s->emit(r); }

 private:
  std::vector<Output*> sinks_;
};

// Renders records as one JSON object per line (public for the unit tests).
std::string to_json_line(const TaskRecord& r);
std::string to_json_line(const ExitRecord& r);
std::string to_json_line(const SummaryRecord& r);
std::string to_json_line(const FrameRecord& r);  // output/json_frames.cpp

// JSON lines to stdout, or appended to a file: each line is one write(2),
// so lines stay whole and are visible as soon as they are made.
class JsonLinesOutput final : public Output {
 public:
  // An empty path means stdout. Returns nullptr with *error set when the
  // file cannot be opened; never follows a symlink at the last component.
  static std::unique_ptr<JsonLinesOutput> open(const std::string& path, std::string* error);
  void emit(const TaskRecord& r) override { write_line(to_json_line(r)); }
  void emit(const ExitRecord& r) override { write_line(to_json_line(r)); }
  void emit(const SummaryRecord& r) override { write_line(to_json_line(r)); }
  void emit(const FrameRecord& r) override { write_line(to_json_line(r)); }
  uint64_t write_errors() const { return write_errors_; }
  // The reader went away (EPIPE): there is no point in going on.
  bool broken() const { return broken_; }
  // Log rotation (SIGHUP): opens the path again and writes there from the
  // next line on; a line goes wholly to the old file or the new one. False
  // with *error set when there is no file (stdout) or it cannot be opened
  // (the old file is kept then, so nothing is lost).
  bool reopen(std::string* error);
  bool is_file() const { return !path_.empty(); }
  // From now on a line waits for a slow reader until `deadline` at most and
  // is then given up (counted in write_errors() and stalled_lines()); a
  // write waiting now is woken to see it. Set at stop: a reader that
  // stopped reading must not keep jankbpf from exiting.
  void wait_for_reader_until(std::chrono::steady_clock::time_point deadline);
  uint64_t stalled_lines() const { return stalled_; }

 private:
  JsonLinesOutput(Fd fd, std::string path);
  void write_line(std::string line);
  bool wait_writable();  // false: the deadline passed, give the line up
  std::mutex mu_;  // the reporter thread writes, the main thread reopens
  Fd fd_;
  Fd wake_;  // eventfd: wait_for_reader_until() wakes a waiting write
  bool use_send_ = false;  // a socket: send(MSG_DONTWAIT) instead of write
  const std::string path_;  // "" for stdout
  std::atomic<int64_t> deadline_ns_ = -1;  // steady clock; -1: wait as long as it takes
  std::atomic<uint64_t> write_errors_ = 0;
  std::atomic<uint64_t> stalled_ = 0;
  std::atomic<bool> broken_ = false;
};

}  // namespace jankbpf
