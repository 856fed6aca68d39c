// Test seams: environment variables that only the tests (tests/e2e) set,
// to reach states a real machine reaches only under rare load. Documented
// in README (Tests); a bad value is said on stderr and ignored.
//
//   JANKBPF_MAP_ENTRIES=N          the threads, timers and procs maps get at
//                                  most N entries (map-full paths)
//   JANKBPF_TEST_ONE_RING=1        off-CPU captures share the events ring,
//                                  the layout before the captures ring
//                                  (the contrast in test_capture_ring.py)
//   JANKBPF_TEST_READER_PAUSE_MS=N the monitor reads no ring for N ms after
//                                  attaching, like a jankbpf starved of CPU
//   JANKBPF_TEST_NO_RUNTIME_READ=1 JavaScript frames are never read, as if
//                                  every read came too late
//   JANKBPF_TEST_TRACE_SETUP_DELAY_MS=N  the trace recorder's setup takes N
//                                  ms longer, as on a machine where its RCU
//                                  waits are slow
//   JANKBPF_TEST_HIDE_RETURNS=1    with syscall tracepoints, threads asleep in
//                                  a wait at attach are found as with
//                                  trampolines and that wait's return is
//                                  hidden, as a trampoline hides it
//   JANKBPF_TEST_SLOW_OPEN_MS=N    opening a watched process's file as a
//                                  module takes N ms longer when a user
//                                  other than root owns it, as on a slow
//                                  filesystem that user controls (FUSE)
//   JANKBPF_TEST_NO_IRQ_TEXT=1     the interrupt text is never read from
//                                  /proc/kallsyms, as in the seconds before
//                                  it is on a busy machine (causes.bpf.h,
//                                  waker_flags: no waker blamed)
#pragma once

#include <cstdint>

namespace jankbpf::test_seams {

uint32_t map_entries();       // 0: not set
bool one_ring();
uint32_t reader_pause_ms();   // 0: not set
bool no_runtime_read();
bool no_irq_text();
uint32_t trace_setup_delay_ms();  // 0: not set
bool hide_returns();
uint32_t slow_open_ms();          // 0: not set
uint32_t hide_switches_to();      // a tid; 0: not set
uint32_t hide_switches_from();    // a tid; 0: not set

}  // namespace jankbpf::test_seams
