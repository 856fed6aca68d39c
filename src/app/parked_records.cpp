#include "app/parked_records.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "app/reporter.h"

namespace jankbpf {

void apply_trace(TaskRecord& rec, PendingTrace& t, bool done) {
  if (!done) {
    rec.trace_note = "the trace was not saved within " + std::to_string(ParkedRecords::kMaxWait.count()) +
                     " s of the task's report, or before the run ended: written without it";
    return;
  }
  for (auto& p : t.paths) rec.external_log.push_back(p);
  rec.log_over_limit |= t.over_limit;
  if (!t.error.empty()) rec.log_error = t.error;
  if (!t.note.empty()) rec.trace_note = t.note;
  if (t.suppressed != Suppressed::None) rec.suppressed.push_back(t.suppressed);
}

bool ParkedRecords::holds(pid_t pid) const {
  return std::any_of(parked_.begin(), parked_.end(), [&](const Parked& p) { return p.pid == pid; });
}

void ParkedRecords::park(pid_t pid, Record rec, std::shared_ptr<PendingTrace> trace, std::function<void()> wake,
                         Clock::time_point now) {
  if (trace) {
    std::lock_guard lk(trace->mu);
    if (!trace->done) trace->on_done = std::move(wake);
  }
  parked_.push_back({pid, std::move(rec), std::move(trace), now + kMaxWait});
}

std::vector<ParkedRecords::Record> ParkedRecords::take_ready(Clock::time_point now, bool all) {
  std::vector<Record> out;
  std::vector<Parked> keep;
  std::set<pid_t> blocked;  // processes with a record still parked ahead
  for (auto& p : parked_) {
    bool done = true;
    if (p.trace) {
      std::lock_guard lk(p.trace->mu);
      done = p.trace->done;
    }
    if (!all && (blocked.count(p.pid) || (!done && now < p.deadline))) {
      blocked.insert(p.pid);
      keep.push_back(std::move(p));
      continue;
    }
    if (p.trace) {
      {
        std::lock_guard lk(p.trace->mu);
        p.trace->on_done = nullptr;  // nobody to wake any more
      }
      apply_trace(std::get<TaskRecord>(p.rec), *p.trace, done);
    }
    out.push_back(std::move(p.rec));
  }
  parked_ = std::move(keep);
  return out;
}

std::optional<ParkedRecords::Clock::time_point> ParkedRecords::next_deadline() const {
  std::optional<Clock::time_point> d;
  for (const auto& p : parked_)
    if (p.trace && (!d || p.deadline < *d)) d = p.deadline;
  return d;
}

}  // namespace jankbpf
