#include "bpf/marker_links.h"

#include <bpf/libbpf.h>

#include "bpf/perf_keeper.h"

namespace jankbpf {

MarkerLinks::~MarkerLinks() {
  for (auto* l : take_all()) bpf_link__destroy(l);
}

uint64_t MarkerLinks::keep(bpf_link* link, std::optional<uint32_t> slot) {
  uint64_t id = next_++;
  links_[id] = {link, slot};
  return id;
}

size_t MarkerLinks::release(const std::vector<uint64_t>& ids) {
  size_t n = 0;
  for (uint64_t id : ids) {
    auto it = links_.find(id);
    if (it == links_.end()) continue;
    bpf_link__destroy(it->second.link);
    if (it->second.slot && keeper_) keeper_->release(*it->second.slot);
    links_.erase(it);
    n++;
  }
  released_ += n;
  return n;
}

std::vector<bpf_link*> MarkerLinks::take_all() {
  std::vector<bpf_link*> out;
  for (auto& [id, held] : links_) out.push_back(held.link);  // their kept events go with the keeper
  links_.clear();
  return out;
}

}  // namespace jankbpf
