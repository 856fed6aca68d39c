// The marker probes' links, by id: attached one site at a time as markers
// are planned, detached when the files they are in are released (the last
// process that needed them gone), the rest at exit with the other links.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

struct bpf_link;

namespace jankbpf {

class PerfKeeper;

class MarkerLinks {
 public:
  MarkerLinks() = default;
  ~MarkerLinks();
  MarkerLinks(const MarkerLinks&) = delete;
  MarkerLinks& operator=(const MarkerLinks&) = delete;

  // Where a released link's perf event was kept (bpf/perf_keeper.h).
  void set_keeper(PerfKeeper* keeper) { keeper_ = keeper; }
  // Takes `link` over, with the keeper's slot of its event if kept; its id
  // (never 0).
  uint64_t keep(bpf_link* link, std::optional<uint32_t> slot = std::nullopt);
  // Detaches these, and lets their kept events go (ids not held are
  // ignored); how many were.
  size_t release(const std::vector<uint64_t>& ids);
  // Hands every link over (for the detaching side by side at exit).
  std::vector<bpf_link*> take_all();

  size_t live() const { return links_.size(); }
  uint64_t attached() const { return next_ - 1; }  // over the run
  uint64_t released() const { return released_; }

 private:
  struct Held {
    bpf_link* link;
    std::optional<uint32_t> slot;
  };
  std::map<uint64_t, Held> links_;
  PerfKeeper* keeper_ = nullptr;
  uint64_t next_ = 1, released_ = 0;
};

}  // namespace jankbpf
