#include "bpf/marker_links.h"

#include <bpf/libbpf.h>

namespace jankbpf {

MarkerLinks::~MarkerLinks() {
  for (auto* l : take_all()) bpf_link__destroy(l);
}

uint64_t MarkerLinks::keep(bpf_link* link) {
  uint64_t id = next_++;
  links_[id] = link;
  return id;
}

size_t MarkerLinks::release(const std::vector<uint64_t>& ids) {
  size_t n = 0;
  for (uint64_t id : ids) {
    auto it = links_.find(id);
    if (it == links_.end()) continue;
    bpf_link__destroy(it->second);
    links_.erase(it);
    n++;
  }
  released_ += n;
  return n;
}

std::vector<bpf_link*> MarkerLinks::take_all() {
  std::vector<bpf_link*> out;
  for (auto& [id, l] : links_) out.push_back(l);
  links_.clear();
  return out;
}

}  // namespace jankbpf
