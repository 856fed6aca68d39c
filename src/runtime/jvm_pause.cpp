#include "runtime/jvm_pause.h"

#include <cctype>
#include <string_view>

namespace jankbpf::runtime {

const char* vm_operation_kind(const std::string& op) {
  std::string_view o(op);
  if (o.find("Collect") != std::string_view::npos || o.find("GC") != std::string_view::npos ||
      o.starts_with("G1") || o.starts_with("Shenandoah") || o.starts_with("Parallel") || o.starts_with("Gen") ||
      (o.size() > 1 && o[0] == 'Z' && std::isupper(static_cast<unsigned char>(o[1]))))
    return "gc";
  return "safepoint";
}

std::optional<PauseSample> jvm_pause_of(const stack::ResolvedStack& s, const JavaCapture& c) {
  bool stopped = false, requested = false, gc_frames = false, symbols = false;
  for (const auto& f : s.frames) {
    if (f.kernel() || f.is_runtime() || f.symbol.empty()) continue;
    std::string_view sym(f.symbol);
    if (f.module.ends_with("/libjvm.so")) symbols = true;
    // Where a Java thread blocks for a safepoint (its poll, or coming back
    // from native code during one), and where it waits for a VM operation
    // it handed the VM thread.
    if (sym.starts_with("SafepointSynchronize::block") || sym.starts_with("SafepointMechanism::process") ||
        sym.starts_with("ThreadSafepointState::handle_polling_page_exception") ||
        sym.starts_with("JavaThread::check_safepoint_and_suspend_for_native_trans"))
      stopped = true;
    if (sym.starts_with("VMThread::execute") || sym.starts_with("VMThread::wait_until_executed")) requested = true;
    if (sym.starts_with("JVM_GC") || sym.find("CollectedHeap::collect") != std::string_view::npos ||
        sym.find("CollectedHeap::try_collect") != std::string_view::npos ||
        sym.find("CollectedHeap::attempt_allocation_slow") != std::string_view::npos)
      gc_frames = true;
  }
  const JvmState& st = c.jvm;
  // Without libjvm's names: the thread blocked while a safepoint was on.
  if (!stopped && !requested && !(!symbols && st.known && st.blocked && st.safepoint)) return std::nullopt;
  PauseSample p;
  if (st.known && st.safepoint) p.operation = st.operation;
  p.kind = !p.operation.empty() ? vm_operation_kind(p.operation) : gc_frames ? "gc" : "safepoint";
  return p;
}

}  // namespace jankbpf::runtime
