// The frame families of the Prometheus metrics (issue 28): per process and
// surface, every frame counted from the frame batches -- frames, janky
// frames by jank type, slow (> 16 ms) and frozen (> 700 ms) frames, the
// jank ratio, a histogram of frame times and their p50/p90/p99/max as a
// summary. Labels comm, exe, container_id and surface ("wl_surface@N"),
// never pid; at most max_label_sets sets, the rest under "other". Not
// thread-safe: MetricsOutput holds its lock around it.
#pragma once

#include <map>
#include <string>
#include <tuple>

#include "frame/frame_stats.h"
#include "model/records.h"

namespace jankbpf {

class FrameMetrics {
 public:
  explicit FrameMetrics(size_t max_label_sets) : max_label_sets_(max_label_sets) {}
  void add(const FrameBatch& b);
  void render(std::string& out) const;  // appends every family, with HELP and TYPE

 private:
  using Key = std::tuple<std::string, std::string, std::string, std::string>;  // comm, exe, container, surface
  const size_t max_label_sets_;
  std::map<Key, frame::FrameStats> series_;
  uint64_t dropped_ = 0;
};

}  // namespace jankbpf
