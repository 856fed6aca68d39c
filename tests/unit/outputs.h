// Sinks for tests that run a Reporter: one that drops every record, one that
// keeps task records, and one whose writes block while its gate is held (a
// stalled pipe reader, a hung mount).
#pragma once

#include <mutex>
#include <vector>

#include "output/output.h"

namespace jankbpf::test {

struct NullOutput : Output {
  void emit(const TaskRecord&) override {}
  void emit(const ExitRecord&) override {}
  void emit(const SummaryRecord&) override {}
};

struct CollectOutput : Output {
  std::mutex mu;
  std::vector<TaskRecord> tasks;
  void emit(const TaskRecord& r) override {
    std::lock_guard lk(mu);
    tasks.push_back(r);
  }
  void emit(const ExitRecord&) override {}
  void emit(const SummaryRecord&) override {}
};

struct StuckOutput : CollectOutput {
  std::mutex gate;  // held by the test: task records wait for it
  void emit(const TaskRecord& r) override {
    std::lock_guard hold(gate);
    CollectOutput::emit(r);
  }
};

}  // namespace jankbpf::test
