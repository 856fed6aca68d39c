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
  std::vector<SchedEvent> all;
  for (const auto& w : trace_windows(run)) {
    std::string key = w.path + '\x1f' + std::to_string(w.from_ns) + '\x1f' + std::to_string(w.to_ns);
    auto it = sched_cache_.find(key);
    if (it == sched_cache_.end()) {
      std::string error;
      auto events = read_sched_events(w.path, w.from_ns, w.to_ns, &error);
      if (!error.empty()) log::warn("--perfetto: %s", error.c_str());
      it = sched_cache_.emplace(key, std::move(events)).first;
    }
    all.insert(all.end(), it->second.begin(), it->second.end());
  }
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
