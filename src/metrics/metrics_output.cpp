#include "metrics/metrics_output.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace jankbpf {
namespace {

// Label values may hold any bytes (process names are the program's own):
// the exposition format escapes backslash, double quote and newline.
std::string escape(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // The shortest form that reads back the same: le="0.15", not 0.14999999999999999.
  char buf[64];
  for (int precision = 1; precision <= 17; precision++) {
    snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (strtod(buf, nullptr) == v) break;
  }
  return buf;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

long rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

const std::string kOther = "other";

}  // namespace

const std::vector<double>& MetricsOutput::buckets() {
  // Around the seed's bounds: 150 ms threshold, 450 ms trace bound, 3 s hang.
  static const std::vector<double> b{0.05, 0.1, 0.15, 0.25, 0.45, 1, 3, 10, 30};
  return b;
}

MetricsOutput::MetricsOutput(size_t max_label_sets, std::string version)
    : max_label_sets_(max_label_sets), version_(std::move(version)) {}

void MetricsOutput::set_live(std::function<MetricsLive()> live) {
  std::lock_guard lock(mu_);
  live_ = std::move(live);
}

MetricsOutput::Series& MetricsOutput::series_for(const TaskRecord& r) {
  Key key{r.proc.name, r.proc.exe, r.proc.container_id};
  auto it = series_.find(key);
  if (it == series_.end()) {
    // The "other" series is the one more beyond the cap.
    if (series_.size() >= max_label_sets_) {
      dropped_++;
      key = Key{kOther, kOther, kOther};
      it = series_.find(key);
    }
    if (it == series_.end()) it = series_.emplace(key, Series{}).first;
  }
  if (it->second.bucket_counts.empty()) it->second.bucket_counts.assign(buckets().size(), 0);
  return it->second;
}

void MetricsOutput::emit(const TaskRecord& r) {
  std::lock_guard lock(mu_);
  Series& s = series_for(r);
  s.rate_limited += r.records_rate_limited;
  if (r.kind == TaskRecord::Kind::Hang) {
    s.hangs++;
    return;
  }
  const double secs = r.duration_ms / 1000.0;
  s.janks++;
  s.blocked_s += secs;
  s.count++;
  s.sum_s += secs;
  const auto& b = buckets();
  for (size_t i = 0; i < b.size(); i++) {
    if (secs <= b[i]) {
      s.bucket_counts[i]++;
      break;
    }
  }
}

void MetricsOutput::emit(const SummaryRecord& r) {
  std::lock_guard lock(mu_);
  final_.lost_events = r.kernel.ringbuf_drops;  // the events ring's share, as live (MetricsLive)
  final_.tasks_checked = r.kernel.tasks;
  final_.records_dropped = r.records_dropped;
  final_.records_rate_limited = r.kernel.records_rate_limited;
  have_final_ = true;
}

std::string MetricsOutput::render() {
  std::lock_guard lock(mu_);
  MetricsLive live = have_final_ ? final_ : live_ ? live_() : MetricsLive{};
  std::string out;
  auto labels = [](const Key& k) {
    return "comm=\"" + escape(std::get<0>(k)) + "\",exe=\"" + escape(std::get<1>(k)) +
           "\",container_id=\"" + escape(std::get<2>(k)) + "\"";
  };
  auto per_series = [&](const char* name, const char* type, const char* help, auto value) {
    family(out, name, type, help);
    for (const auto& [k, s] : series_) out += std::string(name) + "{" + labels(k) + "} " + num(value(s)) + "\n";
  };
  per_series("jankbpf_janks_total", "counter", "Tasks on a watched thread that reached the threshold (jank records).",
             [](const Series& s) { return double(s.janks); });
  per_series("jankbpf_hangs_total", "counter", "Tasks still running after the hang threshold (hang records).",
             [](const Series& s) { return double(s.hangs); });
  per_series("jankbpf_app_records_rate_limited_total", "counter",
             "Records of this label set's processes not sent for --record-rate or --record-rate-uid, as their later records counted them.",
             [](const Series& s) { return double(s.rate_limited); });
  per_series("jankbpf_main_thread_blocked_seconds_total", "counter",
             "Time watched threads spent in tasks that reached the threshold, in seconds (sum of jank durations).",
             [](const Series& s) { return s.blocked_s; });

  family(out, "jankbpf_jank_duration_seconds", "histogram", "Length of the tasks that reached the threshold.");
  const auto& b = buckets();
  for (const auto& [k, s] : series_) {
    const std::string l = labels(k);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < b.size(); i++) {
      cumulative += s.bucket_counts[i];
      out += "jankbpf_jank_duration_seconds_bucket{" + l + ",le=\"" + num(b[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += "jankbpf_jank_duration_seconds_bucket{" + l + ",le=\"+Inf\"} " + std::to_string(s.count) + "\n";
    out += "jankbpf_jank_duration_seconds_sum{" + l + "} " + num(s.sum_s) + "\n";
    out += "jankbpf_jank_duration_seconds_count{" + l + "} " + std::to_string(s.count) + "\n";
  }

  family(out, "jankbpf_lost_events_total", "counter", "Kernel records (janks, hangs, exits) lost because the events ring was full.");
  out += "jankbpf_lost_events_total " + std::to_string(live.lost_events) + "\n";
  family(out, "jankbpf_records_dropped_total", "counter",
         "Jank, hang and exit records dropped because 65,536 jobs already waited for an output that could not be written.");
  out += "jankbpf_records_dropped_total " + std::to_string(live.records_dropped) + "\n";
  family(out, "jankbpf_records_rate_limited_total", "counter",
         "Jank and hang records not sent: their process over --record-rate or its uid over --record-rate-uid (counted in the kernel).");
  out += "jankbpf_records_rate_limited_total " + std::to_string(live.records_rate_limited) + "\n";
  family(out, "jankbpf_tasks_checked_total", "counter", "Tasks that ended on a watched thread, long or not (counted in the kernel).");
  out += "jankbpf_tasks_checked_total " + std::to_string(live.tasks_checked) + "\n";
  family(out, "jankbpf_label_sets", "gauge", "Label sets (comm, exe, container_id) with series of their own, \"other\" included.");
  out += "jankbpf_label_sets " + std::to_string(series_.size()) + "\n";
  family(out, "jankbpf_label_sets_dropped_total", "counter",
         "Records whose label set found the label-set cap full; they are counted under comm=\"other\".");
  out += "jankbpf_label_sets_dropped_total " + std::to_string(dropped_) + "\n";

  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  family(out, "jankbpf_cpu_seconds_total", "counter", "CPU time jankbpf itself used, by mode.");
  out += "jankbpf_cpu_seconds_total{mode=\"user\"} " + num(ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6) + "\n";
  out += "jankbpf_cpu_seconds_total{mode=\"system\"} " + num(ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6) + "\n";
  family(out, "jankbpf_resident_memory_bytes", "gauge", "jankbpf's own resident set size.");
  out += "jankbpf_resident_memory_bytes " + std::to_string(rss_bytes()) + "\n";
  family(out, "jankbpf_build_info", "gauge", "Always 1; the version jankbpf was built from.");
  out += "jankbpf_build_info{version=\"" + escape(version_) + "\"} 1\n";
  return out;
}

}  // namespace jankbpf
