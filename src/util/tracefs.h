// Where tracefs is, mounting it when it is not: libbpf resolves tracepoint
// ids through it, and trace capture uses it.
#pragma once

#include <string>

namespace jankbpf::tracefs {

// The tracefs root ("/sys/kernel/tracing" or the debugfs one), mounting
// /sys/kernel/tracing when neither is there. Empty, with *error set, when
// tracefs cannot be had.
const std::string& root(std::string* error = nullptr);

// Whether the tracepoint CATEGORY:NAME exists on this kernel.
bool has_event(const std::string& category, const std::string& name);

}  // namespace jankbpf::tracefs
