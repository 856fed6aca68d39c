// Time on the calling thread's own account: steady time less the time the
// thread waited runnable for a CPU (run_delay in /proc/thread-self/schedstat).
// jankbpf's budgets of its own work (one file's parse, a uid's share of the
// reporter) are spent by the work and by what it waits on (a slow
// filesystem), not by other processes keeping the CPUs busy: on a host
// loaded past its CPUs, wall time would cut the innocent's files short and
// charge their uid for the load (CI on 6f54552).
#pragma once

#include <chrono>
#include <cstdint>

namespace jankbpf::util {

// Comparable only with other own_now() values of the same thread. Steady
// time when schedstat cannot be read (the run delay then counts as 0).
std::chrono::steady_clock::time_point own_now();

// The calling thread's run delay so far, in nanoseconds (0 if unknown).
uint64_t run_delay_ns();

// Parses schedstat's "<run ns> <run_delay ns> <slices>": the second field.
bool parse_run_delay(const char* text, size_t len, uint64_t* out);

}  // namespace jankbpf::util
