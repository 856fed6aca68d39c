// Java frames among the native ones (runtime/interleave.h). HotSpot's
// frames are on the native stack, but its compiled code keeps no frame
// pointer: past the first of them the native walk (frame pointers through
// anonymous code) is not to be believed, so the Java walk's own frames
// stand for the whole stretch, and the native frames come back where its
// call stub returns into C++.
#include <string>

#include "runtime/interleave.h"

namespace jankbpf::runtime {
namespace {

stack::Frame java_frame(const JavaFrame& j) {
  stack::Frame f;
  f.runtime = "java";
  switch (j.kind) {
    case JavaFrame::Kind::Stub:
      f.symbol = "[stub: " + j.name + "]";
      break;
    case JavaFrame::Kind::Unreadable:
      f.symbol = kJavaUnreadable;
      break;
    case JavaFrame::Kind::Native:
      f.symbol = j.name;
      f.file = "Native Method";
      break;
    default:
      f.symbol = j.name.empty() ? "<unnamed>" : j.name;
      f.file = j.file;
      f.line = j.line;
      if (j.kind == JavaFrame::Kind::Inlined) f.flags |= stack::kFrameInlined;
  }
  // Compiled code (the JIT's, and its inlined methods): "jit" in records;
  // interpreted frames run in the interpreter.
  if (j.jit && j.kind != JavaFrame::Kind::Unreadable) f.flags |= stack::kFrameJit;
  return f;
}

stack::Frame unreadable() {
  stack::Frame f;
  f.runtime = "java";
  f.symbol = kJavaUnreadable;
  return f;
}

}  // namespace

void interleave_java(stack::ResolvedStack& stack, const JavaCapture& capture, bool java_process,
                     uint64_t task_end_ns, RuntimeFrameStats& stats) {
  bool ok = capture.status == JavaCapture::Status::Ok && capture.read_ns <= task_end_ns;
  if (!ok && !java_process && capture.status == JavaCapture::Status::None) return;
  auto& frames = stack.frames;
  auto in_code = [&](const stack::Frame& f) {
    if (f.kernel() || f.is_runtime()) return false;
    if (capture.code_hi) return f.pc >= capture.code_lo && f.pc < capture.code_hi;
    return f.jit() && !f.has_module();
  };
  std::vector<stack::Frame> out;
  out.reserve(frames.size() + capture.frames() + 2);
  size_t i = 0;
  const size_t n = frames.size();
  // The first segment must start where the native walk enters the code
  // cache: in the blob of its innermost frame. Otherwise the read is of
  // another moment than the stack.
  if (ok && !capture.segments.empty()) {
    size_t k = 0;
    while (k < n && !in_code(frames[k])) ++k;
    const JavaSegment& s0 = capture.segments.front();
    if (k < n && (frames[k].pc < s0.blob_lo || frames[k].pc >= s0.blob_hi)) ok = false;
  }
  if (!ok) {
    // Nothing of this moment: each run of code-cache frames says so (a
    // frame a perf map named keeps its name).
    for (; i < n; ++i) {
      if (!in_code(frames[i]) || (frames[i].jit() && !frames[i].symbol.empty())) {
        out.push_back(std::move(frames[i]));
        continue;
      }
      if (out.empty() || out.back().symbol != kJavaUnreadable) {
        out.push_back(unreadable());
        stats.unreadable++;
      }
    }
    frames = std::move(out);
    return;
  }
  bool synced = true;  // the native walk is where the Java one says
  for (size_t k = 0; k < capture.segments.size(); ++k) {
    const JavaSegment& seg = capture.segments[k];
    if (synced)
      while (i < n && !in_code(frames[i])) out.push_back(std::move(frames[i++]));
    for (const JavaFrame& j : seg.frames) {
      out.push_back(java_frame(j));
      (j.kind == JavaFrame::Kind::Unreadable ? stats.unreadable : stats.read)++;
    }
    if (seg.cut) {  // the walk stopped short of the segment's end
      out.push_back(unreadable());
      stats.unreadable++;
    }
    // The native walk goes on at the C++ frame the call stub returns to,
    // if it got that far; the frames between are code-cache frames.
    size_t j = i;
    while (synced && seg.exit_pc && j < n && frames[j].pc != seg.exit_pc) ++j;
    if (synced && seg.exit_pc && !seg.cut && j < n) {
      i = j;
    } else {
      synced = false;  // the rest of the native walk cannot be placed
      i = n;
    }
  }
  // After the thread's first Java call: the C++ that started it.
  for (; synced && i < n; ++i) {
    if (in_code(frames[i])) {  // code-cache frames the walk did not account for
      if (out.empty() || out.back().symbol != kJavaUnreadable) {
        out.push_back(unreadable());
        stats.unreadable++;
      }
      continue;
    }
    out.push_back(std::move(frames[i]));
  }
  frames = std::move(out);
}

}  // namespace jankbpf::runtime
