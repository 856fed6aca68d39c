#include "runtime/interleave.h"

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
                       RuntimeFrameStats& stats) {
  const bool ok = capture.status == PyCapture::Status::Ok;
  if (!ok && !python_process) return;
  // Python frames split per eval call, leaf first.
  std::vector<std::vector<stack::Frame>> segments(1);
  if (ok) {
    for (const PyFrame& f : capture.frames) {
      segments.back().push_back(python_frame(f));
      (f.unreadable ? stats.unreadable : stats.read)++;
      if (f.entry) segments.emplace_back();
    }
  }
  if (segments.back().empty()) segments.pop_back();

  std::vector<stack::Frame> out;
  out.reserve(stack.frames.size() + capture.frames.size() + 1);
  size_t next = 0;
  for (auto& f : stack.frames) {
    if (is_eval_frame(f)) {
      if (ok && next < segments.size()) {
        for (auto& p : segments[next]) out.push_back(std::move(p));
        ++next;
      } else if (!ok) {
        out.push_back(python_frame(PyFrame{.unreadable = true}));
        stats.unreadable++;
      }
    }
    out.push_back(std::move(f));
  }
  for (; next < segments.size(); ++next)
    for (auto& p : segments[next]) out.push_back(std::move(p));
  stack.frames = std::move(out);
}

}  // namespace jankbpf::runtime
