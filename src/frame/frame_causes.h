// Where the causes work (issue 27: bpf/causes.bpf.h, src/cause/) gives a
// janky frame its `why`, as it gives a jank record's: called by the
// reporter on each frame record, after its stacks, before the sinks. Until
// that work lands it adds nothing; the record's `why` stays empty and the
// JSON sink leaves the field out.
#pragma once

#include "model/records.h"

namespace jankbpf::frame {

inline void attach_causes(FrameRecord& rec) { (void)rec; }

}  // namespace jankbpf::frame
