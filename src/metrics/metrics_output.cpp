#include "metrics/metrics_output.h"

#include "metrics/prom_number.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>

#include "cause/largest.h"

namespace jankbpf {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";     // U+2026

// Length of the valid UTF-8 sequence at s[i], 0 if there is none there
// (stray continuation bytes, overlong forms, surrogates, > U+10FFFF).
size_t utf8_seq(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (!n || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; k++)
    if ((b(k) & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
  if (c == 0xED && b(1) > 0x9F) return 0;  // UTF-16 surrogates
  if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
  if (c == 0xF4 && b(1) > 0x8F) return 0;  // past U+10FFFF
  return n;
}

// Start of the code point holding byte `i` of valid UTF-8.
size_t cp_start(std::string_view s, size_t i) {
  while (i > 0 && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) i--;
  return i;
}

std::string escape(std::string_view v) {
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

}  // namespace

std::string prometheus_label_value(std::string_view raw, size_t max_bytes, bool keep_tail) {
  std::string valid;
  valid.reserve(std::min(raw.size(), max_bytes * 3 + 8));
  // Only so much of a huge value is looked at: what is kept is at most max_bytes.
  const size_t look = std::min(raw.size(), max_bytes * 4 + 16);
  std::string_view part = keep_tail ? raw.substr(raw.size() - look) : raw.substr(0, look);
  for (size_t i = 0; i < part.size();) {
    size_t n = utf8_seq(part, i);
    const unsigned char c = static_cast<unsigned char>(part[i]);
    if (!n || (n == 1 && ((c < 0x20 && c != '\n') || c == 0x7F))) {
      valid += kReplacement;
      i += n ? n : 1;
    } else {
      valid.append(part.substr(i, n));
      i += n;
    }
  }
  const bool cut = valid.size() > max_bytes || look < raw.size();
  if (cut) {
    const size_t keep = max_bytes > kEllipsis.size() ? max_bytes - kEllipsis.size() : 0;
    if (valid.size() > keep) {
      if (keep_tail) {
        size_t from = valid.size() - keep;
        while (from < valid.size() && (static_cast<unsigned char>(valid[from]) & 0xC0) == 0x80) from++;
        valid = std::string(kEllipsis) + valid.substr(from);
      }
      else valid = valid.substr(0, cp_start(valid, keep)) + std::string(kEllipsis);
    } else {
      valid = keep_tail ? std::string(kEllipsis) + valid : valid + std::string(kEllipsis);
    }
  }
  return escape(valid);
}

namespace {

std::string num(double v) { return prom_number(v); }

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

long rss_bytes(int statm) {
  char buf[128];
  ssize_t n = statm >= 0 ? pread(statm, buf, sizeof buf - 1, 0) : -1;
  if (n <= 0) return 0;
  buf[n] = '\0';
  long size = 0, resident = 0;
  if (sscanf(buf, "%ld %ld", &size, &resident) != 2) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

const std::string kOther = "other";

}  // namespace

const std::vector<double>& MetricsOutput::buckets() {
  // Around the seed's bounds: 150 ms threshold, 450 ms trace bound, 3 s hang.
  static const std::vector<double> b{0.05, 0.1, 0.15, 0.25, 0.45, 1, 3, 10, 30};
  return b;
}

void MetricsOutput::Series::add(const Series& o) {
  janks += o.janks;
  for (size_t i = 0; i < janks_by_cause.size(); i++) janks_by_cause[i] += o.janks_by_cause[i];
  hangs += o.hangs;
  rate_limited += o.rate_limited;
  blocked_s += o.blocked_s;
  count += o.count;
  sum_s += o.sum_s;
  bucket_counts.resize(buckets().size(), 0);
  for (size_t i = 0; i < o.bucket_counts.size() && i < bucket_counts.size(); i++) bucket_counts[i] += o.bucket_counts[i];
}

MetricsOutput::MetricsOutput(size_t max_label_sets, std::string version, int64_t idle_before_reuse_ms,
                             std::function<int64_t()> clock_ms)
    : max_label_sets_(max_label_sets),
      version_(std::move(version)),
      idle_before_reuse_ms_(idle_before_reuse_ms),
      clock_ms_(clock_ms ? std::move(clock_ms) : steady_ms),
      statm_(open("/proc/self/statm", O_RDONLY | O_CLOEXEC)) {
  other_.bucket_counts.assign(buckets().size(), 0);
}

void MetricsOutput::set_live(std::function<MetricsLive()> live) {
  std::lock_guard lock(mu_);
  live_ = std::move(live);
}

// The set whose slot a record of `uid` may take (see the header), or end().
std::map<MetricsOutput::Key, MetricsOutput::Series>::iterator MetricsOutput::victim_for(uint32_t uid, int64_t now) {
  auto heaviest = std::max_element(slots_per_uid_.begin(), slots_per_uid_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
  const size_t mine = slots_per_uid_.contains(uid) ? slots_per_uid_[uid] : 0;
  const size_t uids = slots_per_uid_.size() + (mine ? 0 : 1);
  const bool unfair = heaviest != slots_per_uid_.end() && heaviest->first != uid &&
                      heaviest->second > max_label_sets_ / uids && heaviest->second > mine + 1;
  auto victim = series_.end();
  for (auto it = series_.begin(); it != series_.end(); ++it) {
    if (unfair && it->second.uid != heaviest->first) continue;
    if (victim == series_.end() || it->second.last_ms < victim->second.last_ms) victim = it;
  }
  if (victim != series_.end() && !unfair && now - victim->second.last_ms < idle_before_reuse_ms_) return series_.end();
  return victim;
}

MetricsOutput::Series* MetricsOutput::slot_for(const TaskRecord& r, int64_t now) {
  Key key{prometheus_label_value(r.proc.name, kMaxComm), prometheus_label_value(r.proc.exe, kMaxExe, true),
          prometheus_label_value(r.proc.container_id, kMaxContainerId)};
  auto it = series_.find(key);
  if (it == series_.end()) {
    if (series_.size() >= max_label_sets_) {
      auto victim = victim_for(r.proc.uid, now);
      if (victim == series_.end()) {
        dropped_++;
        have_other_ = true;
        return &other_;
      }
      other_.add(victim->second);
      have_other_ = true;
      if (--slots_per_uid_[victim->second.uid] == 0) slots_per_uid_.erase(victim->second.uid);
      series_.erase(victim);
      evicted_++;
    }
    it = series_.emplace(std::move(key), Series{}).first;
    it->second.uid = r.proc.uid;
    it->second.bucket_counts.assign(buckets().size(), 0);
    slots_per_uid_[r.proc.uid]++;
  }
  it->second.last_ms = now;
  return &it->second;
}

void MetricsOutput::emit(const TaskRecord& r) {
  const int64_t now = clock_ms_();
  std::lock_guard lock(mu_);
  Series& s = *slot_for(r, now);
  s.rate_limited += r.records_rate_limited;
  if (r.kind == TaskRecord::Kind::Hang) {
    s.hangs++;
    return;
  }
  const double secs = r.duration_ms / 1000.0;
  s.janks++;
  const size_t kind = cause::kind_rank(cause::largest_kind(r));
  s.janks_by_cause[kind < s.janks_by_cause.size() ? kind : 0]++;
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

void MetricsOutput::emit(const FrameBatch& b) {
  std::lock_guard lock(mu_);
  frames_.add(b);
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
  // 1. A copy under the lock (no formatting, no callbacks).
  std::vector<std::pair<Key, Series>> series;
  std::function<MetricsLive()> live_fn;
  MetricsLive live;
  uint64_t dropped, evicted;
  bool have_final;
  {
    std::lock_guard lock(mu_);
    series.reserve(series_.size() + 1);
    series.assign(series_.begin(), series_.end());
    if (have_other_) series.emplace_back(Key{kOther, kOther, kOther}, other_);
    dropped = dropped_;
    evicted = evicted_;
    have_final = have_final_;
    live = final_;
    live_fn = live_;
  }
  // 2. The rest without it: the live counters read the BPF maps.
  if (!have_final && live_fn) live = live_fn();
  std::string out;
  auto labels = [](const Key& k) {
    return "comm=\"" + std::get<0>(k) + "\",exe=\"" + std::get<1>(k) + "\",container_id=\"" + std::get<2>(k) + "\"";
  };
  auto per_series = [&](const char* name, const char* type, const char* help, auto value) {
    family(out, name, type, help);
    for (const auto& [k, s] : series) out += std::string(name) + "{" + labels(k) + "} " + num(value(s)) + "\n";
  };
  // The cause label: the kind of each jank's largest cause, "none" when
  // none was named; a kind with no jank has no series.
  family(out, "jankbpf_janks_total", "counter",
         "Tasks on a watched thread that reached the threshold (jank records), by the kind of their largest cause.");
  for (const auto& [k, s] : series)
    for (size_t i = 0; i < s.janks_by_cause.size(); i++)
      if (s.janks_by_cause[i])
        out += "jankbpf_janks_total{" + labels(k) + ",cause=\"" +
               std::string(i ? cause::kKinds[i] : cause::kNoCause) + "\"} " + num(double(s.janks_by_cause[i])) + "\n";
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
  for (const auto& [k, s] : series) {
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

  frames_.render(out);

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
  out += "jankbpf_label_sets " + std::to_string(series.size()) + "\n";
  family(out, "jankbpf_label_sets_dropped_total", "counter",
         "Records whose label set found the label-set cap full; they are counted under comm=\"other\".");
  out += "jankbpf_label_sets_dropped_total " + std::to_string(dropped) + "\n";
  family(out, "jankbpf_label_sets_evicted_total", "counter",
         "Label sets whose slot went to a new set (idle too long, or their uid held more than its share); "
         "their counts moved to comm=\"other\".");
  out += "jankbpf_label_sets_evicted_total " + std::to_string(evicted) + "\n";

  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  family(out, "jankbpf_cpu_seconds_total", "counter", "CPU time jankbpf itself used, by mode.");
  out += "jankbpf_cpu_seconds_total{mode=\"user\"} " + num(ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6) + "\n";
  out += "jankbpf_cpu_seconds_total{mode=\"system\"} " + num(ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6) + "\n";
  family(out, "jankbpf_resident_memory_bytes", "gauge", "jankbpf's own resident set size.");
  out += "jankbpf_resident_memory_bytes " + std::to_string(rss_bytes(statm_.get())) + "\n";
  family(out, "jankbpf_build_info", "gauge", "Always 1; the version jankbpf was built from.");
  out += "jankbpf_build_info{version=\"" + prometheus_label_value(version_, 128) + "\"} 1\n";
  return out;
}

}  // namespace jankbpf
