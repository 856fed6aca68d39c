// Places a thread's Python frames where its native stack runs them: each
// _PyEval_EvalFrameDefault frame runs the Python frames from the current
// one down to the next entry frame (one C call may run several Python
// frames: calls between Python functions do not recurse in C since 3.11).
#pragma once

#include <cstdint>

#include "runtime/hotspot_frames.h"
#include "runtime/python_frames.h"
#include "runtime/v8_frames.h"
#include "stack/stack.h"

namespace jankbpf::runtime {

inline constexpr const char* kPythonUnreadable = "[python: unreadable]";
inline constexpr const char* kJsUnreadable = "[js: unreadable]";
inline constexpr const char* kJavaUnreadable = "[java: unreadable]";

// Which runtime a process runs, as far as its frames are read.
enum class RuntimeKind : uint8_t { Native, Python, V8, Java };

// What the ring thread read of a sample's runtime frames.
struct RuntimeCapture {
  PyCapture python;
  JsCapture js;
  JavaCapture java;
  bool any() const {
    return python.status != PyCapture::Status::None || js.status != JsCapture::Status::None ||
           java.status != JavaCapture::Status::None;
  }
};

struct RuntimeFrameStats {
  uint64_t read = 0;        // Python and JavaScript frames placed in stacks
  uint64_t unreadable = 0;  // places a Python frame should be but could not be read
};

// Inserts `capture`'s frames (leaf first) into `stack` (leaf first), each
// eval call's frames just leafward of its _PyEval_EvalFrameDefault frame;
// frames left over (a native stack cut short) go at the root end. A
// `python_process` whose capture failed, was read too late (after the
// sample by more than the ring thread allows, or after the task ended), or does not fit
// the native stack (a whole native stack whose eval frames are not as
// many as the eval calls the frames read show: the thread had moved on)
// gets one "[python: unreadable]" frame at each eval frame instead: never
// frames of another moment.
// `task_end_ns`: frames read after it (CLOCK_MONOTONIC) are refused.
void interleave_python(stack::ResolvedStack& stack, const PyCapture& capture, bool python_process,
                       uint64_t task_end_ns, RuntimeFrameStats& stats);

// Names the native frames that run JavaScript -- JIT code, V8's
// interpreter and baseline entry points -- after the functions `capture`
// read (leaf first): each JS frame is placed by its return address, which
// the unwound stack's next frame has as its pc. In a `v8_process` whose
// capture is missing, late (read after `task_end_ns`) or failed for a
// frame, such frames become "[js: unreadable]"; a JIT frame the capture
// does not place (a stub, a typed frame) stays as it is. JS frames rootward
// of where a native walk ended early are added at the root end.
void interleave_js(stack::ResolvedStack& stack, const JsCapture& capture, bool v8_process, uint64_t task_end_ns,
                   RuntimeFrameStats& stats);

// Puts a HotSpot thread's Java frames (interleave_java.cpp) where the native
// stack runs them: the native frames in the JVM's code cache (which the
// native unwinder follows by frame pointers, wrong through compiled code)
// are replaced by `capture`'s segments, each from where the native walk
// enters the code cache to the C++ frame its call stub returns to (the
// native walk goes on there); what a native walk cut short could not
// reach goes at the root end. In a `java_process` whose capture is
// missing, failed, late (after `task_end_ns`) or does not fit the native
// stack, each run of code-cache frames becomes "[java: unreadable]".
void interleave_java(stack::ResolvedStack& stack, const JavaCapture& capture, bool java_process,
                     uint64_t task_end_ns, RuntimeFrameStats& stats);

// A frame of the given Python function, as the stack library models it.
stack::Frame python_frame(const PyFrame& f);

}  // namespace jankbpf::runtime
