#include "cause/kernel_causes.h"

#include <cstdint>
#include <cstring>

#include "cause/kernel_names.h"
#include "cause/kinds.h"

namespace jankbpf::cause {
namespace {

double ms_of(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

void describe_lock(const jb_klock_info& k, CauseSlice& c, Identities& ids) {
  c.has_address = true;
  c.address = k.addr;
  c.lock_class = lock_class(k.flags);
  c.lock_mode = lock_mode(k.flags);
  // The thread's own mm's lock is known by its address; a static lock by
  // its symbol (kallsyms lists data with CONFIG_KALLSYMS_ALL only).
  c.lock_name = (k.flags & JB_KLF_MMAP) ? "mmap_lock" : ids.kernel_object(k.addr);
  if (k.flags & JB_KLF_OWNER) {
    CauseThread o;
    o.pid = static_cast<pid_t>(k.owner_pid);
    o.tid = static_cast<pid_t>(k.owner_tid);
    o.comm = safe_name(std::string(k.owner_comm, strnlen(k.owner_comm, sizeof k.owner_comm)), 64);
    if (o.comm.empty()) o.comm = ids.thread_comm(o.pid, o.tid);
    c.owner = std::move(o);
    c.owner_reader_hint = k.flags & JB_KLF_READER_OWNED;
    if (k.owner_frames > 0) {
      for (int i = 0; i < k.owner_frames && i < JB_KLOCK_FRAMES && k.owner_stack[i]; i++)
        c.owner_kernel_stack.push_back(ids.kernel_text(k.owner_stack[i]));
    } else if (k.owner_frames == -95 || k.owner_frames == 0) {
      c.owner_stack_missing = "not taken: needs bpf_task_from_pid (6.2+) and the timer watchdog";
    } else {
      // Widened first: the record is read as hostile, and -INT_MIN is UB.
      c.owner_stack_missing = "bpf_get_task_stack failed: errno " + std::to_string(-int64_t{k.owner_frames});
    }
  }
}

}  // namespace

bool is_kernel_window(uint32_t kind) {
  return kind == JB_CAUSE_RECLAIM || kind == JB_CAUSE_COMPACTION || kind == JB_CAUSE_KERNEL_LOCK;
}

void describe_kernel_slice(const jb_cause_slice& s, CauseSlice& c, Identities& ids) {
  switch (s.kind) {
    case JB_CAUSE_KERNEL_LOCK:
      describe_lock(s.klock, c, ids);
      break;
    case JB_CAUSE_RECLAIM:
      c.memcg_reclaim = s.key != 0;
      if (s.key) {
        CgroupInfo cg = ids.cgroup(s.key, s.hierarchy_id);
        c.cgroup = cg.path;
        c.cgroup_fs = cg.fs;
      }
      break;
    default:
      break;
  }
}

void add_kernel_windows(const jb_cause_event& e, std::vector<CauseSlice>& slices, Identities& ids) {
  for (uint32_t k : {JB_CAUSE_RECLAIM, JB_CAUSE_COMPACTION, JB_CAUSE_KERNEL_LOCK}) {
    if (!e.win_count[k]) continue;
    const std::string name(kind_name(k));
    CauseSlice* first = nullptr;
    for (auto& c : slices)
      if (c.kind == name && (!first || c.ms > first->ms)) first = &c;
    if (!first) {
      // Windows all on the CPU (a reclaim that never slept): no off-CPU
      // time, yet a cause a person acts on.
      CauseSlice c;
      c.kind = name;
      if (k == JB_CAUSE_RECLAIM) {
        jb_cause_slice s{};
        s.kind = k;
        s.key = e.reclaim_memcg ? e.reclaim_cgroup_id : 0;
        s.hierarchy_id = e.reclaim_hierarchy_id;
        describe_kernel_slice(s, c, ids);
      }
      slices.push_back(std::move(c));
      first = &slices.back();
    }
    first->window_ms = ms_of(e.win_ns[k]);
    first->windows = e.win_count[k];
  }
}

}  // namespace jankbpf::cause
