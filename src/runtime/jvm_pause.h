// Whether a HotSpot thread's off-CPU capture shows it stopped by its JVM
// (issue 29): blocked at a safepoint -- for a GC or another VM operation
// -- or waiting for a VM operation it asked for itself (System.gc()),
// rather than in its own code's wait. Told by its native frames (Debian's
// libjvm has its full symbol table) and, without them, by the JVM's state
// read with the capture (the thread blocked while a safepoint is on).
#pragma once

#include <optional>
#include <string>

#include "runtime/hotspot_frames.h"
#include "stack/stack.h"

namespace jankbpf::runtime {

struct PauseSample {
  std::string kind;       // "gc" or "safepoint"
  std::string operation;  // the VM operation's class without "VM_", "" unknown
};

std::optional<PauseSample> jvm_pause_of(const stack::ResolvedStack& s, const JavaCapture& c);

// "gc" for a VM operation of a collector ("G1CollectFull",
// "ParallelGCSystemGC", "ShenandoahFullGC", "ZMarkStart", ...), else
// "safepoint".
const char* vm_operation_kind(const std::string& operation);

}  // namespace jankbpf::runtime
