// How the kernel side runs, as the user may force it (--watchdog, --hooks);
// `Auto` lets the feature probes choose. Shared by the CLI and the loader.
#pragma once

namespace jankbpf {

// How running tasks are checked: a bpf_timer per thread, or a cpu-clock tick.
enum class WatchdogMode { Auto, Timer, Scan };
// How the waits are hooked: BPF trampolines (fentry/fexit) on their kernel
// functions, or per-syscall tracepoints.
enum class HookKind { Auto, Trampoline, Tracepoint, RawTracepoint };

}  // namespace jankbpf
