// A cause slice as the pictures show it (HTML report, Perfetto args): its
// identity in a few words without its times, so the same lock, peer, hog
// or cgroup reads the same in every jank and can be added up per process.
#pragma once

#include <string>

#include "model/records.h"

namespace jankbpf::report {

// "mutex 0x55c7 (app+0x5440) held by holder[812] running crunch_a (lock.c:41)",
// "chainb[28038] of pid 28038 via read on pipe:[3496627], which waited for chainc[28039] running crunch_c",
// "behind hog[28040]", "cgroup /jb-quota (quota 20000/100000)", "clock_nanosleep from nap_here (app.c:327)".
std::string cause_identity(const CauseSlice& s);

// The thread a cause blames (lock: the owner, else the waker; peer: the
// peer), nullptr when none: an interrupt's or a kernel thread's wakeup is
// never blamed.
const CauseThread* cause_thread(const CauseSlice& s);

}  // namespace jankbpf::report
