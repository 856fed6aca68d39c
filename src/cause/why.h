// The one line `why`: a task's largest causes first, each naming what a
// person would act on (the owner or peer and the function it ran, the
// hog, the cgroup, the frame that slept), e.g.
//   412 ms on mutex 0x55d1c0 (lock_app+0x4040) held by holder[812], which ran crunch_a (lock.c:41) for 398 ms
#pragma once

#include <string>

#include "model/records.h"

namespace jankbpf::cause {

std::string compose_why(const TaskRecord& rec);
// One cause in words (the `why` is these joined by "; ").
std::string describe(const CauseSlice& s);
// "412 ms", "3.4 ms".
std::string ms_text(double ms);

}  // namespace jankbpf::cause
