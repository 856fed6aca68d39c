#include "cause/attribute.h"

#include <algorithm>
#include <cstring>

#include "cause/kernel_causes.h"
#include "cause/kinds.h"
#include "cause/syscalls.h"
#include "cause/why.h"
#include "stack/tree.h"

namespace jankbpf::cause {
namespace {

// Below this a remainder is rounding, not time: records print ms with three
// decimals, and their slices must sum to the non-running time at that grain.
constexpr double kMinMs = 0.001;
constexpr size_t kStackFrames = 6;

double ms_of(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// Time of these kinds is off the CPU asleep (S or D); the others queued.
bool asleep_kind(uint32_t kind) { return kind != JB_CAUSE_RUNNABLE && kind != JB_CAUSE_THROTTLED; }

std::string kstring(const char* s, size_t max) { return safe_name(std::string(s, strnlen(s, max)), max); }

// The C library, the loader, the vDSO: where a sleep or a wait is made,
// never what a person would change.
bool system_module(const std::string& module) {
  const std::string base = module.substr(module.rfind('/') + 1);
  for (const char* p : {"libc.so", "libc-", "ld-linux", "ld-musl", "libpthread", "[vdso]", "libstdc++"})
    if (base.compare(0, strlen(p), p) == 0) return true;
  return false;
}

std::string file_line(const stack::Frame& f) {
  if (f.file.empty()) return "";
  std::string base = f.file.substr(f.file.rfind('/') + 1);
  return f.line ? base + ":" + std::to_string(f.line) : base;
}

std::string frame_text(const stack::Frame& f) {
  std::string name = f.symbol.empty() ? f.module.substr(f.module.rfind('/') + 1) : f.symbol;
  if (name.empty()) return "";
  std::string where = file_line(f);
  return safe_name(where.empty() ? name : name + " (" + where + ")", 300);
}

// What a followed thread's samples say: the acting frame of their heaviest
// path and a few frames of it.
void describe_samples(const std::vector<const stack::ResolvedStack*>& samples, CauseThread& t) {
  if (samples.empty()) return;
  stack::StackTree tree;
  for (const auto* s : samples) tree.add(*s);
  bool picked = false;
  for (const auto& line : tree.heaviest_path()) {
    if (!line.frame) continue;
    const stack::Frame& f = *line.frame;
    if (f.kernel()) continue;
    std::string text = frame_text(f);
    if (text.empty()) continue;
    if (t.stack.size() < kStackFrames) t.stack.push_back(text);
    // The function a person edits: an inlined helper names the one it is in.
    if (!picked && !f.symbol.empty() && !f.inlined() && !system_module(f.module)) {
      t.function = safe_name(f.symbol, 200);
      t.file = file_line(f);
      picked = true;
    }
  }
}

CauseThread waker_of(const jb_cause_slice& s, Identities& ids, StackSource& stacks) {
  CauseThread w;
  w.pid = static_cast<pid_t>(s.waker_pid);
  w.tid = static_cast<pid_t>(s.waker_tid);
  w.comm = kstring(s.waker_comm, sizeof s.waker_comm);
  if (w.comm.empty()) w.comm = ids.thread_comm(w.pid, w.tid);
  w.verified = true;  // the kernel's sched_waking named it
  // Not followed itself, yet sampled as a thread of a peer process.
  auto samples = stacks.samples(w.tid, s.max_off_ns, s.max_off_ns + s.max_ns);
  w.samples = static_cast<uint32_t>(samples.size());
  describe_samples(samples, w);
  return w;
}

// A subject's record as a thread: what it did while followed.
CauseThread subject_thread(const jb_subject_event& s, Identities& ids, StackSource& stacks) {
  CauseThread t;
  t.tid = static_cast<pid_t>(s.tid);
  t.pid = static_cast<pid_t>(s.pid);
  t.comm = kstring(s.comm, sizeof s.comm);
  if (t.comm.empty() && t.pid) t.comm = ids.thread_comm(t.pid, t.tid);
  t.followed = s.pid != 0;
  t.followed_ms = s.until_ns > s.since_ns ? ms_of(s.until_ns - s.since_ns) : 0;
  t.state.running_ms = ms_of(s.state_ns[JB_ST_RUNNING]);
  t.state.runnable_ms = ms_of(s.state_ns[JB_ST_RUNNABLE]);
  t.state.sleeping_ms = ms_of(s.state_ns[JB_ST_SLEEPING]);
  t.state.blocked_io_ms = ms_of(s.state_ns[JB_ST_BLOCKED]);
  t.samples = s.samples;
  if (t.followed) describe_samples(stacks.samples(t.tid, s.since_ns, s.until_ns), t);
  return t;
}

// The subject record of tid whose watch overlaps [from_ns, to_ns] (a thread
// followed during another stretch of the task says nothing of this one).
const jb_subject_event* find_subject(const Evidence& ev, pid_t tid, uint64_t from_ns, uint64_t to_ns,
                                     uint32_t role = 0) {
  for (const auto& s : ev.subjects)
    if (static_cast<pid_t>(s.tid) == tid && (!role || s.role == role) && !(s.flags & JB_CSF_FOREIGN) &&
        s.since_ns <= to_ns && s.until_ns >= from_ns)
      return &s;
  return nullptr;
}

// A subject's record, for a thread already named by the kernel (a waker):
// its split and samples, keeping the names the wakeup gave.
CauseThread with_subject(CauseThread named, const jb_subject_event& s, const Evidence& ev, Identities& ids,
                         StackSource& stacks);

void add_chain(CauseThread& t, const jb_subject_event& s, const Evidence& ev, Identities& ids, StackSource& stacks);

CauseThread with_subject(CauseThread named, const jb_subject_event& s, const Evidence& ev, Identities& ids,
                         StackSource& stacks) {
  CauseThread t = subject_thread(s, ids, stacks);
  if (!t.followed) return named;  // never seen switching: nothing to add
  if (t.comm.empty()) t.comm = named.comm;
  if (!t.pid) t.pid = named.pid;
  if (t.function.empty() && !named.function.empty()) {  // sampled as a peer process's thread
    t.function = named.function;
    t.file = named.file;
    t.stack = named.stack;
  }
  t.samples = std::max(t.samples, named.samples);
  t.verified = named.verified;
  t.claim = named.claim;
  add_chain(t, s, ev, ids, stacks);
  return t;
}

// One level on: what a followed thread itself waited for during the watch.
void add_chain(CauseThread& t, const jb_subject_event& s, const Evidence& ev, Identities& ids, StackSource& stacks) {
  const double asleep = ms_of(s.state_ns[JB_ST_SLEEPING] + s.state_ns[JB_ST_BLOCKED]);
  const bool woken = (s.flags & JB_CSF_WOKEN) && !(s.flags & JB_CSF_NO_WAKER) && s.waker_tid;
  // Its wait is known if it began while followed; who ended it, if a thread did.
  if (asleep < 1.0 || (s.wait_nr < 0 && !woken)) return;
  const bool futex = s.flags & JB_CSF_FUTEX_WAIT;
  t.waited_syscall = syscall_text(s.wait_nr, s.flags & JB_CSF_COMPAT);
  t.waited_kind = futex ? "lock" : "peer";
  if (futex) t.waited_address = s.wait_addr;
  const jb_subject_event* chain = nullptr;
  for (const auto& c : ev.subjects)
    if (c.role == JB_SUBJ_CHAIN && c.via == s.tid && !(c.flags & JB_CSF_FOREIGN)) chain = &c;
  CauseThread next;
  if (chain) {
    next = subject_thread(*chain, ids, stacks);
    next.claim = true;  // named by its lock's owner field
  } else if ((s.flags & JB_CSF_WOKEN) && !(s.flags & JB_CSF_NO_WAKER) && s.waker_tid) {
    next.pid = static_cast<pid_t>(s.waker_pid);
    next.tid = static_cast<pid_t>(s.waker_tid);
    next.comm = kstring(s.waker_comm, sizeof s.waker_comm);
    // A thread of a peer process, sampled as such while the watch lasted.
    auto samples = stacks.samples(next.tid, s.since_ns, s.until_ns);
    next.samples = static_cast<uint32_t>(samples.size());
    describe_samples(samples, next);
  } else {
    return;
  }
  next.verified = (s.flags & JB_CSF_WOKEN) && s.waker_tid && static_cast<pid_t>(s.waker_tid) == next.tid;
  t.next.push_back(std::move(next));
}

// The off-CPU entry made at a stretch's switch-out (it carries its kernel stack).
const OffCpuInfo* off_cpu_at(const TaskRecord& rec, uint64_t off_ns) {
  for (const auto& o : rec.off_cpu)
    if (o.off_ns == off_ns) return &o;
  return nullptr;
}

// fault: the file at the faulting addresses and their range; io: the
// device (of the fd's file: the requests' own is added by attribute()).
// Both: the code that was waiting (its user frame) and its kernel stack.
void fault_or_io(CauseSlice& c, const jb_cause_slice& s, const TaskRecord& rec, const Evidence& ev, Identities& ids,
                 StackSource& stacks) {
  const pid_t pid = rec.proc.pid;
  if (const auto* cap = stacks.capture(rec.tid, s.max_off_ns)) c.frame = acting_frame(*cap);
  if (const auto* o = off_cpu_at(rec, s.max_off_ns)) c.kernel_stack = o->kernel_stack;
  if (s.kind == JB_CAUSE_IO) {
    BlockDevice d;
    if (c.fd >= 0 && ids.fd_device(pid, c.fd, &d)) {
      c.device = d.id();
      c.device_name = ids.device_name(d.major, d.minor);
    }
    return;
  }
  c.syscall.clear();  // an exception, not a syscall
  if (!(s.flags & JB_CSF_FAULT_ADDR)) return;
  c.has_address = true;
  c.address = s.arg0;
  if (ev.causes) c.faults = ev.causes->io.faults;
  const MappedFile f = ids.mapped_file(pid, s.arg0);
  if (!f.found) {
    c.address_where = ids.address_where(pid, s.arg0);  // anonymous memory: swap-in
    return;
  }
  c.file = f.name();
  c.has_offsets = true;
  c.offset_lo = f.offset;
  c.offset_hi = f.offset + 4096;
  if (!ev.causes) return;
  // The range of all its faulting addresses, when they lie in that same file.
  for (uint64_t a : {ev.causes->io.fault_lo, ev.causes->io.fault_hi}) {
    if (!a) continue;
    const MappedFile g = ids.mapped_file(pid, a);
    if (!g.found || g.inode != f.inode || g.dev_major != f.dev_major || g.dev_minor != f.dev_minor) continue;
    c.offset_lo = std::min(c.offset_lo, g.offset & ~uint64_t{4095});
    c.offset_hi = std::max(c.offset_hi, (g.offset | 4095) + 1);
  }
  c.offset_lo &= ~uint64_t{4095};
}

CauseSlice slice_of(const jb_cause_slice& s, const TaskRecord& rec, const Evidence& ev, Identities& ids,
                    StackSource& stacks) {
  CauseSlice c;
  c.kind = std::string(kind_name(s.kind));
  c.ms = ms_of(s.ns);
  c.count = s.count;
  const bool compat = s.flags & JB_CSF_COMPAT;
  c.syscall = syscall_text(s.nr, compat);
  if (asleep_kind(s.kind)) c.state = s.flags & JB_CSF_BLOCKED ? "blocked_io" : "sleeping";
  c.in_interrupt = s.flags & JB_CSF_IRQ;
  c.waker_unknown = (s.flags & JB_CSF_CTX_UNKNOWN) && !c.in_interrupt;
  c.by_kernel = s.flags & JB_CSF_KTHREAD;
  const pid_t pid = rec.proc.pid;
  const bool task_waker = (s.flags & JB_CSF_WOKEN) && !c.in_interrupt && s.waker_tid;
  const uint64_t from = s.max_off_ns, to = s.max_off_ns + s.max_ns;  // its longest stretch
  if (!compat && s.nr >= 0 && first_arg_is_fd(s.nr) && s.arg0 < (1u << 30)) {
    c.fd = static_cast<int>(s.arg0);
    c.fd_path = ids.fd_path(pid, c.fd);
  }
  switch (s.kind) {
    case JB_CAUSE_THROTTLED: {
      CgroupInfo cg = ids.cgroup(s.cgroup_id, s.hierarchy_id);
      c.cgroup = cg.path;
      c.cgroup_fs = cg.fs;
      c.quota = cg.quota;
      break;
    }
    case JB_CAUSE_LOCK: {
      c.has_address = true;
      c.address = s.arg0;
      c.address_where = ids.address_where(pid, s.arg0);
      if (task_waker) {
        c.waker = waker_of(s, ids, stacks);
        if (const auto* sub = find_subject(ev, c.waker->tid, from, to))
          c.waker = with_subject(*c.waker, *sub, ev, ids, stacks);
      }
      // The owner glibc's mutex names, if it is a thread of this process:
      // a claim read from the process's own memory.
      const pid_t claim = static_cast<pid_t>(s.claim);
      const bool released_by_claim = c.waker && c.waker->tid == claim && c.waker->pid == pid;
      if (claim > 0 && claim != rec.tid && (released_by_claim || ids.thread_in(pid, claim))) {
        CauseThread o;
        if (c.waker && c.waker->tid == claim) {
          o = *c.waker;  // the owner released it: the claim holds
        } else {
          o.tid = claim;
          o.comm = ids.thread_comm(pid, claim);
          auto samples = stacks.samples(claim, from, to);
          o.samples = static_cast<uint32_t>(samples.size());
          describe_samples(samples, o);
          if (const auto* sub = find_subject(ev, claim, from, to, JB_SUBJ_OWNER)) o = with_subject(o, *sub, ev, ids, stacks);
        }
        o.pid = pid;
        o.claim = true;
        o.verified = c.waker && c.waker->tid == claim;
        c.owner = std::move(o);
      } else if (task_waker) {
        // No owner to name (a condition variable, a semaphore, a lock
        // without an owner field): the thread that woke it is a peer.
        c.kind = "peer";
      }
      break;
    }
    case JB_CAUSE_PEER:
      if (task_waker) {
        c.waker = waker_of(s, ids, stacks);
        if (const auto* sub = find_subject(ev, c.waker->tid, from, to))
          c.waker = with_subject(*c.waker, *sub, ev, ids, stacks);
      }
      break;
    case JB_CAUSE_RUNNABLE: {
      c.preempted = ev.causes ? ev.causes->preempted : 0;
      std::vector<CpuTaskInfo> tasks;
      double others = ev.causes ? ms_of(ev.causes->cpu.other_ns) : 0;
      if (ev.causes)
        for (const auto& t : ev.causes->cpu.task)
          if (t.ns)
            tasks.push_back({static_cast<pid_t>(t.pid), static_cast<pid_t>(t.tid), kstring(t.comm, sizeof t.comm),
                             ms_of(t.ns)});
      std::stable_sort(tasks.begin(), tasks.end(), [](const auto& a, const auto& b) { return a.ms > b.ms; });
      while (tasks.size() > 3) {
        others += tasks.back().ms;
        tasks.pop_back();
      }
      c.cpu_tasks = std::move(tasks);
      c.cpu_others_ms = others;
      break;
    }
    case JB_CAUSE_FAULT:
    case JB_CAUSE_IO:
      fault_or_io(c, s, rec, ev, ids, stacks);
      [[fallthrough]];  // and their kernel windows, as the kernel kinds
    case JB_CAUSE_RECLAIM:
    case JB_CAUSE_COMPACTION:
    case JB_CAUSE_KERNEL_LOCK:
      describe_kernel_slice(s, c, ids);
      break;
    case JB_CAUSE_SLEEP:
    case JB_CAUSE_OTHER: {
      if (const auto* cap = stacks.capture(rec.tid, s.max_off_ns)) c.frame = acting_frame(*cap);
      if (s.kind == JB_CAUSE_OTHER) {
        if (const auto* o = off_cpu_at(rec, s.max_off_ns)) c.kernel_stack = o->kernel_stack;
        if (task_waker && c.by_kernel) c.waker = waker_of(s, ids, stacks);
      }
      break;
    }
    default:
      break;
  }
  return c;
}

// The asleep state of time past the slots: the slots do not say whether
// it slept in S or D, the state split's totals less the slots' do (a storm
// of wakers each with a slot of its own left a peer's rest stateless, and
// the asleep slices short of the split: CI on eb1e653).
class StateLeft {
 public:
  explicit StateLeft(const TaskRecord& rec) : sleeping_(rec.state.sleeping_ms), blocked_(rec.state.blocked_io_ms) {
    for (const auto& c : rec.cause) {
      if (c.state == "sleeping") sleeping_ -= c.ms;
      if (c.state == "blocked_io") blocked_ -= c.ms;
    }
  }
  // The state of `ms` of kind k: its kind's usual one, unless the split has
  // less than half of it left there and more in the other.
  std::string take(uint32_t kind, double ms) {
    if (!asleep_kind(kind)) return "";
    const bool d = kind == JB_CAUSE_FAULT || kind == JB_CAUSE_IO;
    double& usual = d ? blocked_ : sleeping_;
    double& other = d ? sleeping_ : blocked_;
    const bool flip = usual < ms / 2 && other > usual;
    (flip ? other : usual) -= ms;
    return (d != flip) ? "blocked_io" : "sleeping";
  }

 private:
  double sleeping_, blocked_;
};

// The block requests the thread issued in the task, on its largest io
// slice (they are counted per task, not per wait); their device names it.
void add_requests(TaskRecord& rec, const Evidence& ev, Identities& ids) {
  if (!ev.causes || !ev.causes->io.rqs) return;
  const jb_cause_io& io = ev.causes->io;
  CauseSlice* best = nullptr;
  for (auto& c : rec.cause)
    if (c.kind == "io" && (!best || c.ms > best->ms)) best = &c;
  if (!best) return;
  best->requests = io.rqs;
  best->bytes = io.bytes;
  best->requests_done = io.done;
  best->device_ms = ms_of(io.lat_ns);
  best->device_max_ms = ms_of(io.lat_max_ns);
  const BlockDevice d = kernel_dev(io.dev);
  if (io.dev) {
    best->device = d.id();
    best->device_name = ids.device_name(d.major, d.minor);
  }
}

}  // namespace

std::string acting_frame(const stack::ResolvedStack& s, std::string* file) {
  for (size_t i = s.kernel_frames; i < s.frames.size(); i++) {
    const stack::Frame& f = s.frames[i];
    if (f.kernel() || f.symbol.empty() || f.inlined() || system_module(f.module)) continue;
    if (file) *file = file_line(f);
    return frame_text(f);
  }
  return "";
}

void attribute(TaskRecord& rec, const Evidence& ev, bool enabled, Identities& ids, StackSource& stacks) {
  rec.cause.clear();
  rec.why.clear();
  rec.causes_known = enabled;
  if (!enabled) return;
  const double nonrun = rec.state.runnable_ms + rec.state.sleeping_ms + rec.state.blocked_io_ms;
  if (ev.causes) {
    const jb_cause_event& e = *ev.causes;
    double per_kind[JB_CAUSE_NR] = {};
    const size_t n = std::min<size_t>(e.nslices, JB_CAUSE_SLOTS);
    for (size_t i = 0; i < n; i++) {
      const jb_cause_slice& s = e.slices[i];
      if (s.kind == JB_CAUSE_NONE || s.kind >= JB_CAUSE_NR || !s.ns) continue;
      per_kind[s.kind] += ms_of(s.ns);
      rec.cause.push_back(slice_of(s, rec, ev, ids, stacks));
    }
    // Time of a kind past the slots: the kind is known, its identities not.
    StateLeft left(rec);
    for (uint32_t k = 1; k < JB_CAUSE_NR; k++) {
      const double rest = ms_of(e.kind_ns[k]) - per_kind[k];
      if (rest < kMinMs) continue;
      CauseSlice c{.kind = std::string(kind_name(k)), .ms = rest};
      c.state = left.take(k, rest);
      rec.cause.push_back(std::move(c));
    }
    add_kernel_windows(e, rec.cause, ids);
  }
  add_requests(rec, ev, ids);
  // The slices refine the non-running time exactly: what no evidence
  // covered (a switch no tracepoint showed) is said as such.
  double sum = 0;
  for (const auto& c : rec.cause) sum += c.ms;
  if (sum > nonrun + kMinMs && sum > 0) {
    for (auto& c : rec.cause) c.ms *= nonrun / sum;
  } else if (nonrun - sum >= kMinMs) {
    CauseSlice u;
    u.kind = "other";
    u.ms = nonrun - sum;
    u.unattributed = true;
    rec.cause.push_back(std::move(u));
  }
  std::stable_sort(rec.cause.begin(), rec.cause.end(), [](const CauseSlice& a, const CauseSlice& b) {
    return a.ms != b.ms ? a.ms > b.ms : kind_rank(a.kind) < kind_rank(b.kind);
  });
  rec.why = compose_why(rec);
}

}  // namespace jankbpf::cause
