#include "report/writer.h"

#include <algorithm>
#include <tuple>

#include "report/atomic_file.h"
#include "report/html.h"
#include "report/perfetto.h"
#include "util/clock.h"
#include "util/log.h"

namespace jankbpf::report {

bool ReportWriter::check(std::string* error) const {
  const std::pair<const char*, const std::string*> all[] = {
      {"--report", &files_.html}, {"--perfetto", &files_.perfetto}, {"--folded", &files_.folded}};
  for (auto [flag, path] : all) {
    if (path->empty()) continue;
    std::string why;
    if (!check_writable(*path, &why)) {
      *error = std::string(flag) + ": " + why;
      return false;
    }
  }
  return true;
}

std::vector<SchedEvent> ReportWriter::sched_events(const Run& run) {
  std::vector<TraceWindow> windows = trace_windows(run);
  if (windows.size() > kMaxTraces) {
    std::sort(windows.begin(), windows.end(), [](const auto& a, const auto& b) { return a.to_ns > b.to_ns; });
    if (!warned_traces_++)
      log::warn("--perfetto: %zu traces named; the CPU tracks show the latest %zu", windows.size(), kMaxTraces);
    windows.resize(kMaxTraces);
  }
  std::map<std::string, Converted> kept;
  const uint64_t budget_end = monotonic_ns() + static_cast<uint64_t>(kConvertBudgetMs) * 1'000'000;
  size_t events = 0, skipped = 0;
  for (const auto& w : windows) {
    auto it = sched_cache_.find(w.path);
    if (it != sched_cache_.end() && it->second.from_ns <= w.from_ns && it->second.to_ns >= w.to_ns) {
      events += it->second.events.size();
      kept.emplace(w.path, std::move(it->second));
      continue;
    }
    const uint64_t now = monotonic_ns();
    if (now >= budget_end || events >= kMaxSchedEvents) {
      skipped++;
      continue;
    }
    SchedReadLimits limits;
    limits.timeout_ms = static_cast<int>(std::min<uint64_t>(limits.timeout_ms, (budget_end - now) / 1'000'000 + 1));
    limits.max_events = std::min(limits.max_events, kMaxSchedEvents - events);
    std::string error;
    Converted c{w.from_ns, w.to_ns, read_sched_events(w.path, w.from_ns, w.to_ns, &error, limits)};
    if (!error.empty()) log::warn("--perfetto: %s", error.c_str());
    events += c.events.size();
    kept.emplace(w.path, std::move(c));
  }
  if (skipped && !warned_budget_++) log::warn("--perfetto: %zu traces not converted: over %d s of trace-cmd for this write", skipped,
                         kConvertBudgetMs / 1000);
  sched_cache_ = std::move(kept);
  std::vector<SchedEvent> all;
  all.reserve(events);
  for (const auto& [_, c] : sched_cache_) all.insert(all.end(), c.events.begin(), c.events.end());
  // Windows of two traces may overlap: the same event once.
  std::sort(all.begin(), all.end(), [](const SchedEvent& a, const SchedEvent& b) {
    return std::tie(a.cpu, a.ts_ns, a.kind, a.prev_pid, a.next_pid) < std::tie(b.cpu, b.ts_ns, b.kind, b.prev_pid, b.next_pid);
  });
  all.erase(std::unique(all.begin(), all.end(), [](const SchedEvent& a, const SchedEvent& b) {
              return a.cpu == b.cpu && a.ts_ns == b.ts_ns && a.kind == b.kind && a.prev_pid == b.prev_pid &&
                     a.next_pid == b.next_pid;
            }),
            all.end());
  return all;
}

bool ReportWriter::write(const Run& run, bool final, std::string* error) {
  bool ok = true;
  auto put = [&](const char* flag, const std::string& path, const std::string& data) {
    std::string why;
    if (!write_atomic(path, data, &why) && ok) {
      *error = std::string(flag) + ": " + why;
      ok = false;
    }
  };
  if (!files_.html.empty()) put("--report", files_.html, render_html(run, final, EpochClock().now_ms()));
  if (!files_.perfetto.empty()) put("--perfetto", files_.perfetto, render_perfetto(run, sched_events(run)));
  if (!files_.folded.empty()) put("--folded", files_.folded, render_folded(run, files_.folded_by));
  return ok;
}

}  // namespace jankbpf::report
