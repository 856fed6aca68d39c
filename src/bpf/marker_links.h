// The marker probes' links, by id: attached one site at a time as markers
// are planned, detached when the files they are in are released (the last
// process that needed them gone), the rest at exit with the other links.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

struct bpf_link;

namespace jankbpf {

class MarkerLinks {
 public:
  MarkerLinks() = default;
  ~MarkerLinks();
  MarkerLinks(const MarkerLinks&) = delete;
  MarkerLinks& operator=(const MarkerLinks&) = delete;

  // Takes `link` over; its id (never 0).
  uint64_t keep(bpf_link* link);
  // Detaches these (ids not held are ignored); how many were.
  size_t release(const std::vector<uint64_t>& ids);
  // Hands every link over (for the detaching side by side at exit).
  std::vector<bpf_link*> take_all();

  size_t live() const { return links_.size(); }
  uint64_t attached() const { return next_ - 1; }  // over the run
  uint64_t released() const { return released_; }

 private:
  std::map<uint64_t, bpf_link*> links_;
  uint64_t next_ = 1, released_ = 0;
};

}  // namespace jankbpf
