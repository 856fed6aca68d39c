#include "markers/naming.h"

#include <string_view>

namespace jankbpf {
namespace {

// "node::Environment::RunTimers(uv_timer_s*)" -> "node::Environment::RunTimers"
std::string_view function_name(std::string_view symbol) {
  int depth = 0;
  for (size_t i = symbol.size(); i-- > 0;) {
    if (symbol[i] == ')') depth++;
    else if (symbol[i] == '(' && depth > 0 && --depth == 0) return symbol.substr(0, i);
  }
  return symbol;
}

bool is_js(const StackFrame& f) { return f.jit || f.runtime == "js"; }

// Node's own JavaScript (timers, streams, crypto wrappers): what ran is the
// application's function that called it.
bool runtime_internal(const StackFrame& f) {
  if (f.runtime == "java")  // the JDK's own classes, and its stubs
    return f.symbol.starts_with("java.") || f.symbol.starts_with("jdk.") || f.symbol.starts_with("sun.") ||
           f.symbol.starts_with("com.sun.") || f.symbol.starts_with("[stub: ");
  return is_js(f) && (f.file.starts_with("node:") || f.file.starts_with("internal/"));
}

// "(anonymous)" says nothing: the file says where it was.
std::string js_name(const StackFrame& f) {
  if (f.symbol != "(anonymous)") return f.symbol;
  std::string file = f.file.substr(0, f.file.find(':', f.file.starts_with("node:") ? 5 : 0));
  return "(anonymous " + file + ")";
}

}  // namespace

void name_runnable_from_stack(TaskRecord& r) {
  if (r.boundary != Boundary::Marker || !r.marker || r.marker->runtime.empty() || r.marker->type == "usdt")
    return;
  const auto& stack = r.stack;  // leaf first
  // The marker's own frame: the outermost one of its function.
  size_t k = stack.size();
  for (size_t i = stack.size(); i-- > 0;) {
    if (!stack[i].kernel && function_name(stack[i].symbol) == r.marker->name) {
      k = i;
      break;
    }
  }
  if (k == stack.size() || k == 0) return;
  const int runtime_module = stack[k].module_index;
  for (size_t i = k; i-- > 0;) {
    const StackFrame& f = stack[i];
    if (f.kernel || f.inlined) continue;
    if (!f.jit && f.module_index == runtime_module) continue;
    if (runtime_internal(f)) continue;
    if ((f.runtime == "js" || f.runtime == "java") && !f.symbol.empty() && f.symbol.front() != '[') {
      r.runnable_name = f.runtime == "js" ? js_name(f) : f.symbol;
      return;
    }
    if (!f.symbol.empty() && f.runtime.empty()) {
      r.runnable_name = std::string(function_name(f.symbol));
      return;
    }
    if (f.jit && !f.file.empty()) {
      r.runnable_name = "(anonymous " + f.file + ")";
      return;
    }
    break;  // an unnamed frame: keep the marker's name
  }
}

void name_runnable_from_runtime(TaskRecord& r) {
  if (r.marker || !r.runnable_name.empty()) return;
  // The innermost interpreter frame, past Node's internals when the
  // application's own function is further out.
  const StackFrame* internal = nullptr;
  for (const StackFrame& f : r.stack) {  // leaf first
    if (f.runtime.empty()) continue;
    if (runtime_internal(f)) {
      if (!internal) internal = &f;
      continue;
    }
    // "[python: unreadable]": nothing to name it by, and no guess.
    if (!f.symbol.empty() && f.symbol.front() != '[') r.runnable_name = f.runtime == "js" ? js_name(f) : f.symbol;
    return;
  }
  if (internal && internal->symbol.front() != '[')
    r.runnable_name = internal->runtime == "java" ? internal->symbol : js_name(*internal);
}

}  // namespace jankbpf
