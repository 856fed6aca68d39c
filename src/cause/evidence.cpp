#include "cause/evidence.h"

#include <algorithm>

namespace jankbpf::cause {

Evidence& EvidenceStore::slot(pid_t tid, uint64_t seq) {
  const auto key = std::make_pair(tid, seq);
  auto it = items_.find(key);
  if (it != items_.end()) return it->second;
  while (items_.size() >= kMaxTasks && !order_.empty()) {
    if (items_.erase(order_.front())) dropped_++;
    order_.erase(order_.begin());
  }
  order_.push_back(key);
  return items_[key];
}

Evidence& EvidenceStore::add_causes(const jb_cause_event& e) {
  Evidence& ev = slot(static_cast<pid_t>(e.hdr.tid), e.seq);
  ev.causes = e;
  return ev;
}

void EvidenceStore::add_subject(const jb_subject_event& e) {
  auto& ev = slot(static_cast<pid_t>(e.hdr.tid), e.seq);
  if (ev.subjects.size() >= kMaxSubjectsPerTask) {
    dropped_++;
    return;
  }
  ev.subjects.push_back(e);
}

Evidence EvidenceStore::peek(pid_t tid, uint64_t seq) const {
  auto it = items_.find({tid, seq});
  return it == items_.end() ? Evidence{} : it->second;
}

Evidence EvidenceStore::take(pid_t tid, uint64_t seq) {
  Evidence out;
  auto it = items_.find({tid, seq});
  if (it != items_.end()) out = std::move(it->second);
  // This task and the thread's earlier ones (never reported) are done.
  for (auto i = items_.lower_bound({tid, 0}); i != items_.end() && i->first.first == tid && i->first.second <= seq;)
    i = items_.erase(i);
  std::erase_if(order_, [&](const auto& k) { return k.first == tid && k.second <= seq; });
  return out;
}

}  // namespace jankbpf::cause
