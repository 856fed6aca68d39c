// `jankbpf --check`: every kernel feature jankbpf relies on, tried on this
// kernel (BPF programs loaded, not attached; perf events opened, not
// enabled), printed as a table with what replaces what is missing.
#pragma once

#include "cli/options.h"

namespace jankbpf {

// Prints the table on stdout; returns kExitOk when jankbpf can run here
// (its BPF programs load), kExitFailure otherwise.
int run_check(const Options& opts);

}  // namespace jankbpf
