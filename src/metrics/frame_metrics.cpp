#include "metrics/frame_metrics.h"

#include "metrics/prom_number.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace jankbpf {
namespace {

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string num(double v) { return prom_number(v); }

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void FrameMetrics::add(const FrameBatch& b) {
  for (const FrameTiming& f : b.frames) {
    const FrameBatch::Process* p = nullptr;
    for (const auto& [pid, proc] : b.procs)
      if (pid == f.pid) p = &proc;
    if (!p) continue;
    Key key{p->comm, p->exe, p->container_id, "wl_surface@" + std::to_string(f.surface)};
    auto it = series_.find(key);
    if (it == series_.end()) {
      if (series_.size() >= max_label_sets_) {
        dropped_++;
        key = Key{"other", "other", "other", "other"};
        it = series_.find(key);
      }
      if (it == series_.end()) it = series_.emplace(key, frame::FrameStats{}).first;
    }
    it->second.add(f);
  }
}

void FrameMetrics::render(std::string& out) const {
  std::map<Key, SurfaceFrameStats> rows;
  for (const auto& [k, st] : series_) st.fill(&rows[k]);
  auto labels = [](const Key& k) {
    return "comm=\"" + escape(std::get<0>(k)) + "\",exe=\"" + escape(std::get<1>(k)) + "\",container_id=\"" +
           escape(std::get<2>(k)) + "\",surface=\"" + escape(std::get<3>(k)) + "\"";
  };
  auto per_row = [&](const char* name, const char* type, const char* help, auto value) {
    family(out, name, type, help);
    for (const auto& [k, r] : rows) out += std::string(name) + "{" + labels(k) + "} " + num(value(r)) + "\n";
  };
  per_row("jankbpf_frames_total", "counter", "Frames of a Wayland surface: frame callback to commit.",
          [](const SurfaceFrameStats& r) { return double(r.frames); });
  family(out, "jankbpf_janky_frames_total", "counter",
         "Janky frames, by jank type (app_deadline_missed, buffer_stuffing, compositor_late, dropped, unknown).");
  for (const auto& [k, r] : rows)
    for (size_t i = 1; i < std::size(r.by_jank); i++)
      out += "jankbpf_janky_frames_total{" + labels(k) + ",jank_type=\"" + frame_jank_name(static_cast<FrameJank>(i)) +
             "\"} " + std::to_string(r.by_jank[i]) + "\n";
  per_row("jankbpf_slow_frames_total", "counter", "Frames that took over 16 ms (Android vitals' slow frames).",
          [](const SurfaceFrameStats& r) { return double(r.slow); });
  per_row("jankbpf_frozen_frames_total", "counter", "Frames that took over 700 ms (Android vitals' frozen frames).",
          [](const SurfaceFrameStats& r) { return double(r.frozen); });
  per_row("jankbpf_frame_jank_ratio", "gauge", "Janky frames over frames, since jankbpf started.",
          [](const SurfaceFrameStats& r) { return r.frames ? double(r.janky) / r.frames : 0.0; });
  family(out, "jankbpf_frame_duration_seconds", "histogram", "Frame times, frame callback to commit.");
  for (const auto& [k, r] : rows) {
    const std::string l = labels(k);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < std::size(kFrameBucketsMs); i++) {
      cumulative += r.buckets[i];
      out += "jankbpf_frame_duration_seconds_bucket{" + l + ",le=\"" + num(kFrameBucketsMs[i] / 1000) + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out += "jankbpf_frame_duration_seconds_bucket{" + l + ",le=\"+Inf\"} " + std::to_string(r.frames) + "\n";
    out += "jankbpf_frame_duration_seconds_sum{" + l + "} " + num(r.sum_ms / 1000) + "\n";
    out += "jankbpf_frame_duration_seconds_count{" + l + "} " + std::to_string(r.frames) + "\n";
  }
  family(out, "jankbpf_frame_time_seconds", "summary",
         "Frame-time percentiles since jankbpf started (quantile 1 is the longest frame).");
  for (const auto& [k, r] : rows) {
    const std::string l = labels(k);
    for (auto [q, v] : {std::pair{"0.5", r.p50_ms}, {"0.9", r.p90_ms}, {"0.99", r.p99_ms}, {"1", r.max_ms}})
      out += "jankbpf_frame_time_seconds{" + l + ",quantile=\"" + q + "\"} " + num(v / 1000) + "\n";
    out += "jankbpf_frame_time_seconds_sum{" + l + "} " + num(r.sum_ms / 1000) + "\n";
    out += "jankbpf_frame_time_seconds_count{" + l + "} " + std::to_string(r.frames) + "\n";
  }
  family(out, "jankbpf_frame_label_sets_dropped_total", "counter",
         "Frames whose label set found the label-set cap full; counted under surface=\"other\".");
  out += "jankbpf_frame_label_sets_dropped_total " + std::to_string(dropped_) + "\n";
}

}  // namespace jankbpf
