#include "runtime/interleave.h"

#include <algorithm>
#include <iterator>
#include <string_view>
#include <vector>

namespace jankbpf::runtime {
namespace {

bool is_eval_frame(const stack::Frame& f) {
  // LTO builds may split it ("_PyEval_EvalFrameDefault.cold").
  return !f.kernel() && !f.is_runtime() && !f.inlined() &&
         std::string_view(f.symbol).starts_with("_PyEval_EvalFrameDefault");
}

}  // namespace

stack::Frame python_frame(const PyFrame& f) {
  stack::Frame out;
  out.runtime = "python";
  if (f.unreadable) {
    out.symbol = kPythonUnreadable;
    return out;
  }
  out.symbol = f.name.empty() ? "<unnamed>" : f.name;
  out.file = f.file;
  out.line = f.line;
  return out;
}

void interleave_python(stack::ResolvedStack& stack, const PyCapture& capture, bool python_process,
                       uint64_t task_end_ns, RuntimeFrameStats& stats) {
  bool ok = capture.status == PyCapture::Status::Ok;
  if (ok && capture.read_ns > task_end_ns) {
    ok = false;  // read after the task ended: the thread was elsewhere by then
    python_process = true;
  }
  if (!ok && !python_process) return;
  // Python frames split per eval call, leaf first.
  std::vector<std::vector<stack::Frame>> segments(1);
  for (const PyFrame& f : capture.frames) {
    segments.back().push_back(python_frame(f));
    if (f.entry) segments.emplace_back();
  }
  if (segments.back().empty()) segments.pop_back();
  // One eval call a segment: a whole native stack with another number of
  // eval frames than the frames read have calls is two different moments
  // (the read came after the thread moved on), not one stack.
  size_t evals = static_cast<size_t>(std::count_if(stack.frames.begin(), stack.frames.end(), is_eval_frame));
  if (ok && !stack.truncated && !capture.truncated && !capture.cut && segments.size() != evals) ok = false;
  if (ok)
    for (const PyFrame& f : capture.frames) (f.unreadable ? stats.unreadable : stats.read)++;

  std::vector<stack::Frame> out;
  out.reserve(stack.frames.size() + capture.frames.size() + 1);
  size_t next = 0;
  size_t group = 0;  // where the frames of the current pc begin (inlined ones come first)
  for (auto& f : stack.frames) {
    if (is_eval_frame(f)) {
      // Leafward of the eval frame and of what was inlined into it.
      std::vector<stack::Frame> put;
      if (ok && next < segments.size()) {
        put = std::move(segments[next++]);
      } else if (!ok) {
        put.push_back(python_frame(PyFrame{.unreadable = true}));
        stats.unreadable++;
      }
      out.insert(out.begin() + static_cast<ptrdiff_t>(group), std::make_move_iterator(put.begin()),
                 std::make_move_iterator(put.end()));
    }
    bool inlined = f.inlined();
    out.push_back(std::move(f));
    if (!inlined) group = out.size();
  }
  for (; ok && next < segments.size(); ++next)
    for (auto& p : segments[next]) out.push_back(std::move(p));
  stack.frames = std::move(out);
}

}  // namespace jankbpf::runtime
