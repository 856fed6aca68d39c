#include "markers/marker_files.h"

namespace jankbpf {

MarkerFiles::Admit MarkerFiles::admit(pid_t pid, FileId id) {
  auto it = entries_.find(id);
  if (it != entries_.end()) {
    it->second.users.insert(pid);
    by_pid_[pid].insert(id);
    return Admit::Known;
  }
  if (entries_.size() >= total_ || files_of(pid) >= per_process_) {
    capped_++;
    return Admit::Capped;
  }
  entries_[id].users.insert(pid);
  by_pid_[pid].insert(id);
  return Admit::New;
}

void MarkerFiles::planned(FileId id, std::vector<uint32_t> marker_ids, std::vector<SiteKey> sites) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.marker_ids = std::move(marker_ids);
  it->second.sites = std::move(sites);
}

void MarkerFiles::add_link(FileId id, uint64_t link) {
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.links.push_back(link);
}

size_t MarkerFiles::files_of(pid_t pid) const {
  auto it = by_pid_.find(pid);
  return it == by_pid_.end() ? 0 : it->second.size();
}

std::set<FileId> MarkerFiles::used_by(pid_t pid) const {
  auto it = by_pid_.find(pid);
  return it == by_pid_.end() ? std::set<FileId>{} : it->second;
}

std::vector<MarkerFiles::Released> MarkerFiles::drop(pid_t pid, const std::set<FileId>& still) {
  std::vector<Released> out;
  auto p = by_pid_.find(pid);
  if (p == by_pid_.end()) return out;
  for (auto f = p->second.begin(); f != p->second.end();) {
    if (still.count(*f)) {
      ++f;
      continue;
    }
    auto e = entries_.find(*f);
    if (e != entries_.end()) {
      e->second.users.erase(pid);
      if (e->second.users.empty()) {
        out.push_back({e->first, std::move(e->second.links), std::move(e->second.marker_ids),
                       std::move(e->second.sites)});
        entries_.erase(e);
      }
    }
    f = p->second.erase(f);
  }
  if (p->second.empty()) by_pid_.erase(p);
  return out;
}

bool MarkerFiles::take_cap_notice() {
  if (cap_noticed_ || capped_ == 0) return false;
  cap_noticed_ = true;
  return true;
}

}  // namespace jankbpf
