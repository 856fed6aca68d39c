// Names a runtime's marker tasks after the callback that ran, from the
// task's stack: what a uprobe on a loop phase (uv__run_timers,
// g_main_context_dispatch) cannot read, the stack shows, as Firefox names
// a runnable and Android a Looper message by its target.
#pragma once

#include "model/records.h"

namespace jankbpf {

// For a task bounded by a runtime preset's uprobe marker (GLib's fallback,
// libuv's phases) with a stack: the callback is the first frame, walking
// from the marker's function toward the leaf, outside the marker's module,
// skipping the runtime's own JavaScript (Node's "node:" internals); a JIT
// frame gives the JS function's name. Leaves other records alone.
void name_runnable_from_stack(TaskRecord& r);

// For a task no marker bounded: the innermost interpreter (Python) frame
// of the heaviest path names it, when that frame could be read; past
// Node's own JavaScript and the JDK's classes (java., jdk., sun.,
// com.sun.) and HotSpot's stubs when the application's frame is further
// out. Leaves marker tasks and already named ones alone.
void name_runnable_from_runtime(TaskRecord& r);

}  // namespace jankbpf
