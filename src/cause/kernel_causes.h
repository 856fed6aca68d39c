// The kernel causes' identities (bpf/causes_kernel.bpf.h): a kernel_lock
// slice's lock, class, owner and the owner's kernel stack; a reclaim
// slice's memory cgroup; and the windows' wall time, which says how much of
// them ran on the CPU.
#pragma once

#include <vector>

#include "cause/identity.h"
#include "jankbpf/events.h"
#include "model/records.h"

namespace jankbpf::cause {

bool is_kernel_window(uint32_t kind);

// Fills what names a reclaim, compaction or kernel_lock slice.
void describe_kernel_slice(const jb_cause_slice& s, CauseSlice& c, Identities& ids);

// The windows' wall time onto the first slice of each kind (window_ms,
// windows); a kind whose windows never left the CPU gets a slice of 0 ms
// (its ms are off-CPU time, which the slices split), so it is still said.
void add_kernel_windows(const jb_cause_event& e, std::vector<CauseSlice>& slices, Identities& ids);

}  // namespace jankbpf::cause
