// One sink for every record; the JSON-lines implementation is what stdout
// and --output carry.
#pragma once

#include <memory>
#include <string>

#include "model/records.h"
#include "util/fd.h"

namespace jankbpf {

class Output {
 public:
  virtual ~Output() = default;
  virtual void emit(const TaskRecord& r) = 0;
  virtual void emit(const ExitRecord& r) = 0;
  virtual void emit(const SummaryRecord& r) = 0;
};

// Renders records as one JSON object per line (public for the unit tests).
std::string to_json_line(const TaskRecord& r);
std::string to_json_line(const ExitRecord& r);
std::string to_json_line(const SummaryRecord& r);

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
  uint64_t write_errors() const { return write_errors_; }
  // The reader went away (EPIPE): there is no point in going on.
  bool broken() const { return broken_; }

 private:
  explicit JsonLinesOutput(Fd fd) : fd_(std::move(fd)) {}
  void write_line(std::string line);
  Fd fd_;
  uint64_t write_errors_ = 0;
  bool broken_ = false;
};

}  // namespace jankbpf
