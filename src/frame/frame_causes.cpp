#include "frame/frame_causes.h"

namespace jankbpf::frame {

void TaskWhys::remember(const TaskRecord& rec) {
  if (!rec.causes_known || rec.why.empty() || !rec.task_seq) return;
  Key key{rec.tid, rec.task_seq};
  auto [it, fresh] = whys_.insert_or_assign(key, rec.why);
  (void)it;
  if (!fresh) return;
  order_.push_back(key);
  if (order_.size() > kMaxTasks) {
    whys_.erase(order_.front());
    order_.pop_front();
  }
}

const std::string* TaskWhys::find(pid_t tid, uint64_t task_seq) const {
  auto it = whys_.find({tid, task_seq});
  return it == whys_.end() ? nullptr : &it->second;
}

void attach_causes(FrameRecord& rec, const TaskWhys& tasks) {
  if (!rec.frame.task_seq) return;  // not part of a long task: no causes were collected for it
  if (const std::string* why = tasks.find(rec.frame.tid, rec.frame.task_seq)) rec.why = {*why};
}

}  // namespace jankbpf::frame
