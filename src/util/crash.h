// A fatal signal in jankbpf (a bug: it must not happen) says where it came
// from on stderr before the process dies: the thread, the signal, the
// faulting address and a raw backtrace (module+offset, for addr2line), so a
// crash on a machine we cannot debug on (a user's, a qemu guest) is found.
#pragma once

namespace jankbpf {

void install_crash_report();

}  // namespace jankbpf
