// JavaScript frames named in place (runtime/interleave.h): unlike
// CPython's, V8's frames are on the native stack itself.
#include <string_view>

#include "runtime/interleave.h"

namespace jankbpf::runtime {
namespace {

// A native frame that runs a JS function: JIT code (optimized, baseline,
// regexp), or the interpreter's entry points in the binary's builtins.
bool runs_js(const stack::Frame& f) {
  if (f.kernel() || f.is_runtime() || f.inlined()) return false;
  if (f.jit()) return true;
  std::string_view s(f.symbol);
  return s.starts_with("Builtins_InterpreterEntryTrampoline") || s.starts_with("Builtins_InterpreterEnterAt") ||
         s.starts_with("Builtins_BaselineOutOfLinePrologue") || s.starts_with("Builtins_BaselineOrInterpreterEnter");
}

void set_js(stack::Frame& f, std::string name, std::string file, uint32_t line, uint32_t column) {
  f.runtime = "js";
  f.symbol = std::move(name);
  f.file = std::move(file);
  f.line = line;
  f.column = column;
  f.symbol_offset = 0;
  f.module.clear();  // a JS function is in no module: module_index -1 like Python's
  f.build_id.clear();
  f.flags &= ~stack::kFrameJit;
}

}  // namespace

void interleave_js(stack::ResolvedStack& stack, const JsCapture& capture, bool v8_process, uint64_t task_end_ns,
                   RuntimeFrameStats& stats) {
  bool ok = capture.status == JsCapture::Status::Ok && capture.read_ns <= task_end_ns;
  if (!ok && !v8_process && capture.status == JsCapture::Status::None) return;
  auto& frames = stack.frames;
  if (ok) {
    size_t from = 1;
    size_t placed_up_to = 0;  // capture frames leafward of this one were placed or passed
    for (size_t k = 0; k < capture.frames.size(); ++k) {
      const JsFrame& j = capture.frames[k];
      size_t i = from;
      while (i < frames.size() && (frames[i].kernel() || frames[i].is_runtime() || frames[i].pc != j.caller_pc)) ++i;
      if (i == frames.size()) continue;  // a frame this stack does not show (its walk ended before)
      from = i + 1;
      placed_up_to = k + 1;
      stack::Frame& f = frames[i - 1];
      if (!runs_js(f)) continue;  // a builtin with a native name, or a C++ frame that looked like one
      if (j.unreadable && f.jit() && !f.symbol.empty()) continue;  // the perf map's name stands
      if (j.unreadable) {
        set_js(f, kJsUnreadable, "", 0, 0);
        stats.unreadable++;
      } else {
        set_js(f, j.name.empty() ? "(anonymous)" : j.name, j.file, j.line, j.column);
        stats.read++;
      }
    }
    // A native walk that ended early (a leaf whose unwind information
    // fails, the copied window's end) is continued by the JS frames rootward
    // of it, as the frame-pointer chain found them: the gap between is
    // native frames that could not be recovered, and the last native frame
    // keeps its truncated mark.
    if (stack.stop != stack::UnwindStop::Complete && stack.stop != stack::UnwindStop::MaxDepth)
      for (size_t k = placed_up_to; k < capture.frames.size(); ++k) {
        const JsFrame& j = capture.frames[k];
        if (j.unreadable) continue;
        stack::Frame f;
        set_js(f, j.name.empty() ? "(anonymous)" : j.name, j.file, j.line, j.column);
        frames.push_back(std::move(f));
        stats.read++;
      }
    return;
  }
  // Nothing read of this moment: the JS frames say so rather than guess.
  for (size_t i = 0; i < frames.size(); ++i)
    if (runs_js(frames[i]) && !(frames[i].jit() && !frames[i].symbol.empty())) {  // a perf map's name stands
      set_js(frames[i], kJsUnreadable, "", 0, 0);
      stats.unreadable++;
    }
}

}  // namespace jankbpf::runtime
