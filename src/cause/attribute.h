// Attribution: the kernel's cause slices and subject records for one task
// (cause::Evidence) into the record's typed `cause` list, identities
// resolved, and its one-line `why`. The reporter calls it when it finishes
// a task's record; it reads nothing of the kernel itself.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "cause/evidence.h"
#include "cause/identity.h"
#include "model/records.h"
#include "stack/stack.h"

namespace jankbpf::cause {

// The stacks attribution may look at, gathered by the reporter.
class StackSource {
 public:
  virtual ~StackSource() = default;
  // On-CPU samples of thread tid taken in [from_ns, to_ns].
  virtual std::vector<const stack::ResolvedStack*> samples(pid_t tid, uint64_t from_ns, uint64_t to_ns) = 0;
  // The off-CPU capture of tid made at its switch-out at time_ns, or null.
  virtual const stack::ResolvedStack* capture(pid_t tid, uint64_t time_ns) = 0;
};

// Fills rec.cause (largest first) and rec.why from the evidence. `enabled`:
// the kernel side ran with causes (else the record gets none).
void attribute(TaskRecord& rec, const Evidence& ev, bool enabled, Identities& ids, StackSource& stacks);

// The innermost frame of a stack a person would act on: the first named
// user frame outside the C library, the dynamic loader and the vDSO
// ("" when there is none). *file gets "file:line" when known.
std::string acting_frame(const stack::ResolvedStack& s, std::string* file = nullptr);

}  // namespace jankbpf::cause
